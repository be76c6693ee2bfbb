package ratelimit

import (
	"net/http"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/heal"
)

// A 429 that asks for a wait (retry-after-ms) pauses every call of the
// limiter until the wait is over: none reaches the provider before it,
// the one that got the 429 included (its client keeps the wait). A wait
// over MaxPause pauses nothing.
func TestRetryAfterPausesEveryCall(t *testing.T) {
	t.Parallel()
	const wait = 600 * time.Millisecond
	for _, tc := range []struct {
		name     string
		maxPause time.Duration
		paused   bool
	}{
		{"within MaxPause", time.Minute, true},
		{"over MaxPause", 100 * time.Millisecond, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := newProvider(t, false)
			p.status = func(n int) int {
				if n == 1 {
					return http.StatusTooManyRequests
				}
				return http.StatusOK
			}
			p.headers = func(n int, _ time.Time, h http.Header) {
				if n == 1 {
					h.Set("retry-after-ms", "600")
				}
			}
			_, m := limited(t, p, Config{MaxPause: tc.maxPause})
			call(t, m, 6, 3, func(i int) model.Request { return request(i, 40, 10) })
			_, _, sent := p.record()
			if len(sent) != 7 {
				t.Fatalf("%d requests, want 7 (six, one of them again after its 429)", len(sent))
			}
			early := 0
			for _, a := range sent[1:] {
				if a.Before(sent[0].Add(wait)) {
					early++
				}
			}
			t.Logf("%s: %d of 6 requests sent within the %s wait", tc.name, early, wait)
			if tc.paused && early > 0 {
				t.Errorf("%d requests reached the provider during the wait it asked for, want 0", early)
			}
			if !tc.paused && early == 0 {
				t.Error("no request went out during a wait over MaxPause: it paused the calls")
			}
		})
	}
}
