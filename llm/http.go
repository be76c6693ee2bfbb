package llm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/llmpipeline/pipeline/heal"
)

// maxBody bounds how much of a provider response is read.
const maxBody = 32 << 20

// caller sends one JSON request with the transport retry policy shared by
// the HTTP providers.
type caller struct {
	provider string
	cfg      Config
	// header sets the provider's headers (auth, version) on a request.
	header func(h http.Header)
	// errMessage extracts the provider's message from an error body.
	errMessage func(body []byte) string
}

// failure is one failed HTTP exchange, classified.
type failure struct {
	kind       heal.ErrorKind
	status     int
	message    string
	retryAfter time.Duration
	hasAfter   bool
}

// post sends body to url, retrying transport failures on the budget. It
// returns the 2xx response body, the transport retries spent and the latency
// of the successful exchange. Failures it could not get past are *heal.Error;
// a cancelled or expired ctx returns ctx's error, wrapped.
//
// parse is called on a 2xx body; when it reports a failure of kind
// transport (a garbled body from a proxy, say) that is retried too.
func (c *caller) post(ctx context.Context, url string, body []byte, parse func([]byte) *failure) (retries int, latency time.Duration, err error) {
	budget := c.cfg.TransportRetries
	for n := 0; ; n++ {
		start := time.Now()
		f := c.once(ctx, url, body, parse)
		latency = time.Since(start)
		if f == nil {
			return n, latency, nil
		}
		f.message = c.redact(f.message) // before it reaches a log line or an error
		if err := ctx.Err(); err != nil {
			return n, latency, fmt.Errorf("%s: calling the model: %w", c.provider, err)
		}
		if f.kind != heal.KindTransport {
			return n, latency, c.fail(f, n)
		}
		if n >= budget {
			c.cfg.Logger.Warn("llm transport retries exhausted",
				slog.String("provider", c.provider), slog.Int("status", f.status),
				slog.Int("retries", n), slog.String("error", f.message))
			return n, latency, c.fail(f, n)
		}
		delay := backoff(c.cfg.BackoffBase, c.cfg.BackoffMax, n)
		if f.hasAfter {
			if f.retryAfter > c.cfg.BackoffMax {
				f.message += fmt.Sprintf(" (provider asked to retry after %s, more than the %s backoff cap)", f.retryAfter, c.cfg.BackoffMax)
				return n, latency, c.fail(f, n)
			}
			delay = f.retryAfter
		}
		c.cfg.Logger.Debug("llm transport retry",
			slog.String("provider", c.provider), slog.Int("status", f.status),
			slog.Int("retry", n+1), slog.Duration("delay", delay), slog.String("error", f.message))
		if err := sleep(ctx, delay); err != nil {
			return n, latency, fmt.Errorf("%s: waiting to retry: %w", c.provider, err)
		}
	}
}

func (c *caller) fail(f *failure, retries int) *heal.Error {
	e := &heal.Error{
		Kind:       f.kind,
		Provider:   c.provider,
		StatusCode: f.status,
		Message:    c.redact(f.message),
		Retries:    retries,
	}
	if f.kind == heal.KindAuth {
		e.KeyEnv = c.cfg.KeyEnv
	}
	return e
}

// redact removes the API key from s, should a provider or a transport error
// echo it.
func (c *caller) redact(s string) string {
	if k := c.cfg.APIKey; k != "" && strings.Contains(s, k) {
		s = strings.ReplaceAll(s, k, "[REDACTED]")
	}
	return s
}

// once is one HTTP exchange under the per-request timeout.
func (c *caller) once(ctx context.Context, url string, body []byte, parse func([]byte) *failure) *failure {
	rctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, url, bytes.NewReader(body))
	if err != nil {
		return &failure{kind: heal.KindRequest, message: "building the request: " + err.Error()}
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	c.header(req.Header)
	resp, err := c.cfg.HTTPClient.Do(req)
	if err != nil {
		return c.transportFailure(rctx, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxBody))
	if err != nil {
		return c.transportFailure(rctx, fmt.Errorf("reading the response: %w", err))
	}
	if resp.StatusCode >= 200 && resp.StatusCode < 300 {
		return parse(data)
	}
	f := &failure{kind: classify(resp.StatusCode), status: resp.StatusCode, message: c.errMessage(data)}
	if f.message == "" {
		f.message = http.StatusText(resp.StatusCode)
	}
	if f.kind == heal.KindTransport {
		f.retryAfter, f.hasAfter = retryAfter(resp.Header, time.Now())
	}
	return f
}

func (c *caller) transportFailure(rctx context.Context, err error) *failure {
	msg := err.Error()
	if errors.Is(rctx.Err(), context.DeadlineExceeded) {
		msg = fmt.Sprintf("request timed out after %s", c.cfg.Timeout)
	}
	return &failure{kind: heal.KindTransport, message: msg}
}

// classify maps a non-2xx HTTP status to a failure kind.
func classify(status int) heal.ErrorKind {
	switch {
	case status == http.StatusUnauthorized, status == http.StatusForbidden:
		return heal.KindAuth
	case status == http.StatusRequestTimeout, status == http.StatusConflict,
		status == http.StatusTooManyRequests, status >= 500:
		return heal.KindTransport
	default:
		return heal.KindRequest
	}
}

// retryAfter reads retry-after-ms (milliseconds) or Retry-After (seconds or
// an HTTP date) from h.
func retryAfter(h http.Header, now time.Time) (time.Duration, bool) {
	if v := strings.TrimSpace(h.Get("Retry-After-Ms")); v != "" {
		if ms, err := strconv.ParseFloat(v, 64); err == nil && ms >= 0 && ms < 1e12 {
			return time.Duration(ms * float64(time.Millisecond)), true
		}
	}
	v := strings.TrimSpace(h.Get("Retry-After"))
	if v == "" {
		return 0, false
	}
	if s, err := strconv.ParseFloat(v, 64); err == nil {
		if s < 0 || s > 1e9 {
			return 0, false
		}
		return time.Duration(s * float64(time.Second)), true
	}
	if t, err := http.ParseTime(v); err == nil {
		d := t.Sub(now)
		if d < 0 {
			d = 0
		}
		return d, true
	}
	return 0, false
}

// backoff is exponential with full jitter: uniform in [0, min(max, base*2^n)].
func backoff(base, max time.Duration, n int) time.Duration {
	ceil := base
	for i := 0; i < n && ceil < max; i++ {
		ceil *= 2
	}
	if ceil > max {
		ceil = max
	}
	if ceil <= 0 {
		return 0
	}
	return time.Duration(rand.Int64N(int64(ceil) + 1))
}

// sleep waits d or until ctx is done.
func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}

// normaliseFinish maps a provider's finish or stop reason to heal's words.
func normaliseFinish(raw string) string {
	switch strings.ToLower(raw) {
	case "stop", "end_turn", "stop_sequence", "eos", "eos_token", "finish":
		return heal.FinishStop
	case "length", "max_tokens", "max_output_tokens", "model_length", "model_context_window_exceeded":
		return heal.FinishLength
	default:
		return heal.FinishOther
	}
}

// truncate cuts s to n bytes for messages.
func truncate(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// ctxError reports whether err is a context cancellation or deadline.
func ctxError(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
