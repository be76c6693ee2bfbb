package main

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// probeServer answers chat completions with a valid ticket after a
// latency, with OpenAI's rate-limit headers, and records when each
// request arrived and each answer was sent.
type probeServer struct {
	*httptest.Server
	mu       sync.Mutex
	arrivals []time.Time
	sent     []time.Time
}

func newProbeServer(t *testing.T, latency time.Duration) *probeServer {
	t.Helper()
	s := &probeServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.arrivals = append(s.arrivals, time.Now())
		s.mu.Unlock()
		time.Sleep(latency) // the model's latency: the other calls arrive meanwhile, or wait for its headers
		h := w.Header()
		h.Set("Content-Type", "application/json")
		h.Set("x-ratelimit-limit-requests", "60000")
		h.Set("x-ratelimit-remaining-requests", "59999")
		h.Set("x-ratelimit-reset-requests", "1ms")
		h.Set("x-ratelimit-limit-tokens", "10000000")
		h.Set("x-ratelimit-remaining-tokens", "9999000")
		h.Set("x-ratelimit-reset-tokens", "6ms")
		s.mu.Lock()
		s.sent = append(s.sent, time.Now())
		s.mu.Unlock()
		writeTicketAnswer(w)
	}))
	t.Cleanup(s.Close)
	return s
}

// early counts the requests from the from-th on (0-based) that arrived
// before the first of their answers was sent.
func (s *probeServer) early(from int) (early, total int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	first := s.sent[from]
	for _, a := range s.arrivals[from:] {
		if a.Before(first) {
			early++
		}
	}
	return early, len(s.arrivals) - from
}

// A run on a new data dir probes the provider: one call, then the others
// once its answer's headers said the limits. The next run on the same
// data dir remembers them (KV PIPELINE_PROVIDER_LIMITS) and sends its
// calls at once.
func TestNextRunRemembersTheProvidersLimits(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-remembered-key")
	srv := newProbeServer(t, 300*time.Millisecond)
	dir := t.TempDir()
	const k = 8
	run := func(round int) string {
		var b strings.Builder
		for i := range k {
			fmt.Fprintf(&b, `{"id":"mem-%d-%d","schema":"ticket","input":"From: Ana Lima <ana@example.com> I cannot log in (%d)."}`+"\n", round, i, i)
		}
		mustCLI(t, b.String(), "submit", "--data-dir", dir, "-")
		_, errs, code := runCLI(t, "", "run", "--data-dir", dir, "--until-idle", "--model", "openai:m",
			"--llm-url", srv.URL+"/v1", "--concurrency", fmt.Sprint(k), "--log-level", "info")
		if code != 0 {
			t.Fatalf("run %d: exit %d\n%s", round, code, errs)
		}
		return errs
	}
	first := run(1)
	if early, total := srv.early(0); early != 1 || total != k {
		t.Errorf("first run: %d of %d calls sent before the first answer, want 1 (the probe)", early, total)
	}
	if strings.Contains(first, "remembered from an earlier run") {
		t.Errorf("first run says it remembered limits:\n%s", first)
	}
	second := run(2)
	if early, total := srv.early(k); early < k/2 || total != k {
		t.Errorf("second run: %d of %d calls sent before its first answer, want most of them (no probe)", early, total)
	}
	if !strings.Contains(second, "provider limits remembered from an earlier run") || !strings.Contains(second, "requests_per_minute=60000") {
		t.Errorf("second run does not say what it remembered:\n%s", second)
	}
	if strings.Contains(second, "sk-remembered-key") {
		t.Error("the API key reached the log")
	}
}
