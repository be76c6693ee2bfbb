package ingest

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ReadStream calls fn with every message stored in stream (matching
// subjectFilter, "" for all) in stream order, and returns once it reached
// the last one that was stored when it started reading (an ordered,
// ephemeral consumer; nothing is acked or removed). An error from fn stops
// the read and is returned. A body held in the object store (a message
// over the server's max payload) is read from there: fn sees the whole.
func (c *Conn) ReadStream(ctx context.Context, stream, subjectFilter string, fn func(SinkMsg) error) error {
	s, err := c.js.Stream(ctx, stream)
	if err != nil {
		return fmt.Errorf("looking up stream %s: %w", stream, err)
	}
	var opts []jetstream.StreamInfoOpt
	if subjectFilter != "" {
		opts = append(opts, jetstream.WithSubjectFilter(subjectFilter))
	}
	info, err := s.Info(ctx, opts...)
	if err != nil {
		return fmt.Errorf("reading stream %s info: %w", stream, err)
	}
	if info.State.Msgs == 0 {
		return nil
	}
	if subjectFilter != "" {
		var n uint64
		for _, count := range info.State.Subjects {
			n += count
		}
		if n == 0 {
			return nil
		}
	}
	occ := jetstream.OrderedConsumerConfig{DeliverPolicy: jetstream.DeliverAllPolicy}
	if subjectFilter != "" {
		occ.FilterSubjects = []string{subjectFilter}
	}
	cons, err := s.OrderedConsumer(ctx, occ)
	if err != nil {
		return fmt.Errorf("reading stream %s: %w", stream, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return fmt.Errorf("reading stream %s: %w", stream, err)
	}
	defer it.Stop()
	for {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return nil
			}
			return fmt.Errorf("reading stream %s: %w", stream, err)
		}
		sm, err := c.toSinkMsgResolved(ctx, msg)
		if err != nil {
			return fmt.Errorf("reading stream %s: %w", stream, err)
		}
		if err := fn(sm); err != nil {
			return err
		}
		meta, err := msg.Metadata()
		if err != nil {
			return fmt.Errorf("reading stream %s: message metadata: %w", stream, err)
		}
		if meta.NumPending == 0 {
			return nil
		}
	}
}

// PendingInfo is the state of the work queue, for stats and metrics.
type PendingInfo struct {
	// Jobs stored in JOBS (waiting, in flight, or stranded).
	Jobs uint64 `json:"jobs"`
	// Pending jobs not yet delivered to the workers consumer.
	Pending uint64 `json:"pending"`
	// AckPending: delivered and not yet acked (in flight, or naked and
	// waiting for their delayed redelivery).
	AckPending int `json:"ack_pending"`
	// Redelivered: jobs delivered more than once and still unacked.
	Redelivered int `json:"redelivered"`
	// Waiting pull requests (idle workers).
	Waiting int `json:"waiting"`
	// Results and DeadLetters stored in their streams.
	Results     uint64 `json:"results"`
	DeadLetters uint64 `json:"dead_letters"`
}

// Pending reports the work queue's state. The consumer counts are zero
// when no worker has created the consumer yet.
func (c *Conn) Pending(ctx context.Context) (PendingInfo, error) {
	var p PendingInfo
	for _, x := range []struct {
		name string
		n    *uint64
	}{{StreamJobs, &p.Jobs}, {StreamResults, &p.Results}, {StreamDLQ, &p.DeadLetters}} {
		s, err := c.js.Stream(ctx, x.name)
		if err != nil {
			return p, fmt.Errorf("looking up stream %s: %w", x.name, err)
		}
		*x.n = s.CachedInfo().State.Msgs
	}
	cons, err := c.js.Consumer(ctx, StreamJobs, WorkerConsumer)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		p.Pending = p.Jobs
		return p, nil
	}
	if err != nil {
		return p, fmt.Errorf("looking up consumer %s on %s: %w", WorkerConsumer, StreamJobs, err)
	}
	info := cons.CachedInfo()
	p.Pending = info.NumPending
	p.AckPending = info.NumAckPending
	p.Redelivered = info.NumRedelivered
	p.Waiting = info.NumWaiting
	return p, nil
}

// scanConsumer makes an ephemeral consumer that reads s without acks, for
// bounded reads with Fetch; close deletes it. An ordered consumer is not
// used for that: its every Fetch deletes and re-creates its consumer, and
// retries the creation without end and without the caller's context, so a
// cluster that lost a node held its caller (the sink) for good. Making
// this one honours ctx and fails once; the caller tries again later.
func scanConsumer(ctx context.Context, s jetstream.Stream, cfg jetstream.ConsumerConfig) (cons jetstream.Consumer, close func(), err error) {
	cfg.AckPolicy = jetstream.AckNonePolicy
	cfg.Replicas = 1
	cfg.MemoryStorage = true
	if cfg.InactiveThreshold == 0 {
		cfg.InactiveThreshold = time.Minute // removed by the server if close is never called
	}
	cons, err = s.CreateConsumer(ctx, cfg)
	if err != nil {
		return nil, nil, err
	}
	name := cons.CachedInfo().Name
	return cons, func() {
		dctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		defer cancel()
		_ = s.DeleteConsumer(dctx, name)
	}, nil
}
