package llm_test

import (
	"net/http"
	"regexp"
	"sync"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/llm"
	"github.com/llmpipeline/pipeline/llm/batchtest"
)

// waitGate answers the first request of every endpoint 429, asking for
// wait, and refuses again any request of that endpoint sent before the
// wait is over: it counts the waits asked for and the requests that came
// early.
type waitGate struct {
	wait  time.Duration
	mu    sync.Mutex
	until map[string]time.Time
	asked int
	early int
}

// endpoint is a request's method and path with its ids blanked.
var idPart = regexp.MustCompile(`/(batch|file|msgbatch)[-_][^/]+`)

func (g *waitGate) throttle(r *http.Request) time.Duration {
	key := r.Method + " " + idPart.ReplaceAllString(r.URL.Path, "/ID")
	g.mu.Lock()
	defer g.mu.Unlock()
	until, seen := g.until[key]
	now := time.Now()
	switch {
	case !seen:
		g.until[key] = now.Add(g.wait)
		g.asked++
		return g.wait
	case now.Before(until):
		g.early++
		return until.Sub(now)
	}
	return 0
}

// TestBatchEndpointsKeepTheProvidersWait: a 429 with Retry-After from a
// batch endpoint (upload, create, poll, the results download) is waited
// out as a model call's is, spending no transport retry: with no retries
// at all (TransportRetries -1) the whole batch still goes through, every
// endpoint asked to wait once and none called again before its wait.
func TestBatchEndpointsKeepTheProvidersWait(t *testing.T) {
	t.Parallel()
	for _, provider := range []string{llm.ProviderOpenAI, llm.ProviderAnthropic} {
		t.Run(provider, func(t *testing.T) {
			t.Parallel()
			g := &waitGate{wait: 200 * time.Millisecond, until: map[string]time.Time{}}
			srv := batchtest.New(batchtest.Config{Answer: chatAnswer(), Key: batchKey, Throttle: g.throttle})
			t.Cleanup(srv.Close)
			base := srv.URL
			if provider == llm.ProviderOpenAI {
				base += "/v1"
			}
			b, err := llm.NewBatcher(provider, llm.Config{BaseURL: base, APIKey: batchKey, Model: "m", TransportRetries: -1})
			if err != nil {
				t.Fatal(err)
			}
			st, err := b.Create(t.Context(), "key0001", []llm.BatchRequest{batchReq("a-1", "ok"), batchReq("b-1", "fine")})
			if err != nil {
				t.Fatalf("create after the provider's wait: %v", err)
			}
			st = waitDone(t, b, st.ID)
			got := results(t, b, st)
			if len(got) != 2 || got["a-1"].Type != llm.ResultSucceeded || got["b-1"].Type != llm.ResultSucceeded {
				t.Errorf("results after the provider's waits: %+v, want a-1 and b-1 succeeded", got)
			}
			g.mu.Lock()
			defer g.mu.Unlock()
			// OpenAI: upload, create, poll, output file; Anthropic: create,
			// poll, results.
			want := map[string]int{llm.ProviderOpenAI: 4, llm.ProviderAnthropic: 3}[provider]
			if g.asked != want || g.early != 0 {
				t.Errorf("%d endpoints asked to wait (want %d), %d requests sent before their wait was over (want 0): %v", g.asked, want, g.early, g.until)
			}
		})
	}
}
