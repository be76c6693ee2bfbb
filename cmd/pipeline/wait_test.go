package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/internal/poll"
)

// waitServer answers chat completions as OpenAI does under a rate limit:
// the first waits requests get a 429 rate_limit_exceeded that asks for a
// wait (retry-after-ms, and Retry-After in whole seconds), every later one
// a valid ticket after latency. It records when each request arrived and
// when each 429 was sent.
type waitServer struct {
	*httptest.Server
	waits   int
	wait    time.Duration
	latency time.Duration

	mu       sync.Mutex
	arrivals []time.Time
	asked    []time.Time // when each 429 was answered
}

func newWaitServer(t *testing.T, waits int, wait, latency time.Duration) *waitServer {
	t.Helper()
	s := &waitServer{waits: waits, wait: wait, latency: latency}
	s.Server = httptest.NewServer(http.HandlerFunc(s.serve))
	t.Cleanup(s.Close)
	return s
}

func (s *waitServer) serve(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	s.mu.Lock()
	s.arrivals = append(s.arrivals, time.Now())
	n := len(s.arrivals)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if n <= s.waits {
		w.Header().Set("retry-after-ms", fmt.Sprint(s.wait.Milliseconds()))
		w.Header().Set("Retry-After", fmt.Sprint(int((s.wait+time.Second-1)/time.Second)))
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, `{"error":{"message":"Rate limit reached for m in organization org-test on requests per min (RPM): Limit 3, Used 3, Requested 1. Please try again later.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`)
		s.mu.Lock()
		s.asked = append(s.asked, time.Now())
		s.mu.Unlock()
		return
	}
	if s.latency > 0 {
		time.Sleep(s.latency) // the provider's answer time, not a synchronisation
	}
	writeTicketAnswer(w)
}

func (s *waitServer) calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.arrivals)
}

// TestRunHoldsTheJobForTheProvidersWait: a 429 asking for a wait longer
// than the one retry allowed and than the ack wait is kept: the job is
// held in its worker through two such waits (heartbeats, no redelivery),
// answered on its first delivery, with --max-deliver 1, and nothing is
// dead-lettered. A wait longer than --max-retry-after is a transport
// failure naming the wait.
func TestRunHoldsTheJobForTheProvidersWait(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-test-wait")
	const wait = 1500 * time.Millisecond
	run := func(t *testing.T, waits int, maxAfter string) (*waitServer, string, string) {
		srv := newWaitServer(t, waits, wait, 0)
		dir := t.TempDir()
		ticketJobs(t, dir, "ra", 1)
		_, errs, code := runCLI(t, "", "run", "--data-dir", dir, "--until-idle", "--model", "openai:m", "--llm-url", srv.URL+"/v1",
			"--concurrency", "1", "--transport-retries", "1", "--max-deliver", "1", "--ack-wait", "1s", "--max-retry-after", maxAfter, "--log-level", "info")
		if code != 0 {
			t.Fatalf("run: exit %d\n%s", code, errs)
		}
		return srv, dir, errs
	}

	t.Run("kept", func(t *testing.T) {
		srv, dir, errs := run(t, 2, "5s")
		if n := srv.calls(); n != 3 {
			t.Errorf("%d calls, want 3 (two waits kept, then the answer)", n)
		}
		if dead := jsonLines(t, mustCLI(t, "", "dlq", "list", "--data-dir", dir, "--json")); len(dead) != 0 {
			t.Fatalf("%d dead letters for a wait the provider asked for, want 0: %v\n%s", len(dead), dead, errs)
		}
		res := results(t, dir)
		if len(res) != 1 {
			t.Fatalf("%d results, want 1\n%s", len(res), errs)
		}
		if d := res[0]["deliveries"]; d != 1.0 {
			t.Errorf("answered on delivery %v, want 1: the job is held, not redelivered", d)
		}
		if a := res[0]["attempts"]; a != 1.0 {
			t.Errorf("%v attempts, want 1: a wait is no heal attempt", a)
		}
		if !strings.Contains(errs, "the provider asked to wait: pausing the model's calls") {
			t.Errorf("no log line says the model's calls pause for the provider's wait:\n%s", errs)
		}
	})
	t.Run("over max-retry-after", func(t *testing.T) {
		srv, dir, _ := run(t, 1, "1s")
		if n := srv.calls(); n != 1 {
			t.Errorf("%d calls, want 1 (a wait over --max-retry-after is not kept)", n)
		}
		dead := jsonLines(t, mustCLI(t, "", "dlq", "list", "--data-dir", dir, "--json"))
		if len(dead) != 1 || dead[0]["class"] != "transport" {
			t.Fatalf("dead letters %v, want one transport dead letter (--max-deliver 1)", dead)
		}
		reason := fmt.Sprint(dead[0]["reason"])
		for _, want := range []string{"retry after 1.5s", "longer than the 1s a wait is kept"} {
			if !strings.Contains(reason, want) {
				t.Errorf("reason %q lacks %q", reason, want)
			}
		}
	})
}

// TestRunPausesTheFleetForTheProvidersWait: two `pipeline run` processes
// share one model and key; when the provider answers one call with a 429
// asking for a 3 s wait, neither process sends a call until the wait is
// over (the first moments aside: calls already on their way), and every
// job is answered, none dead-lettered.
func TestRunPausesTheFleetForTheProvidersWait(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-test-fleet-wait")
	const jobs, wait, inFlight = 30, 3 * time.Second, 500 * time.Millisecond
	srv := newWaitServer(t, 1, wait, 50*time.Millisecond)
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	args := []string{"pipeline", "run", "--data-dir", dir, "--model", "openai:m", "--llm-url", srv.URL + "/v1",
		"--concurrency", "2", "--log-level", "info"}
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
	poll.Until(t, 30*time.Second, "the second run to count two members", func() bool { return strings.Contains(stderr[1].String(), "members=2") })

	ticketJobs(t, dir, "fw", jobs)
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
	srv.mu.Lock()
	asked, arrivals := srv.asked, append([]time.Time(nil), srv.arrivals...)
	srv.mu.Unlock()
	if len(asked) != 1 {
		t.Fatalf("%d 429s answered, want 1", len(asked))
	}
	from, until := asked[0].Add(inFlight), asked[0].Add(wait)
	var during []string
	for _, a := range arrivals {
		if a.After(from) && a.Before(until) {
			during = append(during, a.Sub(asked[0]).Round(time.Millisecond).String())
		}
	}
	t.Logf("%d calls, %d of them between %s and %s after the 429: %v", len(arrivals), len(during), inFlight, wait, during)
	if len(during) != 0 {
		t.Errorf("%d calls sent during the wait the provider asked for, want 0: %v", len(during), during)
	}
	if len(arrivals) != jobs+1 {
		t.Errorf("%d calls, want %d (one per job, and the one answered 429)", len(arrivals), jobs+1)
	}
	if dead := jsonLines(t, mustCLI(t, "", "dlq", "list", "--data-dir", dir, "--json")); len(dead) != 0 {
		t.Errorf("%d dead letters, want 0", len(dead))
	}
	paused := strings.Contains(stderr[0].String(), "pausing the model's calls") || strings.Contains(stderr[1].String(), "pausing the model's calls")
	if !paused {
		t.Error("neither run logged the pause")
	}
}
