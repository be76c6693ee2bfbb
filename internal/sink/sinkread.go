package sink

// How the sink reads what no worker handed it: each stream's first and
// last sequence, and the due sequences it lacks, read with direct gets and
// passed over only where the stream holds nothing.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/payload"
	"github.com/nats-io/nats.go/jetstream"
)

// observe reads each stream's first and last sequence, moves the cursor
// past what the stream no longer holds, and updates which sequences are
// due. caught reports whether every cursor had reached its stream's last
// sequence when observed.
func (l *sinkLoop) observe(ctx context.Context) (caught bool, err error) {
	now := time.Now()
	caught = true
	for _, st := range l.streams {
		info, err := l.c.StreamState(ctx, st.name)
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
				l.log.Warn("sink: outcomes left the stream before they were indexed (a purge or limits set on the stream outside pipeline); they are gone",
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

// readRange reads up to n due messages of st from sequence lo with an
// ephemeral consumer (scanConsumer) (nothing is acked), the fast way. Sequences
// it passes over that the stream does not hold are marked absent, so the
// cursor moves past them. When the consumer cannot be made or brings
// nothing (more) of what is due, the rest is read with direct gets
// (readDirect): right after a cluster lost a node a new consumer may be
// placed on that node and deliver nothing for a minute, while the
// replicas answer direct gets at once.
func (l *sinkLoop) readRange(ctx context.Context, st *sinkStream, lo uint64, n int) error {
	s, err := l.c.JetStream().Stream(ctx, st.name)
	if err != nil {
		return fmt.Errorf("looking up stream %s: %w", st.name, err)
	}
	var res jetstream.MessageBatch
	cons, closeCons, err := broker.ScanConsumer(ctx, s, jetstream.ConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:   lo,
	})
	if err == nil {
		defer closeCons()
		res, err = cons.FetchNoWait(n)
	}
	if err != nil {
		l.log.Debug("sink: no consumer to read the stream with; reading it with direct gets", "stream", st.name, "from", lo, "err", err)
		return l.readDirect(ctx, s, st, lo, n)
	}
	next := lo // the first sequence not accounted for
	got := 0
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
		m, err := resolvedMsg(ctx, l.c, msg)
		switch {
		case errors.Is(err, payload.ErrMissing), errors.Is(err, payload.ErrCorrupt):
			// Gone (or changed) for good: the index cannot hold it; say so and go on.
			l.log.Error("sink: an outcome's body is missing from the object store or does not match its message; not indexed", "err", err)
		case err != nil:
			readErr = err
			broken = true // read again from here on the next pass
			continue
		}
		for ; next < m.Sequence; next++ {
			l.absent(st, next)
		}
		next = m.Sequence + 1
		got++
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
	if next <= st.due && (next == lo || pendingAfter == 0) && got < n {
		// Nothing (more) came of what is due. A fetch comes back empty
		// after a second from a consumer that delivers nothing, and a
		// sequence marked absent is never read again: the stream's
		// replicas say what it holds.
		return l.readDirect(ctx, s, st, next, n-got)
	}
	return nil
}

// readDirect reads up to n due messages of st from sequence next, one
// direct get each (the stream's first message at or after a sequence,
// answered by any of its replicas). Replicas apply the stream in order, so
// the sequences before a message one of them returns are sequences the
// stream no longer holds: they are marked absent. "Nothing from here" may
// come from a replica that lags, so it is checked against the leader's
// list of deleted sequences before anything is marked absent.
func (l *sinkLoop) readDirect(ctx context.Context, s jetstream.Stream, st *sinkStream, next uint64, n int) error {
	subject := broker.SubjectResults + ".>"
	if st.name == broker.StreamDLQ {
		subject = broker.SubjectDLQ + ".>"
	}
	for read := 0; read < n && next <= st.due; {
		raw, err := s.GetMsg(ctx, next, jetstream.WithGetMsgSubject(subject))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return l.absentIfDeleted(ctx, s, st, next)
		}
		if err != nil {
			return fmt.Errorf("reading stream %s at %d: %w", st.name, next, err)
		}
		for ; next < raw.Sequence && next <= st.due; next++ {
			l.absent(st, next)
		}
		if raw.Sequence > st.due {
			return nil
		}
		next = raw.Sequence + 1
		read++
		if _, ok := st.held[raw.Sequence]; ok {
			continue
		}
		m, err := rawMsg(ctx, l.c, st.name, raw)
		switch {
		case errors.Is(err, payload.ErrMissing), errors.Is(err, payload.ErrCorrupt):
			// Gone (or changed) for good: the index cannot hold it; say so and go on.
			l.log.Error("sink: an outcome's body is missing from the object store or does not match its message; not indexed", "err", err)
			l.absent(st, raw.Sequence)
			continue
		case err != nil:
			return fmt.Errorf("reading stream %s at %d: %w", st.name, raw.Sequence, err)
		}
		st.held[m.Sequence] = false
		l.batch = append(l.batch, m)
		l.read++
	}
	return nil
}

// absentIfDeleted marks absent the due sequences from next on that the
// stream's leader lists as deleted; when one of them is not deleted (a
// replica that answered "nothing from here" lags), nothing is marked and
// the range is read again on the next pass.
func (l *sinkLoop) absentIfDeleted(ctx context.Context, s jetstream.Stream, st *sinkStream, next uint64) error {
	info, err := s.Info(ctx, jetstream.WithDeletedDetails(true))
	if err != nil {
		return fmt.Errorf("reading stream %s's deleted sequences: %w", st.name, err)
	}
	deleted := make(map[uint64]bool, len(info.State.Deleted))
	for _, seq := range info.State.Deleted {
		deleted[seq] = true
	}
	last := min(st.due, info.State.LastSeq)
	for seq := next; seq <= last; seq++ {
		if !deleted[seq] && seq >= info.State.FirstSeq {
			return fmt.Errorf("reading stream %s at %d: the stream holds it, the replica asked has not got it yet; reading again", st.name, seq)
		}
	}
	for seq := next; seq <= last; seq++ {
		l.absent(st, seq)
	}
	return nil
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

func toMsg(m jetstream.Msg) Msg {
	sm := Msg{Subject: m.Subject(), Data: m.Data(), MsgID: m.Headers().Get(jetstream.MsgIDHeader)}
	if meta, err := m.Metadata(); err == nil {
		sm.Stream = meta.Stream
		sm.Sequence = meta.Sequence.Stream
		sm.Time = meta.Timestamp
	}
	return sm
}
