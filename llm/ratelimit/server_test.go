package ratelimit

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sort"
	"sync"
	"testing"
	"time"
)

// provider is an httptest server speaking the OpenAI chat-completions or
// the Anthropic Messages wire format. It records when each request
// arrived and the usage it reported, and lets a test set the headers of
// each answer.
type provider struct {
	*httptest.Server
	anthropic bool
	// headers, when set, adds headers to the n-th answer (from 1); it
	// runs under mu, just before the answer is written.
	headers func(n int, now time.Time, h http.Header)
	// status, when set, is the n-th answer's HTTP status (from 1); an
	// answer other than 200 is a 429 rate_limit_exceeded error body.
	status func(n int) int

	mu       sync.Mutex
	arrivals []time.Time
	tokens   []int // prompt + completion tokens reported, per arrival
	sentAt   []time.Time
}

const completionTokens = 20

func newProvider(t *testing.T, anthropic bool) *provider {
	t.Helper()
	p := &provider{anthropic: anthropic}
	p.Server = httptest.NewServer(http.HandlerFunc(p.handle))
	t.Cleanup(p.Close)
	return p
}

func (p *provider) handle(w http.ResponseWriter, r *http.Request) {
	arrived := time.Now()
	body, _ := io.ReadAll(r.Body)
	var req struct {
		Messages []struct {
			Role    string `json:"role"`
			Content string `json:"content"`
		} `json:"messages"`
		System string `json:"system"`
	}
	_ = json.Unmarshal(body, &req)
	prompt := len(req.System)
	for _, m := range req.Messages {
		prompt += len(m.Content) + len(m.Role)
	}
	prompt /= 4
	p.mu.Lock()
	p.arrivals = append(p.arrivals, arrived)
	p.tokens = append(p.tokens, prompt+completionTokens)
	n := len(p.arrivals)
	if p.headers != nil {
		p.headers(n, time.Now(), w.Header())
	}
	p.sentAt = append(p.sentAt, time.Now())
	status := http.StatusOK
	if p.status != nil {
		status = p.status(n)
	}
	p.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if status != http.StatusOK {
		w.WriteHeader(status)
		_, _ = io.WriteString(w, `{"error":{"message":"Rate limit reached for gpt-test on requests per min (RPM): Limit 3, Used 3, Requested 1.","type":"requests","param":null,"code":"rate_limit_exceeded"}}`)
		return
	}
	if p.anthropic {
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-test",
			"content":     []map[string]any{{"type": "text", "text": `{"ok":true}`}},
			"stop_reason": "end_turn",
			"usage":       map[string]any{"input_tokens": prompt, "output_tokens": completionTokens},
		})
		return
	}
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-test",
		"choices": []map[string]any{{"index": 0, "message": map[string]any{"role": "assistant", "content": `{"ok":true}`}, "finish_reason": "stop"}},
		"usage":   map[string]any{"prompt_tokens": prompt, "completion_tokens": completionTokens, "total_tokens": prompt + completionTokens},
	})
}

func (p *provider) record() (arrivals []time.Time, tokens []int, sentAt []time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]time.Time(nil), p.arrivals...), append([]int(nil), p.tokens...), append([]time.Time(nil), p.sentAt...)
}

// maxInWindow is the most of weights (one per arrival, in arrival order)
// that any half-open window (t-w, t] holds: the sliding-window count a
// provider enforces.
func maxInWindow(arrivals []time.Time, weights []int, w time.Duration) (most int, at time.Time) {
	idx := make([]int, len(arrivals))
	for i := range idx {
		idx[i] = i
	}
	sort.SliceStable(idx, func(a, b int) bool { return arrivals[idx[a]].Before(arrivals[idx[b]]) })
	arr, wt := make([]time.Time, len(idx)), make([]int, len(idx))
	for i, j := range idx {
		arr[i], wt[i] = arrivals[j], weights[j]
	}
	arrivals, weights = arr, wt
	sum, lo := 0, 0
	for i, t := range arrivals {
		sum += weights[i]
		for !arrivals[lo].After(t.Add(-w)) {
			sum -= weights[lo]
			lo++
		}
		if sum > most {
			most, at = sum, t
		}
	}
	return most, at
}

func ones(n int) []int {
	w := make([]int, n)
	for i := range w {
		w[i] = 1
	}
	return w
}
