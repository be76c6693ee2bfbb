package sink

// The types the rest of the module codes against: the message the sink
// takes (Msg), its Config, and the Index it writes into.

import (
	"context"
	"log/slog"
	"time"
)

// Msg is one RESULTS or DLQ message handed to the sink.
type Msg struct {
	Subject string
	Data    []byte
	// MsgID is the message's Nats-Msg-Id (the job id for results and dead
	// letters), Stream and Sequence where it is stored, Time when.
	MsgID    string
	Stream   string
	Sequence uint64
	Time     time.Time
	// Record is the handler's Outcome.Record for a message handed over by
	// the worker of the same process (nil when read from the stream).
	Record any
}

// Config configures a Sink.
type Config struct {
	Batch   int           // messages per write (default 500)
	MaxWait time.Duration // longest a message waits for its batch (default 100ms)
	// GapGrace is how long a message the stream holds may be missing from
	// what Offer handed over before the sink reads it from the stream
	// (default 250ms): long enough for a publish acknowledged a moment ago
	// to arrive, short enough to keep the index well under a second behind.
	GapGrace time.Duration
	// UntilIdle: Run returns once the index holds every message of both
	// streams and nothing is waiting, seen twice in a row.
	UntilIdle bool
	Logger    *slog.Logger
}

// Index is what a Sink writes into: an index of the RESULTS and DLQ
// messages that remembers, with the rows, where it stands in each stream.
type Index interface {
	// Cursors returns, per stream name, the sequence up to which every
	// message is indexed.
	Cursors(ctx context.Context) (map[string]uint64, error)
	// Write indexes batch and records cursors, in one transaction: after an
	// error nothing of it is stored. Writing a message twice must change
	// nothing.
	Write(ctx context.Context, batch []Msg, cursors map[string]uint64) error
}
