package llm

import (
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/heal"
)

// TestProviderWaitIsKept: a wait the provider asks for (429 with
// retry-after-ms, or a 503 with Retry-After) longer than the backoff cap
// is kept, the call held, and spends no transport retry; a wait longer
// than MaxRetryAfter, or waits together longer than it in one call, end
// the call as a transport failure naming the wait.
func TestProviderWaitIsKept(t *testing.T) {
	t.Parallel()
	ok := openAIOK(`{"total": 12.5}`, "stop")
	wait := func(status int, h map[string]string) reply {
		r := openAIError(status, "requests", "rate_limit_exceeded", "Rate limit reached for gpt-4o-mini")
		r.header = h
		return r
	}
	ms300 := wait(429, map[string]string{"retry-after-ms": "300"})
	tests := []struct {
		name     string
		script   []reply
		maxAfter time.Duration
		statusCase
	}{
		{name: "four 300ms waits over a 10ms cap and one retry", script: []reply{ms300, ms300, ms300, ms300, ok}, maxAfter: 5 * time.Second,
			statusCase: statusCase{wantCalls: 5, wantRetries: 4}},
		{name: "503 Retry-After seconds", script: []reply{wait(503, map[string]string{"Retry-After": "1"}), ok}, maxAfter: 5 * time.Second,
			statusCase: statusCase{wantCalls: 2, wantRetries: 1}},
		{name: "a wait over max retry after", script: []reply{ms300, ok}, maxAfter: 200 * time.Millisecond,
			statusCase: statusCase{wantCalls: 1, wantKind: model.KindTransport, wantStatus: 429, wantMessage: "retry after 300ms, longer than the 200ms a wait is kept"}},
		{name: "waits together over max retry after", script: []reply{ms300, ms300, ms300, ms300, ok}, maxAfter: time.Second,
			statusCase: statusCase{wantCalls: 4, wantKind: model.KindTransport, wantStatus: 429, wantRetries: 3, wantMessage: "after 900ms of waits it asked for in this call"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := newProvider(t, tt.script...)
			o := newTestOpenAI(t, p.URL, func(c *Config) {
				c.TransportRetries, c.BackoffMax, c.MaxRetryAfter = 1, 10*time.Millisecond, tt.maxAfter
			})
			start := time.Now()
			resp, err := o.Complete(t.Context(), testRequest())
			checkStatusCase(t, tt.statusCase, p, resp, err)
			t.Logf("%s: %d calls in %s", tt.name, len(p.requests()), time.Since(start).Round(time.Millisecond))
		})
	}
}
