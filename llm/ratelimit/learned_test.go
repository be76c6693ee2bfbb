package ratelimit

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"sync"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/model"
)

// mapMemory is a Memory in a map (the broker's, over a NATS KV bucket, is
// tested in internal/broker and end to end in cmd/pipeline); it counts
// the writes.
type mapMemory struct {
	mu   sync.Mutex
	m    map[string][]byte
	puts int
	err  error
}

func (m *mapMemory) Get(_ context.Context, key string) ([]byte, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return nil, false, m.err
	}
	v, ok := m.m[key]
	return v, ok, nil
}

func (m *mapMemory) Put(_ context.Context, key string, v []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.m == nil {
		m.m = map[string][]byte{}
	}
	m.m[key] = v
	m.puts++
	return nil
}

func (m *mapMemory) learned(t *testing.T, key string) (Learned, bool) {
	t.Helper()
	m.mu.Lock()
	defer m.mu.Unlock()
	raw, ok := m.m[key]
	if !ok {
		return Learned{}, false
	}
	var k Learned
	if err := json.Unmarshal(raw, &k); err != nil {
		t.Fatalf("memory holds %q: %v", raw, err)
	}
	return k, true
}

// A limiter that remembers what an earlier run learned does not probe
// the provider one call at a time: the 16 callers' requests go out while
// the first is still being answered.
func TestRememberedProviderIsNotProbed(t *testing.T) {
	t.Parallel()
	p := newProvider(t, false)
	b := &refilling{limit: 60000, capacity: 10000, level: 10000}
	p.headers = func(n int, now time.Time, h http.Header) {
		b.take(now, h)
		if n == 1 {
			time.Sleep(200 * time.Millisecond) // the provider's latency: the others ask meanwhile
		}
	}
	l, m := limited(t, p, Config{})
	mem := &mapMemory{m: map[string][]byte{"k": []byte(`{"headers":true,"requests_per_minute":60000}`)}}
	if err := l.Remember(t.Context(), mem, "k"); err != nil {
		t.Fatal(err)
	}
	call(t, m, 16, 16, func(i int) model.Request { return request(i, 40, 10) })
	arrivals, _, sentAt := p.record()
	before := 0
	for _, a := range arrivals {
		if a.Before(sentAt[0]) {
			before++
		}
	}
	if before < 8 {
		t.Errorf("%d of %d requests arrived before the first answer was sent, want most of them (no probe)", before, len(arrivals))
	}
}

// What is recalled paces each family at its refill rate until the first
// answer's headers say more.
func TestRecallPacesAtTheRememberedLimits(t *testing.T) {
	t.Parallel()
	l, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	l.Recall(Learned{Headers: true, RequestsPerMinute: 600, TokensPerMinute: 60000})
	req, tok := l.Rates()
	if !near(req, 10) || !near(tok, 1000) {
		t.Errorf("rates %g requests/s, %g tokens/s; want the refill rates 10 and 1000", req, tok)
	}
	// A provider known to send no headers is not paced at all.
	l2, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	l2.Recall(Learned{})
	if req, tok := l2.Rates(); !math.IsInf(req, 1) || !math.IsInf(tok, 1) {
		t.Errorf("rates %g, %g for a provider without headers, want unlimited", req, tok)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Second)
	defer cancel()
	for i := range 8 {
		if _, err := l2.Wait(ctx, 10); err != nil {
			t.Fatalf("call %d waited for a gate that Recall opened: %v", i+1, err)
		}
	}
}

// Only a successful answer teaches: what it says goes to the memory once,
// and again only when it changes.
func TestAnswersAreRemembered(t *testing.T) {
	t.Parallel()
	l, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	mem := &mapMemory{}
	if err := l.Remember(t.Context(), mem, "k"); err != nil {
		t.Fatal(err)
	}
	l.Observe(http.StatusTooManyRequests, hdr("retry-after", "0"))
	l.Observe(http.StatusBadGateway, nil)
	if _, ok := mem.learned(t, "k"); ok {
		t.Fatal("an error answer was remembered")
	}
	openai := hdr("x-ratelimit-limit-requests", "500", "x-ratelimit-remaining-requests", "499", "x-ratelimit-reset-requests", "120ms",
		"x-ratelimit-limit-tokens", "200000", "x-ratelimit-remaining-tokens", "199000", "x-ratelimit-reset-tokens", "300ms")
	l.Observe(http.StatusOK, openai)
	l.Observe(http.StatusOK, openai)
	want := Learned{Headers: true, RequestsPerMinute: 500, TokensPerMinute: 200000}
	if k, ok := mem.learned(t, "k"); !ok || k != want || mem.puts != 1 {
		t.Errorf("memory holds %+v (%v) after %d writes, want %+v written once", k, ok, mem.puts, want)
	}
	if k, ok := l.Known(); !ok || k != want {
		t.Errorf("Known() = %+v, %v; want %+v", k, ok, want)
	}
	l.Observe(http.StatusOK, http.Header{})
	if k, _ := mem.learned(t, "k"); k != (Learned{}) || mem.puts != 2 {
		t.Errorf("memory holds %+v after %d writes, want a provider without headers", k, mem.puts)
	}
}

// A memory that cannot be read is said, and the limiter probes as
// without one.
func TestUnreadableMemoryKeepsTheProbe(t *testing.T) {
	t.Parallel()
	l, err := New(Config{Provider: "openai"})
	if err != nil {
		t.Fatal(err)
	}
	boom := errors.New("no responders")
	if err := l.Remember(t.Context(), &mapMemory{err: boom}, "k"); !errors.Is(err, boom) {
		t.Fatalf("Remember = %v, want the memory's error", err)
	}
	if err := l.Remember(t.Context(), &mapMemory{m: map[string][]byte{"k": []byte("{")}}, "k"); err == nil {
		t.Fatal("Remember took a broken value")
	}
	if _, err := l.Wait(t.Context(), 10); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	if _, err := l.Wait(ctx, 10); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("second call before any answer: %v, want it held by the probe", err)
	}
}

// Anthropic's families (anthropic-ratelimit-*, resets as RFC 3339 times)
// are remembered as OpenAI's: the requests limit and the combined tokens
// limit.
func TestAnthropicAnswersAreRemembered(t *testing.T) {
	t.Parallel()
	l, err := New(Config{Provider: "anthropic"})
	if err != nil {
		t.Fatal(err)
	}
	mem := &mapMemory{}
	if err := l.Remember(t.Context(), mem, "k"); err != nil {
		t.Fatal(err)
	}
	reset := time.Now().Add(2 * time.Second).UTC().Format(time.RFC3339)
	l.Observe(http.StatusOK, hdr(
		"anthropic-ratelimit-requests-limit", "50", "anthropic-ratelimit-requests-remaining", "49", "anthropic-ratelimit-requests-reset", reset,
		"anthropic-ratelimit-tokens-limit", "90000", "anthropic-ratelimit-tokens-remaining", "89000", "anthropic-ratelimit-tokens-reset", reset,
		"anthropic-ratelimit-input-tokens-limit", "50000", "anthropic-ratelimit-input-tokens-remaining", "49500", "anthropic-ratelimit-input-tokens-reset", reset))
	want := Learned{Headers: true, RequestsPerMinute: 50, TokensPerMinute: 90000}
	if k, ok := mem.learned(t, "k"); !ok || k != want {
		t.Errorf("memory holds %+v (%v), want %+v", k, ok, want)
	}
}
