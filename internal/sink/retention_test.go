package sink

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/payload"
	"github.com/nats-io/nats.go/jetstream"
)

// TestStreamLimits: limits are kept in the streams' metadata (the
// server's own limits stay off), applied to an existing stream at
// broker.Connect, kept by a broker.Connect that does not set them, and removed by zero;
// the sink's trim removes only what the index holds. A stream with the
// server's limits (an earlier version's) has them moved over.
func TestStreamLimits(t *testing.T) {
	dir := t.TempDir()
	connect := func(lim broker.StreamLimits, log *slog.Logger) *broker.Conn {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		c, err := broker.Connect(ctx, broker.Config{DataDir: dir, StreamLimits: lim, Logger: log})
		if err != nil {
			t.Fatalf("Connect: %v", err)
		}
		return c
	}
	config := func(c *broker.Conn, stream string) jetstream.StreamConfig {
		t.Helper()
		s, err := c.JetStream().Stream(t.Context(), stream)
		if err != nil {
			t.Fatal(err)
		}
		return s.CachedInfo().Config
	}
	serverLimitsOff := func(c *broker.Conn, when string) {
		t.Helper()
		for _, s := range []string{broker.StreamResults, broker.StreamDLQ} {
			if cfg := config(c, s); cfg.MaxAge != 0 || cfg.MaxBytes != -1 {
				t.Errorf("%s: stream %s has the server's max age %v, max bytes %d: it would discard outcomes the index has not read", when, s, cfg.MaxAge, cfg.MaxBytes)
			}
		}
	}

	c := connect(broker.StreamLimits{}, nil)
	serverLimitsOff(c, "new")
	payload := strings.Repeat("x", 200)
	for i := range 200 {
		m := broker.NewMsg(broker.SubjectResults+".invoice", fmt.Sprintf("r-%d", i), []byte(payload))
		if _, err := c.JetStream().PublishMsg(t.Context(), m); err != nil {
			t.Fatal(err)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	maxBytes, maxAge := int64(8<<10), 30*24*time.Hour
	c = connect(broker.StreamLimits{MaxBytes: &maxBytes, MaxAge: &maxAge}, nil)
	serverLimitsOff(c, "after broker.Connect with limits")
	for _, s := range []string{broker.StreamResults, broker.StreamDLQ} {
		if age, size := broker.LimitsOf(config(c, s)); age != maxAge || size != maxBytes {
			t.Errorf("%s after broker.Connect with limits: max age %v, max bytes %d; want %v, %d", s, age, size, maxAge, maxBytes)
		}
	}
	st, err := c.StreamState(t.Context(), broker.StreamResults)
	if err != nil {
		t.Fatal(err)
	}
	if st.FirstSeq != 1 || st.Msgs != 200 {
		t.Fatalf("RESULTS first seq %d, %d messages: limits discarded outcomes no index has read", st.FirstSeq, st.Msgs)
	}
	// The index holds the first 10: only those may go.
	n, err := trimStream(t.Context(), c, broker.StreamResults, 10)
	if err != nil || n != 10 {
		t.Fatalf("trim up to 10: removed %d, %v; want 10", n, err)
	}
	if st, _ = c.StreamState(t.Context(), broker.StreamResults); st.FirstSeq != 11 || st.LastSeq != 200 {
		t.Fatalf("after trimming up to the cursor 10: first seq %d, last %d; want 11, 200", st.FirstSeq, st.LastSeq)
	}
	// The index holds everything: the oldest go until the stream fits.
	if _, err := trimStream(t.Context(), c, broker.StreamResults, 200); err != nil {
		t.Fatal(err)
	}
	if st, _ = c.StreamState(t.Context(), broker.StreamResults); int64(st.Bytes) > maxBytes || st.LastSeq != 200 || st.Msgs < 10 {
		t.Errorf("after trimming an indexed stream: %d bytes in %d messages (last %d); want at most %d, the newest kept", st.Bytes, st.Msgs, st.LastSeq, maxBytes)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	// Not set: kept as they are. Zero: removed.
	c = connect(broker.StreamLimits{}, nil)
	if age, size := broker.LimitsOf(config(c, broker.StreamResults)); age != maxAge || size != maxBytes {
		t.Errorf("a broker.Connect without limits changed them: max age %v, max bytes %d", age, size)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	zeroAge, zeroBytes := time.Duration(0), int64(0)
	c = connect(broker.StreamLimits{MaxAge: &zeroAge, MaxBytes: &zeroBytes}, nil)
	if age, size := broker.LimitsOf(config(c, broker.StreamDLQ)); age != 0 || size != 0 {
		t.Errorf("limits set to 0: max age %v, max bytes %d; want none", age, size)
	}

	// An earlier version's server limits move to the metadata.
	legacy := config(c, broker.StreamDLQ)
	legacy.MaxAge, legacy.MaxBytes = 48*time.Hour, 1<<20
	delete(legacy.Metadata, broker.MetaMaxAge)
	delete(legacy.Metadata, broker.MetaMaxBytes)
	if _, err := c.JetStream().UpdateStream(t.Context(), legacy); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	c = connect(broker.StreamLimits{}, nil)
	defer c.Close()
	serverLimitsOff(c, "upgraded")
	if age, size := broker.LimitsOf(config(c, broker.StreamDLQ)); age != 48*time.Hour || size != 1<<20 {
		t.Errorf("upgraded DLQ: max age %v, max bytes %d; want the server's 48h, 1MiB moved over", age, size)
	}
}

// TestStreamMaxAgeBelowTheDuplicateWindow: a max age shorter than the
// duplicate window caps the window (said once), and later Connects that
// set neither read the stored settings back and succeed.
func TestStreamMaxAgeBelowTheDuplicateWindow(t *testing.T) {
	dir := t.TempDir()
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	connect := func(cfg broker.Config) (*broker.Conn, error) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		cfg.DataDir, cfg.Logger = dir, log
		return broker.Connect(ctx, cfg)
	}
	age := time.Minute
	c, err := connect(broker.Config{DuplicateWindow: 2 * time.Minute, StreamLimits: broker.StreamLimits{MaxAge: &age}})
	if err != nil {
		t.Fatalf("Connect with a max age of 1m and the default duplicate window: %v", err)
	}
	s, err := c.JetStream().Stream(t.Context(), broker.StreamResults)
	if err != nil {
		t.Fatal(err)
	}
	if d := s.CachedInfo().Config.Duplicates; d != age {
		t.Errorf("RESULTS duplicate window %v, want capped at the max age %v", d, age)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for _, cfg := range []broker.Config{{}, {}, {DuplicateWindow: 2 * time.Minute}} {
		c, err := connect(cfg)
		if err != nil {
			t.Fatalf("Connect (duplicate window %v) after the limit was stored: %v", cfg.DuplicateWindow, err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
	if n := strings.Count(logs.String(), "duplicate window capped"); n != 2 {
		t.Errorf("the cap was said %d times, want once per stream (RESULTS, DLQ):\n%s", n, logs.String())
	}
}

// TestStreamLimitsKeepUnindexedOutcomes: with a short max age and no sink
// running, outcomes (large ones with their payload objects) stay on the
// streams past the age; the sink, when it runs, indexes every one and then
// removes them and their objects.
func TestStreamLimitsKeepUnindexedOutcomes(t *testing.T) {
	age := 300 * time.Millisecond
	c := newConn(t, func(cfg *broker.Config) { cfg.StreamLimits.MaxAge = &age })
	ids := publishOutcomes(t, c, 20, 5)
	big := bytes.Repeat([]byte("y"), c.Payloads().InlineLimit()+1)
	for i := range 3 {
		id := fmt.Sprintf("big-%d", i)
		m := broker.NewMsg(broker.SubjectDLQ+".invoice", id, big)
		if _, err := c.Payloads().Offload(t.Context(), m, payload.KindDLQ); err != nil {
			t.Fatal(err)
		}
		if _, err := c.JetStream().PublishMsg(t.Context(), m); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	published := time.Now()
	if got := payloadObjects(t, c); got != 3 {
		t.Fatalf("%d payload objects, want 3", got)
	}
	// The sink is stopped for well past the age (and the server's expiry
	// pass, once a second): nothing may leave the streams meanwhile.
	<-time.After(time.Until(published.Add(age + 2*time.Second)))
	for stream, want := range map[string]uint64{broker.StreamResults: 20, broker.StreamDLQ: 8} {
		if st, err := c.StreamState(t.Context(), stream); err != nil || st.Msgs != want {
			t.Errorf("%s holds %d messages past the max age with no sink (%v), want %d: outcomes lost before they were indexed", stream, st.Msgs, err, want)
		}
	}

	idx := newMemIndex(t)
	runSink(t, c, idx, Config{})
	idx.check(t, ids)
	for _, stream := range []string{broker.StreamResults, broker.StreamDLQ} {
		if st, err := c.StreamState(t.Context(), stream); err != nil || st.Msgs != 0 {
			t.Errorf("%s holds %d messages once indexed and past the max age (%v), want 0", stream, st.Msgs, err)
		}
	}
	if got := payloadObjects(t, c); got != 0 {
		t.Errorf("%d payload objects left after their outcomes left the streams, want 0", got)
	}
}

// payloadObjects counts the objects in the payload bucket.
func payloadObjects(t *testing.T, c *broker.Conn) int {
	t.Helper()
	obs, err := c.JetStream().ObjectStore(t.Context(), payload.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	list, err := obs.List(t.Context())
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return 0
	}
	if err != nil {
		t.Fatal(err)
	}
	return len(list)
}
