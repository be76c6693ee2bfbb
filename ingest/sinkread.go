package ingest

// How the sink reads what no worker handed it: each stream's first and
// last sequence, and the due sequences it lacks, read with an ordered
// consumer and passed over only where the stream holds nothing.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// fetch reads up to n messages of cons without waiting; a test replaces
// it (Sink.fetchHook) to answer as a server in the middle of a leader change.
func (l *sinkLoop) fetch(cons jetstream.Consumer, n int) (jetstream.MessageBatch, error) {
	if l.fetchHook != nil {
		return l.fetchHook(cons, n)
	}
	return cons.FetchNoWait(n)
}

// observe reads each stream's first and last sequence, moves the cursor
// past what the stream no longer holds, and updates which sequences are
// due. caught reports whether every cursor had reached its stream's last
// sequence when observed.
func (l *sinkLoop) observe(ctx context.Context) (caught bool, err error) {
	now := time.Now()
	caught = true
	for _, st := range l.streams {
		info, err := l.c.streamState(ctx, st.name)
		if err != nil {
			return false, err
		}
		switch {
		case info.LastSeq < st.cursor:
			l.log.Warn("sink: the stream is behind the index's cursor (stream re-created?); reading it again from its start",
				"stream", st.name, "cursor", st.cursor, "last_seq", info.LastSeq)
			st.held = map[uint64]bool{}
			st.cursor, st.seen, st.due = 0, nil, 0
			st.jump(info.FirstSeq - min(info.FirstSeq, 1))
		case info.FirstSeq > st.cursor+1:
			if adv := st.advanced(); adv < info.FirstSeq-1 {
				lost := info.FirstSeq - 1 - adv
				for seq := range st.held {
					if seq > adv && seq < info.FirstSeq {
						lost-- // handed over by a worker: the index has it
					}
				}
				l.log.Warn("sink: outcomes left the stream before they were indexed (stream limits --stream-max-age / --stream-max-bytes, or a purge); they are gone",
					"stream", st.name, "lost", lost, "cursor", st.cursor, "first_seq", info.FirstSeq)
			}
			st.jump(info.FirstSeq - 1)
		}
		st.seen = append(st.seen, observed{at: now, last: info.LastSeq})
		for len(st.seen) > 0 && now.Sub(st.seen[0].at) >= l.cfg.GapGrace {
			st.due = max(st.due, st.seen[0].last)
			st.seen = st.seen[1:]
		}
		if st.advanced() < info.LastSeq {
			caught = false
		}
	}
	return caught, nil
}

// readGaps reads from the streams the due sequences the sink does not have,
// writing full batches as it goes.
func (l *sinkLoop) readGaps(ctx context.Context) error {
	for _, st := range l.streams {
		for {
			lo := st.missing()
			if lo > st.due {
				break
			}
			n := int(min(st.due-lo+1, uint64(max(l.cfg.Batch-len(l.batch), 1))))
			if err := l.readRange(ctx, st, lo, n); err != nil {
				return err
			}
			if len(l.batch) >= l.cfg.Batch && !l.flush(ctx) {
				return ctx.Err()
			}
		}
	}
	return nil
}

// readRange reads up to n messages of st from sequence lo (an ordered,
// ephemeral consumer; nothing is acked). Sequences it passes over that the
// stream does not hold are marked absent, so the cursor moves past them.
func (l *sinkLoop) readRange(ctx context.Context, st *sinkStream, lo uint64, n int) error {
	s, err := l.c.js.Stream(ctx, st.name)
	if err != nil {
		return fmt.Errorf("looking up stream %s: %w", st.name, err)
	}
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:   lo,
	})
	if err != nil {
		return fmt.Errorf("reading stream %s from %d: %w", st.name, lo, err)
	}
	res, err := l.fetch(cons, n)
	if err != nil {
		return fmt.Errorf("reading stream %s from %d: %w", st.name, lo, err)
	}
	next := lo // the first sequence not accounted for
	pendingAfter := uint64(1)
	dseq := uint64(1) // a fresh consumer delivers 1, 2, ...: a jump is a lost delivery
	broken := false
	var readErr error // a body that could not be read from the object store
	for msg := range res.Messages() {
		meta, merr := msg.Metadata()
		if broken || merr != nil || meta.Sequence.Consumer != dseq {
			broken = true // take nothing more from this read: the next one starts over
			continue
		}
		dseq++
		m, err := l.c.toSinkMsgResolved(ctx, msg)
		switch {
		case errors.Is(err, ErrPayloadMissing):
			// Gone for good: the index cannot hold it; say so and go on.
			l.log.Error("sink: an outcome's body is missing from the object store; not indexed", "err", err)
		case err != nil:
			readErr = err
			broken = true // read again from here on the next pass
			continue
		}
		for ; next < m.Sequence; next++ {
			l.absent(st, next)
		}
		next = m.Sequence + 1
		pendingAfter = meta.NumPending
		if _, ok := st.held[m.Sequence]; ok || m.Sequence > st.due {
			continue
		}
		st.held[m.Sequence] = false
		l.batch = append(l.batch, m)
		l.read++
	}
	if err := res.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return fmt.Errorf("reading stream %s from %d: %w", st.name, lo, err)
	}
	if readErr != nil {
		return fmt.Errorf("reading stream %s from %d: %w", st.name, lo, readErr)
	}
	if broken {
		return fmt.Errorf("reading stream %s from %d: a delivery was lost; reading again", st.name, lo)
	}
	if next <= st.due && (next == lo || pendingAfter == 0) {
		// The read brought nothing (more): what is due from next is absent,
		// but only as far as the stream itself says. A fetch can come back
		// empty from a stream that holds next (a cluster electing a leader
		// answers before the consumer is ready), and a sequence marked
		// absent is never read again.
		have, err := l.firstFrom(ctx, s, st, next)
		if err != nil {
			return fmt.Errorf("reading stream %s from %d: %w", st.name, next, err)
		}
		if have == lo {
			return fmt.Errorf("reading stream %s from %d: the stream holds it but the read brought nothing; reading again", st.name, lo)
		}
		for ; next < have; next++ {
			l.absent(st, next)
		}
	}
	return nil
}

// firstFrom is the sequence of the first message s holds at or after lo,
// or one past st.due when it holds none up to there.
func (l *sinkLoop) firstFrom(ctx context.Context, s jetstream.Stream, st *sinkStream, lo uint64) (uint64, error) {
	subject := SubjectResults + ".>"
	if st.name == StreamDLQ {
		subject = SubjectDLQ + ".>"
	}
	m, err := s.GetMsg(ctx, lo, jetstream.WithGetMsgSubject(subject))
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
		return st.due + 1, nil
	case err != nil:
		return 0, err
	}
	return min(m.Sequence, st.due+1), nil
}

// absent marks a sequence the stream does not hold (deleted, purged).
func (l *sinkLoop) absent(st *sinkStream, seq uint64) {
	if seq <= st.cursor {
		return
	}
	if _, ok := st.held[seq]; !ok {
		st.held[seq] = true
	}
}

// streamState reads a stream's state from the server.
func (c *Conn) streamState(ctx context.Context, name string) (jetstream.StreamState, error) {
	s, err := c.js.Stream(ctx, name)
	if err != nil {
		return jetstream.StreamState{}, fmt.Errorf("looking up stream %s: %w", name, err)
	}
	return s.CachedInfo().State, nil
}

func toSinkMsg(m jetstream.Msg) SinkMsg {
	sm := SinkMsg{Subject: m.Subject(), Data: m.Data(), MsgID: m.Headers().Get(jetstream.MsgIDHeader)}
	if meta, err := m.Metadata(); err == nil {
		sm.Stream = meta.Stream
		sm.Sequence = meta.Sequence.Stream
		sm.Time = meta.Timestamp
	}
	return sm
}
