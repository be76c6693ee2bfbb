package queue

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// storedOutcome reports on which stream (broker.StreamResults or broker.StreamDLQ, "" for
// neither) and at which sequence an outcome with Nats-Msg-Id msgID is stored, looking only at the
// subjects of schema (every schema when schema is "").
//
// The duplicate window keeps one outcome per stream, but a job must not end
// as a result and as a dead letter either. A job the sweep finds stranded
// may have been answered already: a work-queue message can outlive its ack
// (in a cluster the removal is replicated after the ack, and is lost when
// the stream leader dies in between), and a worker can store an outcome and
// die before its ack on the last delivery. Orphans are rare, so a scan of
// the headers is affordable here.
func storedOutcome(ctx context.Context, c *broker.Conn, msgID, schema string) (string, uint64, error) {
	for _, s := range []struct{ stream, subject string }{{broker.StreamResults, broker.SubjectResults}, {broker.StreamDLQ, broker.SubjectDLQ}} {
		filter := s.subject + ".>"
		if schema != "" {
			filter = broker.SchemaSubject(s.subject, schema)
		}
		seq, err := hasMsgID(ctx, c, s.stream, filter, msgID)
		if err != nil {
			return "", 0, err
		}
		if seq != 0 {
			return s.stream, seq, nil
		}
	}
	return "", 0, nil
}

// hasMsgID scans the headers of the messages of stream on filter for msgID
// and returns its sequence (0 when absent).
func hasMsgID(ctx context.Context, c *broker.Conn, stream, filter, msgID string) (uint64, error) {
	st, err := c.JetStream().Stream(ctx, stream)
	if err != nil {
		return 0, fmt.Errorf("looking up stream %s: %w", stream, err)
	}
	info, err := st.Info(ctx, jetstream.WithSubjectFilter(filter))
	if err != nil {
		return 0, fmt.Errorf("reading stream %s info: %w", stream, err)
	}
	var n uint64
	for _, count := range info.State.Subjects {
		n += count
	}
	if n == 0 {
		return 0, nil
	}
	cons, err := st.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		FilterSubjects: []string{filter},
		DeliverPolicy:  jetstream.DeliverAllPolicy,
		HeadersOnly:    true,
	})
	if err != nil {
		return 0, fmt.Errorf("scanning %s for %s: %w", stream, msgID, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return 0, fmt.Errorf("scanning %s for %s: %w", stream, msgID, err)
	}
	defer it.Stop()
	for {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return 0, nil
			}
			return 0, fmt.Errorf("scanning %s for %s: %w", stream, msgID, err)
		}
		meta, err := msg.Metadata()
		if err != nil {
			return 0, fmt.Errorf("scanning %s for %s: message metadata: %w", stream, msgID, err)
		}
		if msg.Headers().Get(jetstream.MsgIDHeader) == msgID {
			return meta.Sequence.Stream, nil
		}
		if meta.NumPending == 0 {
			return 0, nil
		}
	}
}

// outcomeSince returns the sequence of a message with Nats-Msg-Id msgID
// stored on stream, matching filter, at or after since (0 for none). It reads headers through a
// short-lived ephemeral consumer that starts at since, so it costs the
// number of messages stored since then, not the stream's size.
func outcomeSince(ctx context.Context, c *broker.Conn, stream, filter, msgID string, since time.Time) (uint64, error) {
	st, err := c.JetStream().Stream(ctx, stream)
	if err != nil {
		return 0, fmt.Errorf("looking up stream %s: %w", stream, err)
	}
	cons, closeCons, err := broker.ScanConsumer(ctx, st, jetstream.ConsumerConfig{
		Description:   "pipeline: is " + msgID + " stored already",
		DeliverPolicy: jetstream.DeliverByStartTimePolicy,
		OptStartTime:  &since,
		FilterSubject: filter,
		HeadersOnly:   true,
	})
	if err != nil {
		return 0, fmt.Errorf("scanning %s for %s: %w", stream, msgID, err)
	}
	defer closeCons()
	left := cons.CachedInfo().NumPending
	for left > 0 {
		batch, err := cons.Fetch(int(min(left, 1000)), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return 0, fmt.Errorf("scanning %s for %s: %w", stream, msgID, err)
		}
		got := uint64(0)
		for m := range batch.Messages() {
			got++
			if m.Headers().Get(jetstream.MsgIDHeader) == msgID {
				meta, err := m.Metadata()
				if err != nil {
					return 0, fmt.Errorf("scanning %s for %s: message metadata: %w", stream, msgID, err)
				}
				return meta.Sequence.Stream, nil
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) {
			return 0, fmt.Errorf("scanning %s for %s: %w", stream, msgID, err)
		}
		if got == 0 {
			return 0, fmt.Errorf("scanning %s for %s: %d messages announced, none delivered", stream, msgID, left)
		}
		left -= min(got, left)
	}
	return 0, nil
}

// removeOutcome deletes an outcome this worker stored for a run whose
// outcome another worker stored first, and its body object.
func removeOutcome(ctx context.Context, c *broker.Conn, stream string, seq uint64, object string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	s, err := c.JetStream().Stream(ctx, stream)
	if err == nil {
		err = s.DeleteMsg(ctx, seq)
	}
	if err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		c.Logger().Error("deleting a second outcome of one run (the index keeps one row per run; the stream keeps both)", "stream", stream, "seq", seq, "err", err)
		return
	}
	c.Payloads().Drop(ctx, object)
}
