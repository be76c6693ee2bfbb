// Package queue is the JOBS work queue: submitting jobs (Submit) and the
// worker runtime (RunWorkers) that fetches them with bounded concurrency,
// hands each to a Handler, settles its Outcome (stores the result or dead
// letter, then acks, naks with a delay or terms), hands jobs off to
// components that finish them later (StoreOutcome), and recovers orphans
// whose worker died. It sits on the broker, the ledger, the payload store
// and the sink's message type; it knows jobs only by id and schema id.
//
// # Consumer
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
// package ledger): a run that ended is not published (AlreadyDone), or, with
// Rerun, published as the next run (<job id>~r<n>).
//
// # Workers
//
//	err := queue.RunWorkers(ctx, conn, queue.WorkerConfig{Concurrency: 64}, handler)
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
// job is parsed with job.Parse before Handle. Then, by Outcome:
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
package queue
