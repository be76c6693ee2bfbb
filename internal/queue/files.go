package queue

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/payload"
	"github.com/nats-io/nats.go/jetstream"
)

// FilesQueued returns the digests of the files the jobs still on the JOBS
// stream name (their payload.HeaderFiles), reading the messages' headers
// only.
func FilesQueued(ctx context.Context, c *broker.Conn) (map[string]bool, error) {
	out := map[string]bool{}
	s, err := c.JetStream().Stream(ctx, broker.StreamJobs)
	if err != nil {
		return nil, fmt.Errorf("looking up stream %s: %w", broker.StreamJobs, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading stream %s: %w", broker.StreamJobs, err)
	}
	if info.State.Msgs == 0 {
		return out, nil
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{HeadersOnly: true, DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		return nil, fmt.Errorf("reading stream %s: %w", broker.StreamJobs, err)
	}
	last := info.State.LastSeq
	for {
		batch, err := cons.Fetch(500, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return nil, fmt.Errorf("reading stream %s: %w", broker.StreamJobs, err)
		}
		n := 0
		for m := range batch.Messages() {
			n++
			if h := m.Headers(); h != nil {
				for _, d := range strings.Split(h.Get(payload.HeaderFiles), ",") {
					if d != "" {
						out[d] = true
					}
				}
			}
			md, err := m.Metadata()
			if err == nil && md.Sequence.Stream >= last {
				return out, nil
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return nil, fmt.Errorf("reading stream %s: %w", broker.StreamJobs, err)
		}
		if n == 0 {
			return out, nil // the last messages were taken meanwhile
		}
	}
}
