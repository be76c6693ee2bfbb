package ingest

// CONTRACT FILE: the types and signatures the rest of the module codes
// against. The ingest implementer fills in the bodies (and may move these
// declarations into other files), but keeps the names and shapes.

import (
	"context"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"
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
	SinkConsumer   = "sink"
)

// Config says how to reach NATS. The zero value (plus DataDir) means: an
// embedded nats-server with JetStream and file storage under DataDir.
type Config struct {
	// URL of an external server or cluster (comma-separated); empty starts
	// (or joins) the embedded server.
	URL string
	// DataDir holds the embedded server's store ("nats/" below it) and the
	// file that lets a second command find a running server.
	DataDir string
	// Listen is the embedded server's address; "" means 127.0.0.1 on a free port.
	Listen string
	// CredsFile, TLSCert, TLSKey, TLSCA are passed through to nats.go.
	CredsFile, TLSCert, TLSKey, TLSCA string
	// Replicas for the streams (1; 3 on a cluster).
	Replicas int
	// DuplicateWindow of the streams (default 2 minutes... see README).
	DuplicateWindow time.Duration
	Logger          *slog.Logger
}

// Conn is a connection to NATS with the streams set up.
type Conn struct{}

// Connect starts or joins the embedded server (or dials Config.URL), connects
// and creates the streams idempotently.
func Connect(ctx context.Context, cfg Config) (*Conn, error) { panic("unimplemented") }

// JetStream returns the JetStream context.
func (c *Conn) JetStream() jetstream.JetStream { panic("unimplemented") }

// URL is the client URL of the server in use (the embedded one's too).
func (c *Conn) URL() string { panic("unimplemented") }

// Close drains the connection and, if this Conn started the embedded
// server, shuts it down last. Safe to call twice.
func (c *Conn) Close() error { panic("unimplemented") }

// SubmitStats counts what Submit did.
type SubmitStats struct {
	Published  int // newly stored
	Duplicates int // already in the stream (same job id inside the duplicate window)
}

// Submit publishes jobs on pipeline.jobs.<schema> with Nats-Msg-Id = msgID(job)
// (the job id; replays pass their own), waiting for every ack. progress, if
// not nil, is called with the count done so far.
func (c *Conn) Submit(ctx context.Context, jobs []SubmitItem, progress func(done int)) (SubmitStats, error) {
	panic("unimplemented")
}

// SubmitItem is one job to publish: its raw JSON, its schema (the subject
// token) and its message id (the job id, or the job id plus a replay suffix).
type SubmitItem struct {
	Data   []byte
	Schema string
	MsgID  string
}

// Delivery is one job message handed to a Handler.
type Delivery struct {
	// Job is the parsed job; JobErr is set (wrapping ErrInvalidJob) when the
	// message is not a valid job, and then Job holds what could be read.
	Job    Job
	JobErr error
	// Data is the message body as received.
	Data []byte
	// SchemaToken is the last token of the subject (pipeline.jobs.<schema>).
	SchemaToken string
	// MsgID is the message's Nats-Msg-Id (the job id, or a replay's id).
	MsgID        string
	NumDelivered int
	MaxDeliver   int
	// Orphan is true when the message reached MaxDeliver without an answer
	// (its worker died): the handler must dead-letter it.
	Orphan bool
	// inProgress resets the ack timer; the runtime calls it on a timer too.
	inProgress func()
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
)

// Outcome is a handler's verdict on one delivery.
type Outcome struct {
	Action  Action
	Schema  string // subject token for the result or dead letter
	Payload []byte
	Reason  string
	Delay   time.Duration
	Err     error
}

// Handler processes one job. It must not Ack or Nak: the runtime does, from
// the Outcome. A panic in Handle is recovered by the runtime and turned into
// an ActionRetry (and on the last delivery, the runtime calls Handle again
// with... see README: it dead-letters via the handler's Orphan path).
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
	Gate   func(ctx context.Context) error
	Logger *slog.Logger
}

// RunWorkers consumes jobs with the durable "workers" pull consumer until ctx
// is done (graceful: stop fetching, wait up to ShutdownGrace, nak the rest),
// until idle (UntilIdle), or until a handler returns ActionStop.
func (c *Conn) RunWorkers(ctx context.Context, cfg WorkerConfig, h Handler) error {
	panic("unimplemented")
}

// SinkMsg is one RESULTS or DLQ message handed to the sink.
type SinkMsg struct {
	Subject string
	Data    []byte
}

// SinkConfig configures RunSink.
type SinkConfig struct {
	Batch     int           // messages per write (default 500)
	MaxWait   time.Duration // longest a message waits for its batch (default 100ms)
	UntilIdle bool          // return once both streams are fully consumed and Idle() was observed... see README
	Logger    *slog.Logger
}

// RunSink consumes RESULTS and DLQ with the durable "sink" consumer and calls
// write with batches; messages are acked only after write returns nil (on
// error they are redelivered after a delay).
func (c *Conn) RunSink(ctx context.Context, cfg SinkConfig, write func(ctx context.Context, batch []SinkMsg) error) error {
	panic("unimplemented")
}
