package broker

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// ScanConsumer makes an ephemeral consumer that reads s without acks, for
// bounded reads with Fetch; close deletes it. An ordered consumer is not
// used for that: its every Fetch deletes and re-creates its consumer, and
// retries the creation without end and without the caller's context, so a
// cluster that lost a node held its caller (the sink) for good. Making
// this one honours ctx and fails once; the caller tries again later.
func ScanConsumer(ctx context.Context, s jetstream.Stream, cfg jetstream.ConsumerConfig) (cons jetstream.Consumer, close func(), err error) {
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

// StreamState reads a stream's state from the server.
func (c *Conn) StreamState(ctx context.Context, name string) (jetstream.StreamState, error) {
	s, err := c.js.Stream(ctx, name)
	if err != nil {
		return jetstream.StreamState{}, fmt.Errorf("looking up stream %s: %w", name, err)
	}
	return s.CachedInfo().State, nil
}
