package ingest

import (
	"context"
	"fmt"
	"log/slog"
	"time"
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
// SinkIndex.Cursors) and returns, per stream, the messages the stream no
// longer holds that the index never had. An empty stream that never held a
// message loses nothing.
func (c *Conn) UnindexedLoss(ctx context.Context, cursors map[string]uint64) ([]StreamLoss, error) {
	var out []StreamLoss
	for _, name := range []string{StreamResults, StreamDLQ} {
		st, err := c.streamState(ctx, name)
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
func (c *Conn) WarnUnindexedLoss(ctx context.Context, cursors map[string]uint64, log *slog.Logger) ([]StreamLoss, error) {
	losses, err := c.UnindexedLoss(ctx, cursors)
	if err != nil {
		return nil, fmt.Errorf("comparing the streams with the index: %w", err)
	}
	for _, l := range losses {
		maxAge, maxBytes := c.streamLimits(ctx, l.Stream)
		log.Warn("stream limits discarded outcomes the index had not indexed yet (they are gone: run the sink, pipeline run, more often than the limits turn over, or raise --stream-max-age / --stream-max-bytes)",
			"stream", l.Stream, "lost", l.Lost, "index_cursor", l.Cursor, "first_seq", l.FirstSeq, "max_age", maxAge, "max_bytes", maxBytes)
	}
	return losses, nil
}

// streamLimits reads a stream's configured MaxAge and MaxBytes (zero and
// -1 when unknown or unlimited).
func (c *Conn) streamLimits(ctx context.Context, name string) (time.Duration, int64) {
	s, err := c.js.Stream(ctx, name)
	if err != nil {
		return 0, -1
	}
	cfg := s.CachedInfo().Config
	return cfg.MaxAge, cfg.MaxBytes
}
