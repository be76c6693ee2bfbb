package faults

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
)

// hugeAnswerBytes is what the provider below would send for every call.
const hugeAnswerBytes = 200 << 20

// hugeProvider speaks the OpenAI chat-completions wire format and answers
// every call with a 200 MB body: one answer whose content is a JSON string
// that never ends soon, streamed without a Content-Length, so the client
// cannot tell its size before reading. It counts the bytes it managed to
// write before the client hung up.
type hugeProvider struct {
	srv     *httptest.Server
	calls   atomic.Int64
	written atomic.Int64
}

func newHugeProvider(t *testing.T) *hugeProvider {
	t.Helper()
	p := &hugeProvider{}
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.calls.Add(1)
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("x-request-id", fmt.Sprintf("req_%d", p.calls.Load()))
		head := `{"id":"chatcmpl-huge","object":"chat.completion","model":"m","choices":[{"index":0,"finish_reason":"stop","message":{"role":"assistant","content":"{\"subject\": \"`
		n, err := w.Write([]byte(head))
		p.written.Add(int64(n))
		chunk := []byte(strings.Repeat("x", 64<<10))
		for sent := 0; err == nil && sent < hugeAnswerBytes; sent += len(chunk) {
			n, err = w.Write(chunk)
			p.written.Add(int64(n))
		}
		if err == nil {
			_, _ = w.Write([]byte(`\"}"}}],"usage":{"prompt_tokens":10,"completion_tokens":50000000,"total_tokens":50000010}}`))
		}
	}))
	t.Cleanup(p.srv.Close)
	return p
}

// 64 jobs at -c 64 against a provider whose every answer is 200 MB: each
// call reads no more than the request allows (--max-tokens), every job ends
// once as a truncated dead letter, and the process stays inside its memory
// bound instead of holding 64 answers of 200 MB.
func scenarioHugeAnswers(t *testing.T) row {
	const rssLimitMB = 256
	dir := t.TempDir()
	prov := newHugeProvider(t)
	jobs := exampleJobs(t, 64, "ticket")
	env := childEnv("OPENAI_API_KEY=" + testKey)
	submitFile(t, env, writeJobs(t, dir, jobs), "--data-dir", dir)
	run, peakRSS := pipelineMeasured(t, "run", env, "run", "--model", "openai:fault-model", "--llm-url", prov.srv.URL+"/v1",
		"--ack-wait", ackWait, "--concurrency", "64", "--max-tokens", "4096", "--log-level", logLevel(),
		"--data-dir", dir, "--until-idle")
	run.mustSucceed(t)

	peakMB := peakRSS()
	if peakMB >= rssLimitMB {
		t.Errorf("peak RSS %d MB at -c 64 with 200 MB answers, want < %d MB", peakMB, rssLimitMB)
	}
	a := auditEmbedded(t, dir)
	r := a.check(t, "", ids(jobs))
	for id, class := range a.classes {
		if class != "truncated" {
			t.Errorf("job %s dead-lettered as %q, want truncated", id, class)
		}
	}
	if len(a.results) != 0 {
		t.Errorf("%d results from answers cut at the bound, want 0", len(a.results))
	}
	calls := prov.calls.Load()
	if calls != int64(len(jobs)) {
		t.Errorf("%d model calls, want %d (a truncated answer is never asked again)", calls, len(jobs))
	}
	perCall := float64(prov.written.Load()) / float64(max(calls, 1)) / (1 << 20)
	r.Note = fmt.Sprintf("-c 64, --max-tokens 4096: %d calls, each truncated; the server wrote %.1f MiB per call of its 200 MiB; peak RSS %d MB (limit %d)",
		calls, perCall, peakMB, rssLimitMB)
	return r
}
