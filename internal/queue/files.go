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
	return out, FilesNamed(ctx, c, broker.StreamJobs, out)
}

// FilesNamed adds to out the digests of the files the messages of stream
// name in their payload.HeaderFiles (jobs on JOBS; results and dead
// letters on RESULTS and DLQ, which carry their job's), reading the
// messages' headers only, from the first to the last the stream holds
// when called.
func FilesNamed(ctx context.Context, c *broker.Conn, stream string, out map[string]bool) error {
	s, err := c.JetStream().Stream(ctx, stream)
	if err != nil {
		return fmt.Errorf("looking up stream %s: %w", stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return fmt.Errorf("reading stream %s: %w", stream, err)
	}
	if info.State.Msgs == 0 {
		return nil
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{HeadersOnly: true, DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		return fmt.Errorf("reading stream %s: %w", stream, err)
	}
	last := info.State.LastSeq
	for {
		batch, err := cons.Fetch(500, jetstream.FetchMaxWait(2*time.Second))
		if err != nil {
			return fmt.Errorf("reading stream %s: %w", stream, err)
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
				return nil
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
			return fmt.Errorf("reading stream %s: %w", stream, err)
		}
		if n == 0 {
			return nil // the last messages were taken meanwhile
		}
	}
}
