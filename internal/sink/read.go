package sink

import (
	"context"
	"errors"
	"fmt"

	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/nats-io/nats.go/jetstream"
)

// ReadStream calls fn with every message stored in stream (matching
// subjectFilter, "" for all) in stream order, and returns once it reached
// the last one that was stored when it started reading (an ordered,
// ephemeral consumer; nothing is acked or removed). An error from fn stops
// the read and is returned. A body held in the object store (a message
// over the server's max payload) is read from there: fn sees the whole.
func ReadStream(ctx context.Context, c *broker.Conn, stream, subjectFilter string, fn func(Msg) error) error {
	s, err := c.JetStream().Stream(ctx, stream)
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
		sm, err := resolvedMsg(ctx, c, msg)
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

// rawMsg is a message of stream read by a direct get, with its body
// resolved from the object store when it names one.
func rawMsg(ctx context.Context, c *broker.Conn, stream string, m *jetstream.RawStreamMsg) (Msg, error) {
	sm := Msg{Subject: m.Subject, Data: m.Data, MsgID: m.Header.Get(jetstream.MsgIDHeader), Stream: stream, Sequence: m.Sequence, Time: m.Time}
	body, err := c.Payloads().Get(ctx, m.Header, m.Data)
	if err != nil {
		return sm, fmt.Errorf("message %s (%s seq %d): %w", sm.MsgID, stream, sm.Sequence, err)
	}
	sm.Data = body
	return sm, nil
}

// resolvedMsg is toMsg with the body resolved from the object
// store when the message names one.
func resolvedMsg(ctx context.Context, c *broker.Conn, m jetstream.Msg) (Msg, error) {
	sm := toMsg(m)
	body, err := c.Payloads().Get(ctx, m.Headers(), sm.Data)
	if err != nil {
		return sm, fmt.Errorf("message %s (%s seq %d): %w", sm.MsgID, sm.Stream, sm.Sequence, err)
	}
	sm.Data = body
	return sm, nil
}
