// Package broker holds the pipeline's connection to NATS: an embedded
// nats-server (started, joined or taken over) or an external server or
// cluster, its credentials, the JOBS, RESULTS and DLQ streams, the KV and
// object store buckets beside them, the health of the server's store, the
// fleet's rate-limit shares (Fleet) and the learned model parameters
// (ModelParams). It knows jobs only by id and schema id: no prompts,
// schemas or models. Subjects carry schema ids encoded (SchemaToken,
// subjects.go); the packages above it (payload, ledger, sink, queue) take
// a *Conn and reach the server through its accessors.
//
// # Connecting
//
//	conn, err := broker.Connect(ctx, broker.Config{DataDir: "./pipeline-data"})
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
// # Streams
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
// The consumers are the queue's and the sink's: EnsureConsumer creates or
// updates one and refuses a drift it cannot fix (see package queue).
package broker
