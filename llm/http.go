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
	"unicode/utf8"

	"github.com/llmpipeline/pipeline/internal/ctxwait"
	"github.com/llmpipeline/pipeline/model"
)

// How much of a provider's answer is read. A 2xx body may hold at most
// bodyLimit(max_tokens) bytes: bodyBytesPerToken for every completion token
// the request allows (a long token, written with JSON escapes, \uXXXX for
// each character at worst) plus bodyHeadroom for the envelope (ids, usage,
// the finish reason), never more than maxBody. A body over the bound is not
// read further; the answer is truncated (FinishLength) with the bound in
// RawFinishReason. Error bodies (non-2xx) are read up to maxErrorBody.
const (
	bodyBytesPerToken = 32
	bodyHeadroom      = 64 << 10
	// bodyTokensUnset is the completion limit assumed when the request
	// sends none (OpenAI without --max-tokens): the output ceiling of
	// the common chat models.
	bodyTokensUnset = 16384
	maxBody         = 8 << 20
	maxErrorBody    = 64 << 10
)

// bodyLimit is the most bytes a 2xx answer to a request allowing maxTokens
// completion tokens (0: none sent) may take.
func bodyLimit(maxTokens int) int64 {
	t := int64(maxTokens)
	if t <= 0 {
		t = bodyTokensUnset
	}
	if t > (maxBody-bodyHeadroom)/bodyBytesPerToken {
		return maxBody
	}
	return t*bodyBytesPerToken + bodyHeadroom
}

// caller sends one JSON request with the transport retry policy shared by
// the HTTP providers.
type caller struct {
	provider string
	cfg      Config
	// header sets the provider's headers (auth, version) on a request.
	header func(h http.Header)
	// errMessage extracts the provider's message from an error body.
	errMessage func(body []byte) string
	// errParam, when set, names the request parameter an error body says
	// the model does not take ("" for none).
	errParam func(body []byte) string
}

// failure is one failed HTTP exchange, classified.
type failure struct {
	kind       model.ErrorKind
	status     int
	message    string
	param      string // a parameter the model does not take (model.Error.Param)
	retryAfter time.Duration
	hasAfter   bool
}

// post sends body to url, retrying transport failures on the budget, and
// returns the answer parse read from the 2xx body, with its latency and the
// transport retries spent. maxTokens is the completion limit the request
// sent (0: none), which bounds the body read (bodyLimit). Failures it could
// not get past are *model.Error; a cancelled or expired ctx returns ctx's
// error, wrapped.
//
// When parse reports a failure of kind transport (a garbled body from a
// proxy, say) that is retried too.
func (c *caller) post(ctx context.Context, url string, body wire, maxTokens int, parse func([]byte) (model.Response, *failure)) (model.Response, error) {
	r := retrier{c: c, doing: "calling the model"}
	for n := 0; ; n++ {
		start := time.Now()
		out, f := c.once(ctx, url, body, maxTokens, parse)
		if f == nil {
			out.Latency = time.Since(start)
			out.TransportRetries = n
			return out, nil
		}
		if err := r.next(ctx, f); err != nil {
			return model.Response{}, err
		}
	}
}

// retrier is the transport retry policy of one request, shared by the
// model calls and the batch endpoints: transport failures are retried on
// the budget with backoff; a wait the provider asked for (Retry-After) is
// kept, up to the max retry after, and spends none of the budget.
type retrier struct {
	c     *caller
	doing string // what the request was for, in the error of a cancelled ctx
	n     int    // failures so far
	spent int    // retries on the budget
	held  time.Duration
}

// next takes the request's failure f: it returns nil after waiting when
// the request is to be sent again, or the error to return (a
// *model.Error, or ctx's error wrapped).
func (r *retrier) next(ctx context.Context, f *failure) error {
	c := r.c
	n := r.n
	r.n++
	f.message = c.redact(f.message) // before it reaches a log line or an error
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("%s: %s: %w", c.provider, r.doing, err)
	}
	if f.kind != model.KindTransport {
		return c.fail(f, n)
	}
	if f.hasAfter && f.retryAfter > 0 {
		// The provider said when to come back: the request is held that
		// long (its job with it), whatever the backoff cap.
		if !c.waitKept(f, r.held) {
			return c.fail(f, n)
		}
		r.held += f.retryAfter
		c.cfg.Logger.Debug("provider asked to wait: holding the request",
			slog.String("provider", c.provider), slog.Int("status", f.status),
			slog.Duration("wait", f.retryAfter), slog.String("error", f.message))
		if err := ctxwait.Sleep(ctx, f.retryAfter); err != nil {
			return fmt.Errorf("%s: waiting %s as the provider asked: %w", c.provider, f.retryAfter, err)
		}
		return nil
	}
	if r.spent >= c.cfg.TransportRetries {
		c.cfg.Logger.Warn("llm transport retries exhausted",
			slog.String("provider", c.provider), slog.Int("status", f.status),
			slog.Int("retries", n), slog.String("error", f.message))
		return c.fail(f, n)
	}
	delay := backoff(c.cfg.BackoffBase, c.cfg.BackoffMax, r.spent)
	r.spent++
	if f.hasAfter {
		delay = 0 // Retry-After: 0
	}
	c.cfg.Logger.Debug("llm transport retry",
		slog.String("provider", c.provider), slog.Int("status", f.status),
		slog.Int("retry", n+1), slog.Duration("delay", delay), slog.String("error", f.message))
	if err := ctxwait.Sleep(ctx, delay); err != nil {
		return fmt.Errorf("%s: waiting to retry: %w", c.provider, err)
	}
	return nil
}

// waitKept reports whether the wait f asks for is kept, held being what
// this call waited so far; when it is not, f's message names the wait and
// the limit.
func (c *caller) waitKept(f *failure, held time.Duration) bool {
	max := c.cfg.MaxRetryAfter
	switch {
	case f.retryAfter > max:
		f.message += fmt.Sprintf(" (the provider asked to retry after %s, longer than the %s a wait is kept: max retry after)", f.retryAfter, max)
	case held+f.retryAfter > max:
		f.message += fmt.Sprintf(" (the provider asked to retry after %s, after %s of waits it asked for in this call; together longer than the %s a wait is kept: max retry after)", f.retryAfter, held, max)
	default:
		return true
	}
	c.cfg.Logger.Warn("provider asked for a wait longer than is kept; the call fails",
		slog.String("provider", c.provider), slog.Int("status", f.status),
		slog.Duration("wait", f.retryAfter), slog.Duration("max_retry_after", max))
	return false
}

// RetryAfter reads the wait a provider asks for from h: retry-after-ms
// (milliseconds, OpenAI's) or Retry-After (seconds or an HTTP date); ok is
// false when h asks for none. A rate limiter reads it to pause the calls
// that share a limit (llm/ratelimit).
func RetryAfter(h http.Header, now time.Time) (d time.Duration, ok bool) {
	return retryAfter(h, now)
}

func (c *caller) fail(f *failure, retries int) *model.Error {
	e := &model.Error{
		Kind:       f.kind,
		Provider:   c.provider,
		StatusCode: f.status,
		Message:    c.redact(f.message),
		Retries:    retries,
		Param:      f.param,
	}
	if f.kind == model.KindAuth || f.kind == model.KindNoCredit {
		e.KeyEnv = c.cfg.KeyEnv
	}
	return e
}

// setHeaders sets the provider's headers on a request, then
// Config.Headers.
func (c *caller) setHeaders(h http.Header) {
	c.header(h)
	for name, values := range c.cfg.Headers {
		h.Del(name)
		for _, v := range values {
			h.Add(name, v)
		}
	}
}

// minSecretHeader is the length from which a Config.Headers value is
// taken for a secret (shorter ones, "1" or "v2", would blank out words).
const minSecretHeader = 6

// redact removes the API key and the secret header values from s, should
// a provider or a transport error echo them.
func (c *caller) redact(s string) string {
	if k := c.cfg.APIKey; k != "" && strings.Contains(s, k) {
		s = strings.ReplaceAll(s, k, "[REDACTED]")
	}
	for _, values := range c.cfg.Headers {
		for _, v := range values {
			if len(v) >= minSecretHeader && strings.Contains(s, v) {
				s = strings.ReplaceAll(s, v, "[REDACTED]")
			}
		}
	}
	return s
}

// once is one HTTP exchange under the per-request timeout.
func (c *caller) once(ctx context.Context, url string, body wire, maxTokens int, parse func([]byte) (model.Response, *failure)) (model.Response, *failure) {
	rctx, cancel := context.WithTimeout(ctx, c.cfg.Timeout)
	defer cancel()
	if call, _ := ctx.Value(mirrorKey{}).(*mirrorCall); call != nil && call.measure {
		// A batch line measured (mirror.measure): the files are left out.
		call.fileBytes = body.size() - int64(len(body.data))
		body = bytesWire(body.data)
	}
	var rd io.Reader = bytes.NewReader(body.data)
	if len(body.splices) > 0 {
		rd = body.reader(rctx)
	}
	req, err := http.NewRequestWithContext(rctx, http.MethodPost, url, rd)
	if err != nil {
		return model.Response{}, &failure{kind: model.KindRequest, message: "building the request: " + err.Error()}
	}
	if len(body.splices) > 0 {
		// The files are read as the body is written (see wire).
		req.ContentLength = body.size()
		req.GetBody = func() (io.ReadCloser, error) { return body.reader(rctx), nil }
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	c.setHeaders(req.Header)
	resp, err := c.cfg.HTTPClient.Do(req)
	if err != nil {
		return model.Response{}, c.transportFailure(rctx, err)
	}
	// Closing a body that was not read to the end drops the connection
	// rather than draining it: the rest of an oversized answer is never
	// read.
	defer resp.Body.Close()
	if c.cfg.OnResponse != nil {
		c.cfg.OnResponse(resp.StatusCode, resp.Header)
	}
	ok := resp.StatusCode >= 200 && resp.StatusCode < 300
	limit := int64(maxErrorBody)
	if ok {
		limit = bodyLimit(maxTokens)
	}
	data, over, err := readBounded(resp, limit)
	if err != nil {
		return model.Response{}, c.transportFailure(rctx, fmt.Errorf("reading the response: %w", err))
	}
	if ok {
		if over {
			return c.cut(limit, maxTokens), nil
		}
		return parse(data)
	}
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		return model.Response{}, redirectFailure(resp)
	}
	f := &failure{kind: kindOf(resp.StatusCode, data), status: resp.StatusCode, message: c.errMessage(data)}
	if f.message == "" {
		f.message = http.StatusText(resp.StatusCode)
	}
	switch resp.StatusCode {
	case http.StatusNotFound, http.StatusMethodNotAllowed, http.StatusNotImplemented:
		// No such route or model (a server that does not take POST there
		// answers 405 or 501): every job would get the same answer.
		f.kind = model.KindNotFound
		f.message += " (POST " + redactURL(url) + ")"
	default:
		if f.kind == model.KindTransport {
			f.retryAfter, f.hasAfter = retryAfter(resp.Header, time.Now())
		}
		if f.kind == model.KindRequest && c.errParam != nil {
			f.param = c.errParam(data)
		}
	}
	return model.Response{}, f
}

// readBounded reads resp's body up to limit bytes. over reports a body
// longer than that: declared so by Content-Length (then nothing is read)
// or found so by reading one byte past the limit.
func readBounded(resp *http.Response, limit int64) (data []byte, over bool, err error) {
	if resp.ContentLength > limit {
		return nil, true, nil
	}
	var buf bytes.Buffer
	if n := resp.ContentLength; n > 0 {
		buf.Grow(int(n) + bytes.MinRead) // room to see the end without growing
	}
	if _, err := buf.ReadFrom(io.LimitReader(resp.Body, limit+1)); err != nil {
		return nil, false, err
	}
	if int64(buf.Len()) > limit {
		return nil, true, nil
	}
	return buf.Bytes(), false, nil
}

// cut is the answer to a 2xx body over its bound: truncated, like an
// answer stopped at max tokens, with the bound in the finish reason so the
// heal loop's "output truncated" says why.
func (c *caller) cut(limit int64, maxTokens int) model.Response {
	why := fmt.Sprintf("response body over %d bytes, the bound for max_tokens %d", limit, maxTokens)
	if maxTokens <= 0 {
		why = fmt.Sprintf("response body over %d bytes, the bound when no max_tokens is sent", limit)
	}
	c.cfg.Logger.Warn("llm answer over the body bound, not read further",
		slog.String("provider", c.provider), slog.Int64("limit", limit), slog.Int("max_tokens", maxTokens))
	return model.Response{FinishReason: model.FinishLength, RawFinishReason: why}
}

// redirectFailure is a 3xx answer: model calls follow no redirect (the
// provider's client is built with CheckRedirect = noRedirect), so the key is
// never sent to the other host and another host's answer is never taken
// for the model's. The Location, resolved against the request URL, is
// named without its user info, query and fragment (where credentials
// travel).
func redirectFailure(resp *http.Response) *failure {
	where := "no Location"
	if resp.Header.Get("Location") != "" {
		where = "an unreadable Location"
		if u, err := resp.Location(); err == nil {
			u.User, u.RawQuery, u.ForceQuery, u.Fragment, u.RawFragment = nil, "", false, "", ""
			where = "Location " + u.String()
		}
	}
	return &failure{kind: model.KindRequest, status: resp.StatusCode,
		message: fmt.Sprintf("the provider redirected the call (%s); model calls follow no redirect: point the base URL at the final address", where)}
}

// noRedirect is the CheckRedirect of every provider client: the 3xx
// response itself is returned.
func noRedirect(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }

func (c *caller) transportFailure(rctx context.Context, err error) *failure {
	msg := err.Error()
	if fe := (*fileError)(nil); errors.As(err, &fe) {
		return &failure{kind: model.KindRequest, message: fe.Error()}
	}
	if errors.Is(rctx.Err(), context.DeadlineExceeded) {
		msg = fmt.Sprintf("request timed out after %s", c.cfg.Timeout)
	}
	return &failure{kind: model.KindTransport, message: msg}
}

// classify maps a non-2xx HTTP status to a failure kind.
func classify(status int) model.ErrorKind {
	switch {
	case status == http.StatusUnauthorized, status == http.StatusForbidden:
		return model.KindAuth
	case status == http.StatusRequestTimeout, status == http.StatusConflict,
		status == http.StatusTooManyRequests, status >= 500:
		return model.KindTransport
	default:
		return model.KindRequest
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

// normaliseFinish maps a provider's finish or stop reason to the words of
// package model (FinishStop, FinishLength, FinishOther).
func normaliseFinish(raw string) string {
	switch strings.ToLower(raw) {
	case "stop", "end_turn", "stop_sequence", "eos", "eos_token", "finish":
		return model.FinishStop
	case "length", "max_tokens", "max_output_tokens", "model_length", "model_context_window_exceeded":
		return model.FinishLength
	default:
		return model.FinishOther
	}
}

// truncate makes s a message of one line: its runs of white space (an
// HTML error page's line breaks and indentation) become one space, and it
// is cut to at most n bytes, at a character's start.
func truncate(s string, n int) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

// ctxError reports whether err is a context cancellation or deadline.
func ctxError(err error) bool {
	return errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded)
}
