// Package ingest owns the pipeline's NATS side: the connection (an embedded
// nats-server or an external server or cluster), the JOBS, RESULTS and DLQ
// streams and their consumers, submitting jobs, the worker runtime that
// hands each job to a Handler and acts on its Outcome, the sink that feeds
// results and dead letters to a store, and readers for operator commands.
// It knows jobs only by id and schema id: no prompts, schemas or models.
// Ids are kept as given; ids.go says how subjects and keys carry them.
//
// # Connecting
//
//	conn, err := ingest.Connect(ctx, ingest.Config{DataDir: "./pipeline-data"})
//	defer conn.Close()
//
// With no URL, Connect takes an exclusive flock on DataDir/nats.lock and,
// holding it for as long as it runs the server, starts an embedded server
// on a loopback address (Listen, else the port in DataDir/nats.json when it
// is free, else a free one; any other address is refused, as the server
// has no TLS) with JetStream file storage under DataDir/nats, and writes
// DataDir/nats.json {url, pid}. The server requires the user and password
// of DataDir/nats-auth.json, made once per data dir (0600; the data dir
// is made 0700) and read by every Connect on it; Secrets returns the
// password so that callers can scrub it from what they write. Another
// Connect on the same DataDir (another command, or the same process)
// finds the lock held and joins the server named in nats.json as a
// client. A joiner watches its connection: when it drops, it tries the
// lock (the owner releases it after its server shut down, the kernel when
// the owner died); the one that gets it starts the server on the same
// port and store, and every joined client reconnects to it by itself. A
// joiner that cannot take over, or is not let back in within 20s, gives
// up: its client is closed, Lost is closed and Err says why. With a URL,
// nothing is started; CredsFile and TLSCert/TLSKey/TLSCA are passed to
// nats.go, the client reconnects forever (1s wait plus jitter) and pings
// every 5s, so a connection that went silent without closing is given up
// after about 20s rather than nats.go's 4 to 6 minutes, and errors
// name the URL without its credentials (RedactURL). The embedded server logs
// nothing unless Config.Logger is enabled at debug level. Close drains the
// connection, then shuts the embedded server down; it is safe twice.
//
// # Durability
//
// The embedded server keeps nats-server's default sync interval (2 minutes,
// Config.SyncInterval) and does not set SyncAlways. A message is written to
// the store file (the kernel's page cache) before the server acknowledges
// it, so an acknowledged job, result or dead letter survives kill -9 of the
// process: TestAckedSurvivesKill9 kills a child process after its acks and
// finds every message. What it does not survive is a power loss or kernel
// crash within the interval. Config.SyncAlways fsyncs every write first;
// measured on this 2-core shared machine (BenchmarkSubmit, 1 KB async
// publishes): about 22,000 msgs/s with the interval, about 530 msgs/s with
// SyncAlways, a 40x cost, which is why it is opt-in.
//
// # Streams and consumers
//
// JOBS (pipeline.jobs.>, work queue), RESULTS (pipeline.results.>, limits)
// and DLQ (pipeline.dlq.>, limits) are created or updated on every Connect,
// on file storage with Config.Replicas. Every message carries Nats-Msg-Id:
// the job id for a job, its result and its dead letter. The duplicate window
// (Config.DuplicateWindow, default 2 minutes; unset, the streams keep
// theirs; on RESULTS and DLQ at most their max age) should be at least twice the
// workers' AckWait, so a job redelivered after a lost ack finds its result
// already stored; past the window the sink's upserts on job id keep one
// outcome per job. Every id inside the window costs server memory.
//
// The durable pull consumer "workers" on JOBS has every setting explicit
// (AckExplicit, AckWait, MaxDeliver, BackOff, MaxAckPending >= Concurrency,
// MaxRequestBatch, MaxRequestExpires, MaxWaiting, ReplayInstant, Replicas);
// RunWorkers updates a consumer that drifted from its WorkerConfig, or fails
// with an error listing what differs. BackOff, when set, replaces AckWait
// for each delivery (the server's rule), and heartbeats are sized to its
// shortest step.
//
// # Submitting
//
// Submit publishes asynchronously, at most 4096 outstanding; when the
// publisher stalls ("too many outstanding async published messages") it
// waits for the outstanding acks and tries again, and a publish whose ack
// failed is published again with the same id. It counts duplicates (ids
// already in the stream) apart from new jobs. Items that carry a JobID are
// looked up in the job ledger first (KV bucket PIPELINE_LEDGER, see
// ledger.go): a run that ended is not published (AlreadyDone), or, with
// Rerun, published as the next run (<job id>~r<n>).
//
// # Large payloads
//
// A job, result or dead letter over InlineLimit (the connection's max
// payload minus 16 KiB for headers) is put in the object store
// PIPELINE_PAYLOADS under kind/<msg id>/<sha-256> and published with the
// headers Pipeline-Payload, -Size and -Digest and an empty body. Payload
// resolves such a message; the workers, the sink and ReadStream call it.
// A job's object is deleted once the job left the work queue; an outcome's
// lives as long as its message.
//
// # Workers
//
//	err := conn.RunWorkers(ctx, ingest.WorkerConfig{Concurrency: 64}, handler)
//
// RunWorkers fetches in batches and runs Handle in Concurrency long-lived
// handler goroutines fed by a queue. It fetches ahead: up to a quarter of
// Concurrency more jobs wait in the queue, so a handler goroutine that frees
// up starts its next job at once (the fetcher waits up to 5ms for a quarter
// of the slots to be free so that a fetch brings a batch). When Handle
// returns, its goroutine takes the next job and the outcome goes to one of
// Concurrency settler goroutines, which store it and ack: the model slot is
// not held while a result is published. Jobs fetched and not yet settled
// are bounded by min(MaxAckPending, 2*Concurrency + prefetch). Every one of
// them, queued, running or settling, gets InProgress every Heartbeat. Each
// job is parsed with ParseJob before Handle. Then, by Outcome:
//
//   - ActionResult: publish Payload on pipeline.results.<Schema> with
//     Nats-Msg-Id = Delivery.MsgID, wait for the stream's ack, then Ack.
//   - ActionDeadLetter: publish on pipeline.dlq.<Schema>, wait, then
//     TermWithReason. If a store fails the job is naked and retried.
//   - ActionRetry: NakWithDelay(Delay, or the backoff step, plus up to 20%
//     jitter). Never a bare Nak.
//   - ActionStop: NakWithDelay, stop fetching, let in-flight jobs finish,
//     return Outcome.Err (ErrStopped if nil).
//
// Before Handle, a job over WorkerConfig.MaxJobBytes is marked invalid
// (JobErr) without being read, and the ledger is asked whether the
// delivery's run ended: then the job is acked and Handle not called
// (WorkerConfig.AlreadyDone). After an outcome is stored, the run is
// written into the ledger with compare-and-set before the ack; if another
// worker's outcome for the same run is there first, ours is deleted from
// its stream and the job only acked.
//
// A redelivered job (NumDelivered > 1) may have stored an outcome on an
// earlier delivery and lost its ack. Its own stream deduplicates a second
// copy, but a model need not answer the same way twice: before a result is
// stored, DLQ is checked for the job's message id, and RESULTS before a
// dead letter, over the duplicate window (a short-lived headers-only
// consumer from now minus the window). If the other kind of outcome is
// there, the job is acked and the new one dropped, so a job never ends as
// both. Past the window neither check holds: keep the window well above
// AckWait.
//
// A panic in Handle is recovered and logged; the job is naked with the
// backoff delay. On its last delivery (Delivery.Last) Handle is called once
// more with Delivery.Orphan set: the handler's orphan path dead-letters it,
// so a job that always panics ends in the DLQ rather than stranded.
//
// A job whose worker died (kill -9, lost connection) is redelivered after
// AckWait until MaxDeliver; then the server keeps it in the work queue and
// sends a MAX_DELIVERIES advisory (when the next pull arrives). RunWorkers
// listens in the queue group "pipeline-orphans", reads the job by stream
// sequence, calls Handle with Orphan set, stores the outcome and deletes the
// job from the stream. Advisories are not persisted: when the consumer is
// idle, RunWorkers also sweeps jobs still stored at or below the consumer's
// last delivered sequence, which can only be such orphans, or jobs whose
// removal after their ack was lost (seen on an R3 cluster whose stream
// leader died). So before handling an orphan RunWorkers scans the headers
// of RESULTS and DLQ (the job's schema) for its message id: a job with an
// outcome stored is only deleted, never dead-lettered a second time. Two
// workers handling the same orphan store one outcome (same Nats-Msg-Id),
// and the second delete finds nothing.
//
// On ctx cancel (or ActionStop) RunWorkers stops fetching and naks the jobs
// fetched ahead and not started at once, with a 1s delay; it waits up to
// ShutdownGrace for in-flight handlers and settling outcomes; then it cancels their context, naks what is left with
// a 1s delay and returns nil. UntilIdle returns nil once nothing is in
// flight and the consumer shows nothing pending and nothing unacked (naked
// jobs waiting for their delay count as unacked) twice in a row, a fetch
// apart. Gate, if set, is called before every fetch.
//
// # Sink and readers
//
// A Sink (Conn.NewSink) indexes RESULTS and DLQ into a SinkIndex that
// keeps, with the rows and in the same transaction, a cursor per stream:
// every message up to it is indexed. Workers of the same process hand each
// outcome they stored over with its stream sequence (WorkerConfig.Stored →
// Sink.Offer), so it is not delivered a second time; a sequence the stream
// holds and the sink still lacks after GapGrace (250ms) is read from the
// stream with direct gets, which any replica answers (other processes'
// outcomes, what a crash lost between the publish and the hand-over, an
// offer dropped when the sink was behind). After a restart the sink starts from the stored
// cursors. Write is called from one goroutine; a failed write is retried,
// with a growing delay, until it succeeds. After RunWorkers returns in
// until-idle mode, call Sink.Idle, then cancel the sink. ReadStream
// replays a stream in order (for `pipeline results`); Pending reports the
// queue's counts.
package broker
