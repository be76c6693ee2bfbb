package broker

// Stream and subject names, and the Config of a connection.

import (
	"log/slog"
	"time"
)

// Subjects and stream names.
const (
	StreamJobs     = "JOBS"
	StreamResults  = "RESULTS"
	StreamDLQ      = "DLQ"
	SubjectJobs    = "pipeline.jobs"    // pipeline.jobs.<schema>
	SubjectResults = "pipeline.results" // pipeline.results.<schema>
	SubjectDLQ     = "pipeline.dlq"     // pipeline.dlq.<schema>
	WorkerConsumer = "workers"
	// SinkConsumer is a durable consumer on RESULTS and DLQ that data dirs
	// written before the index kept its own cursors still hold; the sink
	// deletes it when it finds it.
	SinkConsumer = "sink"
)

// Config says how to reach NATS. The zero value (plus DataDir) means: an
// embedded nats-server with JetStream and file storage under DataDir.
type Config struct {
	// URL of an external server or cluster (comma-separated); empty starts
	// (or joins) the embedded server.
	URL string
	// DataDir holds the embedded server's store ("nats/" below it), its
	// credentials (nats-auth.json) and the files that let a second command
	// find a running server (nats.json, nats.lock).
	DataDir string
	// Listen is the embedded server's address, loopback only; "" means
	// 127.0.0.1 on the port the data dir's last server used, or a free one.
	Listen string
	// CredsFile, TLSCert, TLSKey, TLSCA are passed through to nats.go.
	CredsFile, TLSCert, TLSKey, TLSCA string
	// Replicas for the streams (1; 3 on a cluster).
	Replicas int
	// DuplicateWindow of the streams (zero: the streams' current window, 2
	// minutes when they are created; on RESULTS and DLQ at most their max
	// age, StreamLimits): a job, result or
	// dead letter published again with the same Nats-Msg-Id inside it is
	// stored once. Keep it at least twice the workers' AckWait so a job
	// redelivered after a lost ack finds its result deduplicated; beyond it
	// the sink's idempotent upserts keep one outcome per job id. Every id in
	// the window is held in the server's memory.
	DuplicateWindow time.Duration
	// SyncAlways makes the embedded server fsync every write before it acks
	// (survives power loss; costs publish rate, see the package doc). Without
	// it, acknowledged messages are already written to the kernel and survive
	// kill -9 of the process; fsync happens every SyncInterval.
	SyncAlways bool
	// SyncInterval of the embedded server's store (default 2 minutes, the
	// server's own default) when SyncAlways is false.
	SyncInterval time.Duration
	// StreamLimits bound the RESULTS and DLQ streams by age and size; the
	// zero value leaves them as they are (unlimited when created).
	StreamLimits StreamLimits
	Logger       *slog.Logger
}

// StreamLimits bound the RESULTS and DLQ streams (the JOBS work queue
// empties itself). They are kept in the streams' metadata and applied by
// the sink, only to messages the index holds: it removes those older than
// MaxAge and the oldest beyond MaxBytes, with their payload objects; an
// outcome the index has not read is never removed. The server's own
// limits stay off. A nil field leaves the stream's current setting as it is (none, on a
// stream being created); a zero value means no limit. They are applied when
// a stream is created and updated on an existing one at every Connect.
type StreamLimits struct {
	MaxAge   *time.Duration
	MaxBytes *int64
}
