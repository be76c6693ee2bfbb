package ratelimit

import (
	"math"
	"net/http"
	"strconv"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/heal"
)

// refilling sets OpenAI's headers the way OpenAI's buckets behave: a
// bucket of capacity requests refilling at limit a minute, charged one
// request per arrival, its reset the time until it is full again.
type refilling struct {
	limit, capacity float64
	level           float64
	last            time.Time
}

func (b *refilling) take(now time.Time, h http.Header) {
	rate := b.limit / 60
	if !b.last.IsZero() {
		b.level = math.Min(b.capacity, b.level+now.Sub(b.last).Seconds()*rate)
	}
	b.last = now
	b.level--
	reset := time.Duration((b.capacity - b.level) / rate * float64(time.Second))
	h.Set("x-ratelimit-limit-requests", strconv.Itoa(int(b.limit)))
	h.Set("x-ratelimit-remaining-requests", strconv.Itoa(int(max(b.level, 0))))
	h.Set("x-ratelimit-reset-requests", reset.Round(time.Millisecond).String())
}

// Before the provider has answered, the limiter knows nothing of its
// bucket: 16 callers asking at once send one request, and the rest wait
// for its answer's headers.
func TestOneCallUntilTheFirstAnswer(t *testing.T) {
	t.Parallel()
	p := newProvider(t, false)
	b := &refilling{limit: 600, capacity: 100, level: 100}
	p.headers = func(n int, now time.Time, h http.Header) {
		b.take(now, h)
		if n == 1 {
			time.Sleep(200 * time.Millisecond) // the provider's latency: the others ask meanwhile
		}
	}
	_, m := limited(t, p, Config{})
	call(t, m, 16, 16, func(i int) model.Request { return request(i, 40, 10) })
	arrivals, _, sentAt := p.record()
	if len(arrivals) != 16 {
		t.Fatalf("%d requests arrived, want 16", len(arrivals))
	}
	for i, a := range arrivals[1:] {
		if a.Before(sentAt[0]) {
			t.Errorf("request %d arrived before the first answer was sent", i+2)
		}
	}
}

// A bucket that refills continuously and reports remaining 0 resets (is
// full again) only after its whole capacity refilled; the limiter holds
// until one request's worth is back for this process and then paces below
// the refill rate, instead of holding until the reset.
func TestEmptyRefillingBucketPacesInsteadOfHolding(t *testing.T) {
	t.Parallel()
	l, err := New(Config{})
	if err != nil {
		t.Fatal(err)
	}
	l.ShareWith(fixedFleet(3))
	now := time.Now()
	l.Observe(http.StatusOK, hdr("x-ratelimit-limit-requests", "600", "x-ratelimit-remaining-requests", "0", "x-ratelimit-reset-requests", "10s"))
	l.mu.Lock()
	hold := l.hold.Sub(now)
	l.mu.Unlock()
	// Three members at 10 a second: this one's next request is 300 ms away.
	if hold > time.Second {
		t.Errorf("held for %s, want the 300ms until this member's next request refilled", hold)
	}
	if req, _ := l.Rates(); math.IsInf(req, 1) || req <= 0 || req > 10.0/3 {
		t.Errorf("request rate %g/s after the hold, want a pace below the member's refill share 3.33/s", req)
	}
	// Half full (50 of 100 left, 5 s to full), the pace is the refill
	// rate: 10 a second for the fleet, a third of it here.
	l.Observe(http.StatusOK, hdr("x-ratelimit-limit-requests", "600", "x-ratelimit-remaining-requests", "50", "x-ratelimit-reset-requests", "5s"))
	if req, _ := l.Rates(); !near(req, 10.0/3) {
		t.Errorf("request rate %g/s half full, want 3.33/s", req)
	}
}
