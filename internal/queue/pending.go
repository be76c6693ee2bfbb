package queue

import (
	"context"
	"errors"
	"fmt"

	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/nats-io/nats.go/jetstream"
)

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
func Pending(ctx context.Context, c *broker.Conn) (PendingInfo, error) {
	var p PendingInfo
	for _, x := range []struct {
		name string
		n    *uint64
	}{{broker.StreamJobs, &p.Jobs}, {broker.StreamResults, &p.Results}, {broker.StreamDLQ, &p.DeadLetters}} {
		s, err := c.JetStream().Stream(ctx, x.name)
		if err != nil {
			return p, fmt.Errorf("looking up stream %s: %w", x.name, err)
		}
		*x.n = s.CachedInfo().State.Msgs
	}
	cons, err := c.JetStream().Consumer(ctx, broker.StreamJobs, broker.WorkerConsumer)
	if errors.Is(err, jetstream.ErrConsumerNotFound) {
		p.Pending = p.Jobs
		return p, nil
	}
	if err != nil {
		return p, fmt.Errorf("looking up consumer %s on %s: %w", broker.WorkerConsumer, broker.StreamJobs, err)
	}
	info := cons.CachedInfo()
	p.Pending = info.NumPending
	p.AckPending = info.NumAckPending
	p.Redelivered = info.NumRedelivered
	p.Waiting = info.NumWaiting
	return p, nil
}
