package queue

// The types and configuration the rest of the module codes against:
// Submit's items and counts, and the worker runtime's Delivery, Action,
// Outcome, Handler and WorkerConfig.

import (
	"context"
	"log/slog"
	"time"

	"github.com/llmpipeline/pipeline/internal/sink"
	"github.com/llmpipeline/pipeline/job"
)

// SubmitStats counts what Submit did.
type SubmitStats struct {
	Published  int // newly stored
	Duplicates int // already in the stream (same job id inside the duplicate window)
	// AlreadyDone: items whose run already ended (the job ledger says so),
	// not published.
	AlreadyDone int
	// Reruns: items published as a new run of a job that had ended (Rerun,
	// or RerunChanged for a changed one).
	Reruns int
	// Changed: items whose job id ended with another input (the run the
	// item names and the job's last run both ran another ledger.InputDigest), not
	// published; the first 1000 of their job ids in ChangedIDs.
	Changed    int
	ChangedIDs []string
	// Chunks: the items of Published that are chunk jobs of a long
	// document (SubmitItem.Chunk).
	Chunks int
}

// SubmitItem is one job to publish: its raw JSON, its schema id (its
// subject's token is broker.SchemaToken of it) and its message id (the job id, or the job id plus a replay suffix).
type SubmitItem struct {
	Data   []byte
	Schema string
	MsgID  string
	// JobID, when set, makes Submit consult the job ledger: an item whose
	// run (ledger.RunOf(MsgID, JobID)) already ended is not published and counts
	// as AlreadyDone, unless Rerun is set: then it is published as the run
	// after the last one that ended (message id ledger.RunMsgID(JobID, last+1)).
	JobID string
	Rerun bool
	// Input is the ledger.InputDigest of the item's job ("" when not known): an
	// item whose job id ended with another input is counted as Changed,
	// not AlreadyDone, and RerunChanged publishes it as a new run.
	Input        string
	RerunChanged bool
	// Files are the SHA-256 of the files the job names (job.File), sent
	// as the message's payload.HeaderFiles.
	Files []string
	// Chunk is the item's place in a long document, nil for a whole job:
	// counted in SubmitStats.Chunks and sent as the message's HeaderChunk.
	Chunk *job.ChunkOf
}

// Delivery is one job message handed to a Handler.
type Delivery struct {
	// Job is the parsed job; JobErr is set (wrapping job.ErrInvalid) when the
	// message is not a valid job, and then Job holds what could be read.
	Job    job.Job
	JobErr error
	// Data is the message body as received.
	Data []byte
	// SchemaToken is the schema id the subject names: its last token
	// (pipeline.jobs.<schema>), decoded by broker.SchemaOfToken.
	SchemaToken string
	// MsgID is the message's Nats-Msg-Id (the job id, or a replay's id).
	MsgID string
	// Size is the job's size in bytes (the object's, for a job whose body
	// is in the object store).
	Size         int64
	NumDelivered int
	MaxDeliver   int
	// Orphan is true when the message reached MaxDeliver without an answer
	// (its worker died): the handler must dead-letter it.
	Orphan bool
	// inProgress resets the ack timer; the runtime calls it on a timer too.
	inProgress func()
	// payload names the object holding the job's body ("" when inline):
	// deleted once the job is removed from the work queue.
	payload string
}

// Last reports whether this is the message's last delivery.
func (d *Delivery) Last() bool {
	return d.Orphan || (d.MaxDeliver > 0 && d.NumDelivered >= d.MaxDeliver)
}

// InProgress tells the server the job is still being worked on.
func (d *Delivery) InProgress() {
	if d.inProgress != nil {
		d.inProgress()
	}
}

// Action says what the runtime does with a delivery after the handler.
type Action int

const (
	// Publish Payload on pipeline.results.<Schema> (msg id = Delivery.MsgID),
	// wait for the stream's ack, then Ack the job.
	ActionResult Action = iota + 1
	// Publish Payload on pipeline.dlq.<Schema>, wait for the ack, then
	// TermWithReason(Reason).
	ActionDeadLetter
	// NakWithDelay(Delay plus jitter): transient, not the job's fault.
	ActionRetry
	// NakWithDelay and stop fetching: the worker cannot go on (auth). Run
	// returns Err.
	ActionStop
	// actionDone: the job's run already ended (the ledger says so): Ack
	// without storing anything. Set by the runtime, never by a handler.
	actionDone
)

// Outcome is a handler's verdict on one delivery.
type Outcome struct {
	Action  Action
	Schema  string // the schema id whose subject the result or dead letter goes to
	Payload []byte
	Reason  string
	Delay   time.Duration
	Err     error
	// Files are the digests of the stored files the outcome's job names:
	// the result or dead letter carries them in its payload.HeaderFiles,
	// so a purge sees them on RESULTS and DLQ before the sink indexed it.
	Files []string
	// Record is passed, untouched, to WorkerConfig.Stored with the stored
	// message (the handler's own form of Payload, so that the sink need not
	// decode it again).
	Record any
}

// Handler processes one job. It must not Ack or Nak: the runtime does, from
// the Outcome. A panic in Handle is recovered by the runtime and turned into
// an ActionRetry (and on the last delivery, the runtime calls Handle again
// with Delivery.Orphan set: the handler dead-letters it; see the package doc).
type Handler interface {
	Handle(ctx context.Context, d *Delivery) Outcome
}

// HandlerFunc adapts a function to Handler.
type HandlerFunc func(ctx context.Context, d *Delivery) Outcome

// Handle calls f.
func (f HandlerFunc) Handle(ctx context.Context, d *Delivery) Outcome { return f(ctx, d) }

// WorkerConfig configures Run. The zero value means the defaults.
type WorkerConfig struct {
	Concurrency   int           // jobs in flight (default 16)
	AckWait       time.Duration // default 60s; size it to the model timeout
	MaxDeliver    int           // default 5
	BackOff       []time.Duration
	Heartbeat     time.Duration // InProgress period (default AckWait/3)
	ShutdownGrace time.Duration // default 30s
	// UntilIdle: return nil once nothing is pending and nothing is in flight.
	UntilIdle bool
	// Gate, if set, is called before each fetch; it blocks while the model
	// is unavailable (circuit breaker open) and returns ctx's error.
	Gate func(ctx context.Context) error
	// MaxAckPending of the consumer (default max(1024, 4*Concurrency)); it
	// is shared by every worker process on the consumer and counts jobs
	// waiting for a delayed redelivery too.
	MaxAckPending int
	// FetchWait is the longest one fetch waits for jobs (default 1s): the
	// runtime re-checks ctx, Gate and idleness at least this often.
	FetchWait time.Duration
	// MaxJobBytes bounds a job's size (default 64 MiB): a bigger one,
	// inline or in the object store, is handed to the handler as invalid
	// (Delivery.JobErr names the size and the limit) without being read.
	MaxJobBytes int64
	// AlreadyDone, if set, is called for every delivery acked without
	// calling the handler because the job ledger says its run ended.
	AlreadyDone func(msgID string)
	// Stored, if set, is called with every result or dead letter once the
	// stream acknowledged it as new (not for a duplicate): the sink of the
	// same process takes it from there (Sink.Offer) instead of reading it
	// back from the stream. It holds the job's settling while it runs, so
	// it must return soon (Offer waits at most 100ms).
	Stored func(sink.Msg)
	Logger *slog.Logger

	// HandedBack, if set, is called with the number of jobs handed back to
	// the stream undone (naked, to be redelivered) because the workers were
	// stopping: fetched ahead and not started, or still in flight when the
	// shutdown grace ran out. It must return soon.
	HandedBack func(n int)

	// StoreFailed, if set, is called with the error of every result or
	// dead letter that could not be stored (the job is handed back); it
	// must return soon.
	StoreFailed func(error)

	// Repeated, if set, is called with every result or dead letter the
	// handler produced that was not kept: the stream held an outcome under
	// its message id already (a duplicate), or another delivery's was
	// recorded first. The handler ran (the model was called) all the
	// same, so a run's counts include it. Like Stored, it must return soon.
	Repeated func(sink.Msg)

	// Documents, if set, merges each long document (chunk jobs carry
	// job.Job.Chunk) once its every chunk ended; without it chunk jobs end
	// as ordinary jobs and their documents never do.
	Documents Documents
}
