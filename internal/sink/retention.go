package sink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/payload"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// StreamLoss is what a stream's limits (or a purge) discarded before the
// index had it: the messages after the index's cursor and before the
// stream's first sequence.
type StreamLoss struct {
	Stream   string
	Cursor   uint64 // every message up to here is indexed
	FirstSeq uint64 // the first message the stream still holds
	Lost     uint64 // FirstSeq - 1 - Cursor
}

// UnindexedLoss compares RESULTS and DLQ with an index's cursors (see
// Index.Cursors) and returns, per stream, the messages the stream no
// longer holds that the index never had. An empty stream that never held a
// message loses nothing.
func UnindexedLoss(ctx context.Context, c *broker.Conn, cursors map[string]uint64) ([]StreamLoss, error) {
	var out []StreamLoss
	for _, name := range []string{broker.StreamResults, broker.StreamDLQ} {
		st, err := c.StreamState(ctx, name)
		if err != nil {
			return nil, err
		}
		cur := cursors[name]
		if st.FirstSeq > cur+1 && st.LastSeq >= cur {
			out = append(out, StreamLoss{Stream: name, Cursor: cur, FirstSeq: st.FirstSeq, Lost: st.FirstSeq - 1 - cur})
		}
	}
	return out, nil
}

// WarnUnindexedLoss logs a warning per stream that discarded outcomes the
// index had not indexed yet (UnindexedLoss), naming the count and the
// limits; it returns what it found.
func WarnUnindexedLoss(ctx context.Context, c *broker.Conn, cursors map[string]uint64, log *slog.Logger) ([]StreamLoss, error) {
	losses, err := UnindexedLoss(ctx, c, cursors)
	if err != nil {
		return nil, fmt.Errorf("comparing the streams with the index: %w", err)
	}
	for _, l := range losses {
		maxAge, maxBytes := c.StreamLimitsOf(ctx, l.Stream)
		log.Warn("stream limits discarded outcomes the index had not indexed yet (they are gone: run the sink, pipeline run, more often than the limits turn over, or raise --stream-max-age / --stream-max-bytes)",
			"stream", l.Stream, "lost", l.Lost, "index_cursor", l.Cursor, "first_seq", l.FirstSeq, "max_age", maxAge, "max_bytes", maxBytes)
	}
	return losses, nil
}

// Pacing of the sink's trimming.
const (
	// trimEvery: how often the sink applies the stream limits.
	trimEvery = time.Second
	// trimScanMax bounds the messages one trim of a stream reads.
	trimScanMax = 10_000
	// storedOverhead approximates what the server's file store adds to a
	// message's subject, headers and body (record header and hash).
	storedOverhead = 30
	// msgSizeHeader carries the body's size in a headers-only delivery.
	msgSizeHeader = "Nats-Msg-Size"
)

// trim applies the stream limits to what the index holds (every stream's
// saved cursor), at most once per trimEvery unless force. A failure is a
// warning: the messages stay, and the next trim tries again.
func (l *sinkLoop) trim(ctx context.Context, force bool) {
	if !force && time.Since(l.lastTrim) < trimEvery {
		return
	}
	l.lastTrim = time.Now()
	for _, st := range l.streams {
		n, err := trimStream(ctx, l.c, st.name, st.saved)
		if err != nil {
			if ctx.Err() == nil {
				l.log.Warn("sink: applying the stream limits (the messages stay; trying again)", "stream", st.name, "err", err)
			}
			continue
		}
		if n > 0 {
			l.log.Debug("sink: stream limits removed indexed outcomes", "stream", st.name, "removed", n, "index_cursor", st.saved)
		}
	}
}

// trimStream removes from stream name, among the messages up to upto
// (those the index holds), the ones its limits discard: older than the max
// age, and the oldest while the stream is over its max bytes. Then it
// deletes their payload objects. It returns how many messages it removed.
func trimStream(ctx context.Context, c *broker.Conn, name string, upto uint64) (int, error) {
	s, err := c.JetStream().Stream(ctx, name)
	if err != nil {
		return 0, fmt.Errorf("looking up stream %s: %w", name, err)
	}
	info := s.CachedInfo()
	age, maxBytes := broker.LimitsOf(info.Config)
	state := info.State
	now := time.Now()
	old := func(t time.Time) bool { return age > 0 && t.Before(now.Add(-age)) }
	if state.Msgs == 0 || state.FirstSeq > upto || (!old(state.FirstTime) && (maxBytes <= 0 || int64(state.Bytes) <= maxBytes)) {
		return 0, nil
	}
	cons, closeCons, err := broker.ScanConsumer(ctx, s, jetstream.ConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:   state.FirstSeq,
		HeadersOnly:   true,
	})
	if err != nil {
		return 0, fmt.Errorf("reading stream %s's headers: %w", name, err)
	}
	defer closeCons()
	batch, err := cons.FetchNoWait(int(min(upto-state.FirstSeq+1, trimScanMax)))
	if err != nil {
		return 0, fmt.Errorf("reading stream %s's headers: %w", name, err)
	}
	remaining := int64(state.Bytes)
	var cut uint64
	var objects []string
	stop := false
	for msg := range batch.Messages() {
		meta, err := msg.Metadata()
		if stop || err != nil || meta.Sequence.Stream > upto {
			stop = true
			continue
		}
		if !old(meta.Timestamp) && (maxBytes <= 0 || remaining <= maxBytes) {
			stop = true
			continue
		}
		cut = meta.Sequence.Stream
		remaining -= storedSize(msg)
		if o := msg.Headers().Get(payload.Header); o != "" {
			objects = append(objects, o)
		}
	}
	if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) {
		return 0, fmt.Errorf("reading stream %s's headers: %w", name, err)
	}
	if cut == 0 {
		return 0, nil
	}
	if err := s.Purge(ctx, jetstream.WithPurgeSequence(cut+1)); err != nil {
		return 0, fmt.Errorf("removing stream %s's messages below %d: %w", name, cut+1, err)
	}
	for _, o := range objects {
		c.Payloads().Drop(ctx, o)
	}
	return int(cut - state.FirstSeq + 1), nil
}

// storedSize approximates the bytes a message (read headers only) takes in
// its stream: subject, headers and body (the Nats-Msg-Size header), plus
// the store's own overhead.
func storedSize(m jetstream.Msg) int64 {
	h := m.Headers()
	body, _ := strconv.ParseInt(h.Get(msgSizeHeader), 10, 64)
	n := int64(len(m.Subject())) + body + storedOverhead
	for k, vs := range h {
		if k == msgSizeHeader {
			continue
		}
		for _, v := range vs {
			n += int64(len(k) + len(v) + 4)
		}
	}
	return n
}

// DeleteOutcomes removes from stream (RESULTS or DLQ) the messages whose
// message id is in msgIDs, and their payload objects: what an operator
// purged from the index leaves the record too, so a rebuild does not bring
// it back and its body does not stay in the object store. It reads the
// stream's headers once, from its first message, and returns how many
// messages it deleted.
func DeleteOutcomes(ctx context.Context, c *broker.Conn, stream string, msgIDs []string) (int, error) {
	if len(msgIDs) == 0 {
		return 0, nil
	}
	want := make(map[string]bool, len(msgIDs))
	for _, id := range msgIDs {
		want[id] = true
	}
	s, err := c.JetStream().Stream(ctx, stream)
	if err != nil {
		return 0, fmt.Errorf("looking up stream %s: %w", stream, err)
	}
	state := s.CachedInfo().State
	if state.Msgs == 0 {
		return 0, nil
	}
	cons, closeCons, err := broker.ScanConsumer(ctx, s, jetstream.ConsumerConfig{HeadersOnly: true})
	if err != nil {
		return 0, fmt.Errorf("reading stream %s's headers: %w", stream, err)
	}
	defer closeCons()
	var seqs []uint64
	var objects []string
	for seen := uint64(0); seen < state.Msgs; {
		batch, err := cons.Fetch(int(min(state.Msgs-seen, trimScanMax)), jetstream.FetchMaxWait(5*time.Second))
		if err != nil {
			return 0, fmt.Errorf("reading stream %s's headers: %w", stream, err)
		}
		got, last := 0, uint64(0)
		for msg := range batch.Messages() {
			got++
			meta, err := msg.Metadata()
			if err != nil {
				continue
			}
			last = meta.Sequence.Stream
			if want[msg.Headers().Get(jetstream.MsgIDHeader)] {
				seqs = append(seqs, last)
				if o := msg.Headers().Get(payload.Header); o != "" {
					objects = append(objects, o)
				}
			}
		}
		if err := batch.Error(); err != nil && !errors.Is(err, jetstream.ErrNoMessages) && !errors.Is(err, nats.ErrTimeout) {
			return 0, fmt.Errorf("reading stream %s's headers: %w", stream, err)
		}
		seen += uint64(got)
		if got == 0 || last >= state.LastSeq {
			break
		}
	}
	deleted := 0
	for _, seq := range seqs {
		if err := s.DeleteMsg(ctx, seq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
			return deleted, fmt.Errorf("deleting stream %s's message %d: %w", stream, seq, err)
		}
		deleted++
	}
	for _, o := range objects {
		c.Payloads().Drop(ctx, o)
	}
	return deleted, nil
}
