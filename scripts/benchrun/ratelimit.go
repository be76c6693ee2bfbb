package main

// The ratelimit section: `pipeline run` processes (the real binary, built
// here) against a local OpenAI-compatible server that enforces a request
// and a token limit the way providers do (continuously refilling buckets,
// 429s, x-ratelimit-* headers), with 1 and 3 processes sharing the limit,
// in three modes: reactive (no headers, no flags: today's 429-and-retry),
// headers (the limiter learns from the headers) and flags (--rpm/--tpm,
// headers too).

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Limits of the ratelimit section's server: RPM requests and TPM tokens a
// minute, each a bucket holding limitBurst of the minute's quota.
const (
	limitRPM       = 600
	limitTPM       = 1_200_000
	limitBurst     = time.Second * 10 // bucket capacity: ten seconds' worth
	limitMaxTokens = 512
	limitLatency   = 200 * time.Millisecond
)

// limitCase is one measured case of the section.
type limitCase struct {
	Name     string  `json:"name"`
	Mode     string  `json:"mode"`
	Procs    int     `json:"procs"`
	Allowed  float64 `json:"allowed_per_sec"`
	Achieved float64 `json:"achieved_per_sec"`
	// Raw is the accepted requests per second of the span, the stored
	// quota spent in it included.
	Raw      float64 `json:"raw_per_sec"`
	Ratio    float64 `json:"ratio"`
	Calls    int     `json:"calls"`
	Limited  int     `json:"calls_429"`
	Share429 float64 `json:"share_429"`
	Seconds  float64 `json:"seconds"`
	Err      string  `json:"error,omitempty"`
	Accepted int     `json:"accepted_in_span"`
	// Drained is how much the server's request bucket fell over the span:
	// requests the stored quota paid for, not the refill, left out of
	// Achieved so that a run spending its reserve does not count above the
	// sustainable rate.
	Drained   float64 `json:"drained_in_span"`
	SpanStart float64 `json:"span_start_s"`
}

// limitServer answers chat completions (the bench's valid invoices) after
// limitLatency, charging each request one request and its prompt (bytes
// over four) plus max_tokens, refunding unused tokens when it answers.
type limitServer struct {
	chat    *chatServer
	headers bool

	mu       sync.Mutex
	req, tok bucket
	start    time.Time
	accepted []time.Time
	limited  int
}

// bucket refills at rate per second up to capacity.
type bucket struct {
	level, capacity, rate float64
	last                  time.Time
}

func (b *bucket) at(now time.Time) float64 {
	b.level = math.Min(b.capacity, b.level+now.Sub(b.last).Seconds()*b.rate)
	b.last = now
	return b.level
}

// reset is how long until the bucket is full again.
func (b *bucket) reset() time.Duration {
	return time.Duration((b.capacity - b.level) / b.rate * float64(time.Second))
}

func newLimitServer(chat *chatServer, headers bool) *limitServer {
	now := time.Now()
	perSec := func(perMin float64) bucket {
		return bucket{level: perMin / 60 * limitBurst.Seconds(), capacity: perMin / 60 * limitBurst.Seconds(), rate: perMin / 60, last: now}
	}
	return &limitServer{chat: chat, headers: headers, req: perSec(limitRPM), tok: perSec(limitTPM), start: now}
}

func (s *limitServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		http.Error(w, `{"error":{"message":"reading the request"}}`, http.StatusBadRequest)
		return
	}
	var req struct {
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
		MaxTokens int `json:"max_tokens"`
	}
	if err := json.Unmarshal(body, &req); err != nil {
		http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
		return
	}
	n := 0
	for _, m := range req.Messages {
		n += len(m.Content)
	}
	cost := float64(n/4 + req.MaxTokens)
	now := time.Now()
	s.mu.Lock()
	ok := s.req.at(now) >= 1 && s.tok.at(now) >= cost
	if ok {
		s.req.level--
		s.tok.level -= cost
		s.accepted = append(s.accepted, now)
	} else {
		s.limited++
	}
	s.setHeaders(w.Header())
	s.mu.Unlock()
	if !ok {
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, `{"error":{"message":"Rate limit reached for requests","type":"requests","code":"rate_limit_exceeded"}}`)
		return
	}
	t := time.NewTimer(limitLatency)
	select {
	case <-t.C:
	case <-r.Context().Done():
		t.Stop()
		return
	}
	s.mu.Lock()
	s.tok.at(time.Now())
	s.tok.level = math.Min(s.tok.capacity, s.tok.level+float64(req.MaxTokens-100)) // about 100 tokens written
	s.mu.Unlock()
	r.Body = io.NopCloser(bytes.NewReader(body)) // read above; the chat server reads it again
	s.chat.ServeHTTP(w, r)
}

// setHeaders writes OpenAI's six rate-limit headers; s.mu held.
func (s *limitServer) setHeaders(h http.Header) {
	if !s.headers {
		return
	}
	h.Set("x-ratelimit-limit-requests", strconv.Itoa(limitRPM))
	h.Set("x-ratelimit-remaining-requests", strconv.Itoa(int(s.req.level)))
	h.Set("x-ratelimit-reset-requests", s.req.reset().Round(time.Millisecond).String())
	h.Set("x-ratelimit-limit-tokens", strconv.Itoa(limitTPM))
	h.Set("x-ratelimit-remaining-tokens", strconv.Itoa(int(s.tok.level)))
	h.Set("x-ratelimit-reset-tokens", s.tok.reset().Round(time.Millisecond).String())
}

// runLimitSection builds the pipeline binary and runs every case.
func runLimitSection(ctx context.Context, o options, stdout, stderr io.Writer) ([]limitCase, error) {
	bin, err := os.MkdirTemp("", "pipeline-bench-limit.")
	if err != nil {
		return nil, fmt.Errorf("creating a temp dir: %w", err)
	}
	defer os.RemoveAll(bin)
	pipeline := filepath.Join(bin, "pipeline")
	build := exec.CommandContext(ctx, "go", "build", "-o", pipeline, "./cmd/pipeline")
	build.Dir, build.Stderr = o.Root, stderr
	if err := build.Run(); err != nil {
		return nil, fmt.Errorf("building cmd/pipeline: %w", err)
	}
	chat, err := newChatServer(ctx, 0, 16)
	if err != nil {
		return nil, err
	}
	d := o.LimitDuration
	var out []limitCase
	for _, mode := range []string{"reactive", "headers", "flags"} {
		for _, procs := range []int{1, 3} {
			c := runLimitCase(ctx, pipeline, chat, mode, procs, d, stderr)
			fmt.Fprintf(stdout, "%-22s achieved %.2f/s of %.2f/s allowed (%.3f; raw %.2f/s, bucket fell %.1f), %d calls, %d answered 429 (%.2f%%)%s\n",
				c.Name, c.Achieved, c.Allowed, c.Ratio, c.Raw, c.Drained, c.Calls, c.Limited, 100*c.Share429, errSuffix(c.Err))
			out = append(out, c)
		}
	}
	return out, nil
}

func errSuffix(e string) string {
	if e == "" {
		return ""
	}
	return " FAILED: " + e
}

// runLimitCase runs procs `pipeline run` processes for d against a fresh
// limited server and data dir, then stops them (SIGTERM). The achieved
// rate is the accepted requests per second after the first 40% of d (the
// server's full buckets drained, every process counted by the others) up
// to the stop.
func runLimitCase(ctx context.Context, pipeline string, chat *chatServer, mode string, procs int, d time.Duration, stderr io.Writer) limitCase {
	c := limitCase{Name: fmt.Sprintf("%s, %d process", mode, procs), Mode: mode, Procs: procs, Allowed: limitRPM / 60.0}
	if procs > 1 {
		c.Name += "es"
	}
	fail := func(err error) limitCase { c.Err = err.Error(); return c }
	srv := newLimitServer(chat, mode != "reactive")
	refused0 := chat.refused.Load()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = hs.Serve(ln) }()
	defer hs.Close()
	dir, err := os.MkdirTemp("", "pipeline-bench-limit-case.")
	if err != nil {
		return fail(err)
	}
	defer os.RemoveAll(dir)

	jobs := int(c.Allowed*d.Seconds()*1.5) + 100
	items, _, err := benchJobs("bench", jobs)
	if err != nil {
		return fail(err)
	}
	var sb strings.Builder
	for _, it := range items {
		sb.Write(it.Data)
		sb.WriteByte('\n')
	}
	sub := exec.CommandContext(ctx, pipeline, "submit", "--data-dir", dir, "-")
	sub.Stdin, sub.Stderr = strings.NewReader(sb.String()), stderr
	if err := sub.Run(); err != nil {
		return fail(fmt.Errorf("submit: %w", err))
	}
	args := []string{"run", "--data-dir", dir, "--model", "openai:bench", "--llm-url", "http://" + ln.Addr().String() + "/v1",
		"--concurrency", "16", "--max-tokens", strconv.Itoa(limitMaxTokens), "--log-level", "error", "--shutdown-grace", "2s"}
	if mode == "flags" {
		args = append(args, "--rpm", strconv.Itoa(limitRPM), "--tpm", strconv.Itoa(limitTPM))
	}
	env := append(os.Environ(), "OPENAI_API_KEY=sk-bench")
	var cmds []*exec.Cmd
	for i := range procs {
		a := args
		if i > 0 {
			a = append(append([]string(nil), args...), "--sink=false")
		}
		cmd := exec.CommandContext(ctx, pipeline, a...)
		cmd.Env, cmd.Stderr = env, stderr
		if err := cmd.Start(); err != nil {
			return fail(fmt.Errorf("starting run %d: %w", i, err))
		}
		cmds = append(cmds, cmd)
	}
	began := time.Now()
	from := began.Add(d * 4 / 10)
	var levelFrom float64
	sample := time.AfterFunc(time.Until(from), func() {
		srv.mu.Lock()
		levelFrom = srv.req.at(time.Now())
		srv.mu.Unlock()
	})
	defer sample.Stop()
	t := time.NewTimer(d)
	select {
	case <-ctx.Done():
	case <-t.C:
	}
	stopped := time.Now()
	srv.mu.Lock()
	levelStop := srv.req.at(stopped)
	srv.mu.Unlock()
	for _, cmd := range cmds {
		_ = cmd.Process.Signal(syscall.SIGTERM) // a process already gone has nothing to stop
	}
	for i, cmd := range cmds {
		if err := cmd.Wait(); err != nil && c.Err == "" {
			c.Err = fmt.Sprintf("run %d: %v", i, err)
		}
	}
	if n := chat.refused.Load() - refused0; n > 0 && c.Err == "" {
		c.Err = fmt.Sprintf("the chat server refused %d calls (400 or 404): the case measured nothing", n)
	}
	srv.mu.Lock()
	defer srv.mu.Unlock()
	for _, at := range srv.accepted {
		if !at.Before(from) && !at.After(stopped) {
			c.Accepted++
		}
	}
	c.SpanStart = from.Sub(began).Seconds()
	c.Seconds = stopped.Sub(from).Seconds()
	c.Drained = levelFrom - levelStop
	c.Raw = float64(c.Accepted) / c.Seconds
	c.Achieved = (float64(c.Accepted) - c.Drained) / c.Seconds
	c.Ratio = c.Achieved / c.Allowed
	c.Calls = len(srv.accepted) + srv.limited
	c.Limited = srv.limited
	if c.Calls > 0 {
		c.Share429 = float64(c.Limited) / float64(c.Calls)
	}
	return c
}

// renderLimits is the section's part of RESULTS.md.
func renderLimits(cs []limitCase, d time.Duration) string {
	if len(cs) == 0 {
		return ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, limitsHeading+": `pipeline run` against a local server enforcing %d RPM and %d TPM\n\n", limitRPM, limitTPM)
	fmt.Fprintf(&b, "The server refills a request and a token bucket continuously, each holding %s of the minute's quota, "+
		"charges a request its prompt (bytes/4) plus max_tokens (%d) and refunds what the answer did not use, answers 429 when a bucket is short, "+
		"and (headers, flags) sends OpenAI's x-ratelimit-* headers. Latency %s, --concurrency 16 per process, %s per case; "+
		"the achieved rate counts accepted requests from 40%% of the case to its end, less what the server's request bucket fell over that span (requests its stored quota paid for, not its refill); raw/s is the span's accepted requests per second with them. Goal: at least 0.97 of the allowed rate, at most 0.5%% of calls answered 429.\n\n",
		limitBurst, limitMaxTokens, limitLatency, d)
	b.WriteString("| mode | processes | allowed/s | achieved/s | ratio | raw/s | bucket fell | calls | 429 | 429 share | goal |\n|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, c := range cs {
		g := "met"
		switch {
		case c.Err != "":
			g = "failed: " + oneLine(c.Err)
		case c.Mode == "reactive":
			g = "(comparison)"
		case c.Ratio < 0.97 || c.Share429 > 0.005:
			g = "**missed**"
		}
		fmt.Fprintf(&b, "| %s | %d | %.2f | %.2f | %.3f | %.2f | %.1f | %d | %d | %.2f%% | %s |\n", c.Mode, c.Procs, c.Allowed, c.Achieved, c.Ratio, c.Raw, c.Drained, c.Calls, c.Limited, 100*c.Share429, g)
	}
	b.WriteString("\n")
	return b.String()
}

// limitsHeading starts the section renderLimits writes.
const limitsHeading = "## Provider rate limits"

// spliceSection returns the results file at path with its ratelimit
// section replaced by section (appended when it has none, the file alone
// when it does not exist yet).
func spliceSection(path, section string) string {
	old, err := os.ReadFile(path)
	if err != nil {
		return section
	}
	text := string(old)
	start := strings.Index(text, limitsHeading)
	if start < 0 {
		return strings.TrimRight(text, "\n") + "\n\n" + section
	}
	end := len(text)
	if i := strings.Index(text[start+len(limitsHeading):], "\n## "); i >= 0 {
		end = start + len(limitsHeading) + i + 1
	}
	return text[:start] + section + text[end:]
}
