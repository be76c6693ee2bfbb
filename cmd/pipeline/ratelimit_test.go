package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/internal/poll"
)

// timedServer answers every chat completion with a valid ticket and
// records when each request arrived.
type timedServer struct {
	*httptest.Server
	mu       sync.Mutex
	arrivals []time.Time
}

func newTimedServer(t *testing.T) *timedServer {
	t.Helper()
	s := &timedServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s.mu.Lock()
		s.arrivals = append(s.arrivals, time.Now())
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		writeTicketAnswer(w)
	}))
	t.Cleanup(s.Close)
	return s
}

// window returns the fewest and the most requests any window of length w
// that lies inside the run holds (the fewest over windows ending a full
// w after the first request and starting a full w before the last).
func (s *timedServer) window(w time.Duration) (fewest, most int) {
	s.mu.Lock()
	at := append([]time.Time(nil), s.arrivals...)
	s.mu.Unlock()
	sort.Slice(at, func(i, j int) bool { return at[i].Before(at[j]) })
	fewest = len(at)
	lo := 0
	for i, t := range at {
		for !at[lo].After(t.Add(-w)) {
			lo++
		}
		most = max(most, i-lo+1)
		if t.Sub(at[0]) >= w && at[len(at)-1].Sub(t) >= w {
			fewest = min(fewest, i-lo+1)
		}
	}
	return fewest, most
}

// Two `pipeline run` processes on one embedded server, one model and one
// key share one --rpm: once both run, no window of --rate-window holds
// more requests than the limit, and together they reach at least 0.9 of
// it in every window.
func TestRunProcessesShareOneRPM(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-shared-key")
	srv := newTimedServer(t)
	dir := t.TempDir()
	const jobs, rpm, win = 300, 150, 5 * time.Second

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	args := []string{"pipeline", "run", "--data-dir", dir, "--model", "openai:m", "--llm-url", srv.URL + "/v1",
		"--concurrency", "8", "--rpm", fmt.Sprint(rpm), "--rate-window", win.String(), "--log-level", "info"}
	var wg sync.WaitGroup
	stderr := []*syncBuffer{{}, {}}
	errs := make([]error, 2)
	start := func(i int, extra ...string) {
		wg.Go(func() {
			errs[i] = runApp(ctx, newApp(strings.NewReader(""), io.Discard, stderr[i]), append(append([]string(nil), args...), extra...))
		})
	}
	start(0)
	poll.Until(t, 30*time.Second, "the first run to share the limit", func() bool { return strings.Contains(stderr[0].String(), "rate limit shared") })
	start(1, "--sink=false")
	// The second counts two once it has waited for the first to count it.
	poll.Until(t, 30*time.Second, "the second run to count two members", func() bool { return strings.Contains(stderr[1].String(), "members=2") })

	var b strings.Builder
	for i := range jobs {
		fmt.Fprintf(&b, `{"id":"rl-%04d","schema":"ticket","input":"From: Ana Lima <ana@example.com> I cannot log in (%d)."}`+"\n", i, i)
	}
	mustCLI(t, b.String(), "submit", "--data-dir", dir, "-")
	poll.Until(t, 2*time.Minute, "every job to reach the model", func() bool {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		return len(srv.arrivals) >= jobs
	})
	poll.Until(t, time.Minute, "every result to be indexed", func() bool {
		out, _, code := runCLI(t, "", "results", "--data-dir", dir)
		return code == 0 && len(jsonLines(t, out)) == jobs
	})
	cancel()
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Errorf("run %d: %v\n%s", i, err, stderr[i])
		}
	}
	fewest, most := srv.window(win)
	t.Logf("requests per %s window: fewest %d, most %d, limit %d", win, fewest, most, rpm)
	if most > rpm {
		t.Errorf("%d requests in one %s window, limit %d", most, win, rpm)
	}
	if fewest < rpm*9/10 {
		t.Errorf("only %d requests in a %s window, want at least %d (0.9 of the limit)", fewest, win, rpm*9/10)
	}
}
