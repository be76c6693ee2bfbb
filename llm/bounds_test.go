package llm

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"runtime/metrics"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/heal"
	"github.com/llmpipeline/pipeline/job"
	"github.com/llmpipeline/pipeline/model"
	"github.com/llmpipeline/pipeline/schemas"
)

// hugeAnswer is the size of the answers the oversized-body tests stream.
const hugeAnswer = 200 << 20

// hugeServer answers every call with a body of size bytes, written as it
// is generated (never held in memory): prefix, then 'a's, then suffix. It
// counts the calls and the body bytes it got written before the client
// went away.
type hugeServer struct {
	*httptest.Server
	calls   atomic.Int64
	written atomic.Int64
	done    chan struct{} // receives when a handler returns
}

func newHugeServer(t testing.TB, status int, prefix, suffix string, size int64, declareLength bool) *hugeServer {
	t.Helper()
	s := &hugeServer{done: make(chan struct{}, 1024)}
	chunk := bytes.Repeat([]byte("a"), 32<<10)
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() { s.done <- struct{}{} }()
		s.calls.Add(1)
		_, _ = io.Copy(io.Discard, r.Body)
		w.Header().Set("Content-Type", "application/json")
		if declareLength {
			w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
		}
		w.WriteHeader(status)
		write := func(b []byte) bool {
			n, err := w.Write(b)
			s.written.Add(int64(n))
			return err == nil
		}
		if !write([]byte(prefix)) {
			return
		}
		for left := size - int64(len(prefix)+len(suffix)); left > 0; {
			n := min(left, int64(len(chunk)))
			if !write(chunk[:n]) {
				return
			}
			left -= n
		}
		write([]byte(suffix))
	}))
	t.Cleanup(s.Close)
	return s
}

// wait blocks until n handlers have returned.
func (s *hugeServer) wait(t testing.TB, n int) {
	t.Helper()
	for range n {
		select {
		case <-s.done:
		case <-t.Context().Done():
			t.Fatal("the server's handler did not return")
		}
	}
}

// Envelopes of a 200 answer whose content is the streamed 'a's.
const (
	openAIPrefix    = `{"id":"chatcmpl-1","object":"chat.completion","choices":[{"index":0,"message":{"role":"assistant","content":"`
	openAISuffix    = `"},"finish_reason":"stop"}],"usage":{"prompt_tokens":10,"completion_tokens":10}}`
	anthropicPrefix = `{"id":"msg_1","type":"message","role":"assistant","content":[{"type":"text","text":"`
	anthropicSuffix = `"}],"stop_reason":"end_turn","usage":{"input_tokens":10,"output_tokens":10}}`
)

// providers builds each HTTP provider against a base URL.
var testProviders = []struct {
	name           string
	prefix, suffix string
	build          func(t testing.TB, url string, mod func(*Config)) model.Model
}{
	{"openai", openAIPrefix, openAISuffix, func(t testing.TB, url string, mod func(*Config)) model.Model { return newTestOpenAI(t, url, mod) }},
	{"anthropic", anthropicPrefix, anthropicSuffix, func(t testing.TB, url string, mod func(*Config)) model.Model {
		return newTestAnthropic(t, url, mod)
	}},
}

// An answer far over what max_tokens allows is not read past the bound:
// the call ends with a truncated answer that says why, the heal loop
// classes it truncated, nothing is retried, and the server gets to write
// only what the socket buffers hold beyond the bound.
func TestOversizedAnswerIsTruncated(t *testing.T) {
	t.Parallel()
	const maxTokens = 256
	limit := bodyLimit(maxTokens)
	for _, p := range testProviders {
		for _, declare := range []bool{false, true} {
			t.Run(fmt.Sprintf("%s/content-length=%v", p.name, declare), func(t *testing.T) {
				t.Parallel()
				srv := newHugeServer(t, http.StatusOK, p.prefix, p.suffix, hugeAnswer, declare)
				m := p.build(t, srv.URL, func(c *Config) { c.MaxTokens = maxTokens })
				req := testRequest()
				resp, err := m.Complete(t.Context(), req)
				if err != nil {
					t.Fatalf("Complete: %v", err)
				}
				want := fmt.Sprintf("response body over %d bytes, the bound for max_tokens %d", limit, maxTokens)
				if resp.FinishReason != model.FinishLength || resp.RawFinishReason != want || resp.Content != "" {
					t.Fatalf("response = %+v, want finish length, %q", resp, want)
				}
				srv.wait(t, 1)
				if n := srv.calls.Load(); n != 1 {
					t.Errorf("%d calls, want 1 (a cut answer is not retried)", n)
				}
				if w := srv.written.Load(); w > limit+16<<20 {
					t.Errorf("the server wrote %d bytes; the client should stop reading at %d", w, limit)
				}

				// The heal loop is the judge: truncated, with the reason.
				sc, err := schemas.Compile("total", req.Schema)
				if err != nil {
					t.Fatal(err)
				}
				loop, err := heal.New(m, heal.Config{MaxAttempts: 2, MaxTokens: maxTokens})
				if err != nil {
					t.Fatal(err)
				}
				res := loop.Run(t.Context(), heal.Task{JobID: "big-1", Schema: sc, Input: "x"})
				srv.wait(t, 1)
				if res.Class != job.ClassTruncated || !strings.Contains(res.Reason, want) || len(res.Attempts) != 1 {
					t.Fatalf("heal result class %q, reason %q, %d attempts; want truncated naming %q once", res.Class, res.Reason, len(res.Attempts), want)
				}
			})
		}
	}
}

// With no max_tokens sent (OpenAI's zero MaxTokens) the bound is the one
// for bodyTokensUnset, and the message says that none was sent.
func TestOversizedAnswerWithoutMaxTokens(t *testing.T) {
	t.Parallel()
	srv := newHugeServer(t, http.StatusOK, openAIPrefix, openAISuffix, hugeAnswer, false)
	o := newTestOpenAI(t, srv.URL, nil)
	resp, err := o.Complete(t.Context(), testRequest())
	if err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprintf("response body over %d bytes, the bound when no max_tokens is sent", bodyLimit(0))
	if resp.FinishReason != model.FinishLength || resp.RawFinishReason != want {
		t.Fatalf("response = %+v, want %q", resp, want)
	}
	srv.wait(t, 1)
}

// An answer just under the bound is read whole.
func TestAnswerUnderTheBoundIsRead(t *testing.T) {
	t.Parallel()
	const maxTokens = 16
	limit := bodyLimit(maxTokens)
	for _, p := range testProviders {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			srv := newHugeServer(t, http.StatusOK, p.prefix, p.suffix, limit, false)
			m := p.build(t, srv.URL, func(c *Config) { c.MaxTokens = maxTokens })
			resp, err := m.Complete(t.Context(), testRequest())
			if err != nil {
				t.Fatal(err)
			}
			if n := int64(len(resp.Content)); resp.FinishReason != model.FinishStop || n != limit-int64(len(p.prefix)+len(p.suffix)) {
				t.Fatalf("finish %q, %d bytes of content", resp.FinishReason, n)
			}
			srv.wait(t, 1)
		})
	}
}

// Error bodies are read up to maxErrorBody only, whatever their size.
func TestOversizedErrorBody(t *testing.T) {
	t.Parallel()
	for _, p := range testProviders {
		for _, status := range []int{http.StatusBadRequest, http.StatusInternalServerError} {
			t.Run(fmt.Sprintf("%s/%d", p.name, status), func(t *testing.T) {
				t.Parallel()
				srv := newHugeServer(t, status, `{"error":{"message":"`, `"}}`, hugeAnswer, false)
				m := p.build(t, srv.URL, func(c *Config) { c.TransportRetries = -1 })
				_, err := m.Complete(t.Context(), testRequest())
				var he *model.Error
				if !errors.As(err, &he) || he.StatusCode != status || len(he.Message) > 1000 {
					t.Fatalf("err = %.300v", err)
				}
				srv.wait(t, 1)
				if w := srv.written.Load(); w > maxErrorBody+16<<20 {
					t.Errorf("the server wrote %d bytes of an error body; the client should stop at %d", w, maxErrorBody)
				}
			})
		}
	}
}

func TestBodyLimit(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		maxTokens int
		want      int64
	}{
		{0, bodyTokensUnset*bodyBytesPerToken + bodyHeadroom},
		{-1, bodyTokensUnset*bodyBytesPerToken + bodyHeadroom},
		{1, bodyBytesPerToken + bodyHeadroom},
		{4096, 4096*32 + 64<<10},
		{1 << 20, maxBody},
		{1 << 62, maxBody},
	} {
		if got := bodyLimit(tt.maxTokens); got != tt.want {
			t.Errorf("bodyLimit(%d) = %d, want %d", tt.maxTokens, got, tt.want)
		}
	}
}

// A redirect is never followed: the call is a request error naming the
// Location (without its credentials), the other host is never called, and
// the key reaches neither it nor the error.
func TestRedirectIsNotFollowed(t *testing.T) {
	t.Parallel()
	for _, p := range testProviders {
		for _, status := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
			t.Run(fmt.Sprintf("%s/%d", p.name, status), func(t *testing.T) {
				t.Parallel()
				var other atomic.Int64
				elsewhere := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
					other.Add(1)
					w.Header().Set("Content-Type", "application/json")
					_, _ = io.WriteString(w, openAIOK("{}", "stop").body)
				}))
				t.Cleanup(elsewhere.Close)
				u, err := url.Parse(elsewhere.URL + "/v1/moved?token=" + testKey + "#frag")
				if err != nil {
					t.Fatal(err)
				}
				u.User = url.UserPassword("admin", "hunter2")
				src := newProvider(t, reply{status: status, header: map[string]string{"Location": u.String()}, body: `{"moved":true}`})
				m := p.build(t, src.URL, nil)

				_, err = m.Complete(t.Context(), testRequest())
				var he *model.Error
				if !errors.As(err, &he) || he.Kind != model.KindRequest || he.StatusCode != status {
					t.Fatalf("err = %v, want a request_error with HTTP %d", err, status)
				}
				if want := "Location " + elsewhere.URL + "/v1/moved"; !strings.Contains(he.Message, want) {
					t.Errorf("message %q does not name %q", he.Message, want)
				}
				for _, secret := range []string{testKey, "hunter2", "admin", "token"} {
					if strings.Contains(err.Error(), secret) {
						t.Errorf("error %q holds %q", err, secret)
					}
				}
				if n := other.Load(); n != 0 {
					t.Errorf("the redirect target was called %d times", n)
				}
				if n := len(src.requests()); n != 1 {
					t.Errorf("%d calls to the provider, want 1 (a redirect is not retried)", n)
				}
			})
		}
	}
}

// A client passed in Config keeps its own redirect policy: the provider
// works on a copy.
func TestGivenClientIsNotChanged(t *testing.T) {
	t.Parallel()
	hc := &http.Client{}
	o := newTestOpenAI(t, "http://127.0.0.1:1", func(c *Config) { c.HTTPClient = hc })
	if hc.CheckRedirect != nil {
		t.Fatal("the given client's CheckRedirect was set")
	}
	if o.cfg.HTTPClient == hc || o.cfg.HTTPClient.CheckRedirect == nil {
		t.Fatal("the provider does not use a copy that refuses redirects")
	}
}

// BenchmarkOversizedAnswers is 64 calls in flight, each answered with a
// 200 MB body streamed by a local server, at the default max tokens of the
// CLI (4096). It reports the heap's peak while the calls run (sampled) and
// the process's peak RSS (VmHWM, the server's side included), which must
// stay far under the 256 MB the worker is held to.
func BenchmarkOversizedAnswers(b *testing.B) {
	srv := newHugeServer(b, http.StatusOK, openAIPrefix, openAISuffix, hugeAnswer, false)
	o := newTestOpenAI(b, srv.URL, func(c *Config) { c.MaxTokens = DefaultAnthropicMaxTokens })
	req := testRequest()
	stop := make(chan struct{})
	peak := make(chan uint64)
	go samplePeakHeap(stop, peak)
	b.ReportAllocs()
	b.SetParallelism(32) // 64 in flight on 2 cores
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			resp, err := o.Complete(b.Context(), req)
			if err != nil || resp.FinishReason != model.FinishLength {
				b.Errorf("Complete = %+v, %v", resp, err)
				return
			}
		}
	})
	b.StopTimer()
	close(stop)
	b.ReportMetric(float64(<-peak)/(1<<20), "peak-heap-MiB")
	if rss, ok := peakRSS(); ok {
		b.ReportMetric(float64(rss)/(1<<20), "peak-rss-MiB")
	}
	b.ReportMetric(float64(srv.written.Load())/float64(b.N)/(1<<20), "server-MiB/op")
}

// samplePeakHeap reads the live heap every millisecond until stop closes,
// then sends the largest value seen.
func samplePeakHeap(stop <-chan struct{}, peak chan<- uint64) {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var top uint64
	t := time.NewTicker(time.Millisecond)
	defer t.Stop()
	for {
		select {
		case <-stop:
			peak <- top
			return
		case <-t.C:
			metrics.Read(s)
			top = max(top, s[0].Value.Uint64())
		}
	}
}

// peakRSS is the process's resident-set high-water mark (Linux).
func peakRSS() (uint64, bool) {
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		return 0, false
	}
	for line := range strings.Lines(string(b)) {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseUint(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb << 10, err == nil
		}
	}
	return 0, false
}
