package worker

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"
)

func TestRateLimitMetrics(t *testing.T) {
	t.Parallel()
	m := NewMetrics(prometheus.NewRegistry())
	m.SetRateLimitMembers("openai", 3)
	if got := testutil.ToFloat64(m.RateLimitWait.WithLabelValues("openai")); got != 0 {
		t.Errorf("wait before any: %g", got)
	}
	m.RateLimitWaited("openai", 1500*time.Millisecond)
	m.RateLimitWaited("openai", 500*time.Millisecond)
	if got := testutil.ToFloat64(m.RateLimitWait.WithLabelValues("openai")); got != 2 {
		t.Errorf("pipeline_ratelimit_wait_seconds_total = %g, want 2", got)
	}
	if got := testutil.ToFloat64(m.RateLimitMembers.WithLabelValues("openai")); got != 3 {
		t.Errorf("pipeline_ratelimit_members = %g, want 3", got)
	}
	var nilMetrics *Metrics
	nilMetrics.RateLimitWaited("openai", time.Second) // safe on nil
	nilMetrics.SetRateLimitMembers("openai", 1)
}
