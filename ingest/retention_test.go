package ingest

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"
)

// TestStreamLimits: limits are applied to an existing stream at Connect,
// kept by a Connect that does not set them, and removed by zero; what they
// discarded above the index's cursor is reported and logged as a warning.
func TestStreamLimits(t *testing.T) {
	dir := t.TempDir()
	connect := func(lim StreamLimits, log *slog.Logger) *Conn {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		c, err := Connect(ctx, Config{DataDir: dir, StreamLimits: lim, Logger: log})
		if err != nil {
			t.Fatalf("Connect: %v", err)
		}
		return c
	}
	limits := func(c *Conn, stream string) (time.Duration, int64) {
		t.Helper()
		s, err := c.js.Stream(t.Context(), stream)
		if err != nil {
			t.Fatal(err)
		}
		return s.CachedInfo().Config.MaxAge, s.CachedInfo().Config.MaxBytes
	}

	c := connect(StreamLimits{}, nil)
	for _, s := range []string{StreamResults, StreamDLQ} {
		if age, size := limits(c, s); age != 0 || size != -1 {
			t.Errorf("new stream %s: max age %v, max bytes %d; want none", s, age, size)
		}
	}
	payload := strings.Repeat("x", 200)
	for i := range 200 {
		m := newMsg(SubjectResults+".invoice", fmt.Sprintf("r-%d", i), []byte(payload))
		if _, err := c.js.PublishMsg(t.Context(), m); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	maxBytes, maxAge := int64(8<<10), 30*24*time.Hour
	c = connect(StreamLimits{MaxBytes: &maxBytes, MaxAge: &maxAge}, log)
	if age, size := limits(c, StreamResults); age != maxAge || size != maxBytes {
		t.Errorf("RESULTS after Connect with limits: max age %v, max bytes %d; want %v, %d", age, size, maxAge, maxBytes)
	}
	if age, size := limits(c, StreamDLQ); age != maxAge || size != maxBytes {
		t.Errorf("DLQ after Connect with limits: max age %v, max bytes %d; want %v, %d", age, size, maxAge, maxBytes)
	}
	st, err := c.streamState(t.Context(), StreamResults)
	if err != nil {
		t.Fatal(err)
	}
	if st.FirstSeq <= 11 || st.LastSeq != 200 {
		t.Fatalf("RESULTS first seq %d, last %d: want the max bytes to have discarded past seq 10", st.FirstSeq, st.LastSeq)
	}
	// The index had the first 10; the rest below the first seq are lost.
	losses, err := c.WarnUnindexedLoss(t.Context(), map[string]uint64{StreamResults: 10}, log)
	if err != nil {
		t.Fatal(err)
	}
	want := st.FirstSeq - 1 - 10
	if len(losses) != 1 || losses[0].Stream != StreamResults || losses[0].Lost != want {
		t.Errorf("losses %+v; want RESULTS lost %d", losses, want)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), fmt.Sprintf("lost=%d", want)) {
		t.Errorf("no warning naming %d lost outcomes:\n%s", want, logs.String())
	}
	// An index that has everything the stream discarded loses nothing.
	if losses, err := c.UnindexedLoss(t.Context(), map[string]uint64{StreamResults: 200}); err != nil || len(losses) != 0 {
		t.Errorf("index up to date: losses %+v, %v; want none", losses, err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	// Not set: kept as they are. Zero: removed.
	c = connect(StreamLimits{}, nil)
	if age, size := limits(c, StreamResults); age != maxAge || size != maxBytes {
		t.Errorf("a Connect without limits changed them: max age %v, max bytes %d", age, size)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	zeroAge, zeroBytes := time.Duration(0), int64(0)
	c = connect(StreamLimits{MaxAge: &zeroAge, MaxBytes: &zeroBytes}, nil)
	defer c.Close()
	if age, size := limits(c, StreamDLQ); age != 0 || size != -1 {
		t.Errorf("limits set to 0: max age %v, max bytes %d; want none", age, size)
	}
}
