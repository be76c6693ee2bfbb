package ratelimit

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/heal"
	"github.com/llmpipeline/pipeline/llm"
)

// limited builds the provider's client with the limiter reading its
// headers, wrapped by the limiter.
func limited(t *testing.T, p *provider, cfg Config) (*Limiter, model.Model) {
	t.Helper()
	l, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	lc := llm.Config{BaseURL: p.URL + "/v1", APIKey: "sk-test", Model: "gpt-test", OnResponse: l.Observe, TransportRetries: -1}
	var m model.Model
	if p.anthropic {
		lc.BaseURL = p.URL
		m, err = llm.NewAnthropic(lc)
	} else {
		m, err = llm.NewOpenAI(lc)
	}
	if err != nil {
		t.Fatal(err)
	}
	return l, l.Wrap(m)
}

func request(i, promptBytes, maxTokens int) model.Request {
	return model.Request{
		Messages:  []model.Message{{Role: "user", Content: strings.Repeat("x", promptBytes)}},
		MaxTokens: maxTokens,
		JobID:     fmt.Sprintf("job-%d", i),
		Attempt:   1,
	}
}

// call runs n calls from k goroutines and fails the test on any error.
func call(t *testing.T, m model.Model, n, k int, req func(i int) model.Request) {
	t.Helper()
	var wg sync.WaitGroup
	next := make(chan int)
	errs := make(chan error, n)
	for range k {
		wg.Go(func() {
			for i := range next {
				if _, err := m.Complete(t.Context(), req(i)); err != nil {
					errs <- err
				}
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatalf("Complete: %v", err)
	}
}

// With --rpm and --tpm, no window of the limiter's length ever holds more
// requests, or more tokens as the provider counts them, than the limit,
// though 16 callers ask at once; a test-scale window of one second stands
// for the minute.
func TestCeilingHoldsEverySlidingWindow(t *testing.T) {
	t.Parallel()
	const win = time.Second
	cases := []struct {
		name        string
		cfg         Config
		promptBytes int
		maxTokens   int
		calls       int
	}{
		{"requests", Config{RPM: 20, Window: win}, 40, 10, 50},
		{"requests burst 1", Config{RPM: 12, Window: win, Burst: 1}, 40, 10, 30},
		{"tokens", Config{TPM: 2400, Window: win}, 400, 100, 50},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := newProvider(t, false)
			_, m := limited(t, p, tc.cfg)
			call(t, m, tc.calls, 16, func(i int) model.Request { return request(i, tc.promptBytes, tc.maxTokens) })
			arrivals, tokens, _ := p.record()
			if len(arrivals) != tc.calls {
				t.Fatalf("%d requests arrived, want %d", len(arrivals), tc.calls)
			}
			if tc.cfg.RPM > 0 {
				if most, at := maxInWindow(arrivals, ones(len(arrivals)), win); most > tc.cfg.RPM {
					t.Errorf("%d requests in the window ending %s, limit %d", most, at.Format(time.StampMicro), tc.cfg.RPM)
				}
			}
			if tc.cfg.TPM > 0 {
				if most, at := maxInWindow(arrivals, tokens, win); most > tc.cfg.TPM {
					t.Errorf("%d tokens in the window ending %s, limit %d", most, at.Format(time.StampMicro), tc.cfg.TPM)
				}
			}
		})
	}
}

// Without flags the headers drive the limiter: an answer saying nothing
// remains holds every call until the reset (OpenAI: a duration; Anthropic:
// an RFC 3339 time), and none reaches the provider before it.
func TestHeadersHoldUntilReset(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		anthropic bool
		// zero sets the headers of an answer saying nothing remains and
		// returns when the provider's window resets.
		zero func(now time.Time, h http.Header) time.Time
	}{
		{"openai requests", false, func(now time.Time, h http.Header) time.Time {
			h.Set("x-ratelimit-limit-requests", "60")
			h.Set("x-ratelimit-remaining-requests", "0")
			h.Set("x-ratelimit-reset-requests", "500ms")
			h.Set("x-ratelimit-limit-tokens", "100000")
			h.Set("x-ratelimit-remaining-tokens", "99000")
			h.Set("x-ratelimit-reset-tokens", "6m0s")
			return now.Add(500 * time.Millisecond)
		}},
		{"openai tokens", false, func(now time.Time, h http.Header) time.Time {
			h.Set("x-ratelimit-remaining-requests", "59")
			h.Set("x-ratelimit-reset-requests", "1s")
			h.Set("x-ratelimit-remaining-tokens", "0")
			h.Set("x-ratelimit-reset-tokens", "700ms")
			return now.Add(700 * time.Millisecond)
		}},
		{"anthropic output tokens", true, func(now time.Time, h http.Header) time.Time {
			reset := now.Truncate(time.Second).Add(time.Second)
			h.Set("anthropic-ratelimit-requests-limit", "50")
			h.Set("anthropic-ratelimit-requests-remaining", "49")
			h.Set("anthropic-ratelimit-requests-reset", now.Add(time.Second).UTC().Format(time.RFC3339))
			h.Set("anthropic-ratelimit-output-tokens-limit", "16000")
			h.Set("anthropic-ratelimit-output-tokens-remaining", "0")
			h.Set("anthropic-ratelimit-output-tokens-reset", reset.UTC().Format(time.RFC3339))
			return reset
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			p := newProvider(t, tc.anthropic)
			var reset time.Time
			p.headers = func(n int, now time.Time, h http.Header) {
				if n == 1 {
					reset = tc.zero(now, h)
				}
			}
			_, m := limited(t, p, Config{})
			call(t, m, 1, 1, func(i int) model.Request { return request(i, 40, 10) })
			call(t, m, 6, 6, func(i int) model.Request { return request(i, 40, 10) })
			arrivals, _, _ := p.record()
			if len(arrivals) != 7 {
				t.Fatalf("%d requests arrived, want 7", len(arrivals))
			}
			for i, a := range arrivals[1:] {
				if a.Before(reset) {
					t.Errorf("request %d arrived %s before the reset", i+2, reset.Sub(a))
				}
			}
		})
	}
}

// The pace the headers allow is remaining over reset, shared by the
// fleet; flags are a ceiling that headers can only lower.
func TestRatesFromHeadersAndCeiling(t *testing.T) {
	t.Parallel()
	paced := func(remaining, reset string) http.Header {
		return hdr("x-ratelimit-remaining-requests", remaining, "x-ratelimit-reset-requests", reset,
			"x-ratelimit-remaining-tokens", "60000", "x-ratelimit-reset-tokens", "2s")
	}
	ceiling := (600.0 - 3) / (time.Minute + windowMargin).Seconds() // burst 4 at 10 a second
	cases := []struct {
		name         string
		cfg          Config
		members      int
		h            http.Header
		wantReq      float64
		wantTok      float64
		wantReqBurst int
	}{
		{"no flags no headers", Config{}, 1, nil, math.Inf(1), math.Inf(1), 1},
		{"headers alone", Config{}, 1, paced("30", "1s"), 30, 30000, 4},
		{"headers shared by three", Config{}, 3, paced("30", "1s"), 10, 10000, 4},
		{"ceiling alone", Config{RPM: 600}, 1, nil, ceiling, math.Inf(1), 4},
		{"headers above the ceiling", Config{RPM: 600}, 1, paced("300", "1s"), ceiling, 30000, 4},
		{"headers below the ceiling", Config{RPM: 600}, 1, paced("5", "1s"), 5, 30000, 4},
		{"full window: no pace", Config{}, 1, paced("30", "0s"), math.Inf(1), 30000, 1},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			l, err := New(tc.cfg)
			if err != nil {
				t.Fatal(err)
			}
			l.ShareWith(fixedFleet(tc.members))
			if tc.h != nil {
				l.Observe(http.StatusOK, tc.h)
			}
			req, tok := l.Rates()
			if !near(req, tc.wantReq) || !near(tok, tc.wantTok) {
				t.Errorf("rates %g requests/s, %g tokens/s; want %g, %g", req, tok, tc.wantReq, tc.wantTok)
			}
			if b := l.req.Burst(); b != tc.wantReqBurst {
				t.Errorf("request burst %d, want %d", b, tc.wantReqBurst)
			}
		})
	}
}

type fixedFleet int

func (f fixedFleet) Size() int { return int(f) }

func near(a, b float64) bool {
	if math.IsInf(a, 1) || math.IsInf(b, 1) {
		return a == b
	}
	return math.Abs(a-b) <= 1e-9*math.Max(1, math.Abs(b))
}

// Answers that use fewer tokens than reserved give the rest back; more
// put the bucket into debt.
func TestSettleCorrectsTheTokenBucket(t *testing.T) {
	t.Parallel()
	l, err := New(Config{TPM: 6000, Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	est := l.estimate(request(0, 396, 100)) // (396 + "user") / 4 prompt + 100 max tokens
	if est != 200 {
		t.Fatalf("estimate %d, want 200", est)
	}
	if _, err := l.Wait(t.Context(), est); err != nil {
		t.Fatal(err)
	}
	l.Settle(est, 120)
	if l.credit != 80 {
		t.Fatalf("credit after a smaller answer: %d, want 80", l.credit)
	}
	before := l.tok.Tokens()
	l.Settle(est, 350)
	if got := l.tok.Tokens(); got > before-150+1 {
		t.Errorf("tokens after a larger answer: %.1f, want about %.1f", got, before-150)
	}
}

// A call waiting its turn ends with ctx's error when ctx is cancelled;
// a wait that would outlast ctx's deadline is a transport failure at once.
func TestWaitRespectsContext(t *testing.T) {
	t.Parallel()
	p := newProvider(t, false)
	_, m := limited(t, p, Config{RPM: 1, Window: time.Hour})
	call(t, m, 1, 1, func(i int) model.Request { return request(i, 40, 10) })

	dctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	_, err := m.Complete(dctx, request(1, 40, 10))
	if model.KindOf(err) != model.KindTransport {
		t.Errorf("wait past the deadline: %v, want a transport error", err)
	}

	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := m.Complete(ctx, request(2, 40, 10))
		done <- err
	}()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled wait: %v, want context.Canceled", err)
	}
	if arrivals, _, _ := p.record(); len(arrivals) != 1 {
		t.Errorf("%d requests arrived, want 1", len(arrivals))
	}
}

func TestKeyHidesTheAPIKey(t *testing.T) {
	t.Parallel()
	k := Key("openai", "https://api.openai.com/v1", "gpt-4o-mini", "sk-secret")
	if strings.Contains(k, "secret") || len(k) != 32 {
		t.Errorf("Key = %q", k)
	}
	if k == Key("openai", "https://api.openai.com/v1", "gpt-4o-mini", "sk-other") {
		t.Error("two API keys share one limit key")
	}
	if k != Key("openai", "https://api.openai.com/v1", "gpt-4o-mini", "sk-secret") {
		t.Error("Key is not deterministic")
	}
}
