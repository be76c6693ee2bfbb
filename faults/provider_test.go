package faults

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testKey is the API key the provider scenarios pass in OPENAI_API_KEY; it
// must never appear in the pipeline's output.
const testKey = "sk-faults-SECRET-0123456789"

// provider is an httptest server speaking the OpenAI chat-completions wire
// format: it answers each job with a valid instance of its schema (read
// from testdata), or with 429 or 401 while told to.
type provider struct {
	srv      *httptest.Server
	fixtures map[string]string

	unauthorized atomic.Bool // answer 401
	// changeMind: only the first call for a text gets a valid answer; a
	// later call for the same text (a redelivery) gets one that fails the
	// schema, like a real model at temperature > 0.
	changeMind   atomic.Bool
	rateLimitFor time.Duration // answer 429 for this long after the first request (set before serving)

	mu       sync.Mutex
	perText  map[string]int // calls per user text
	first    time.Time
	requests int // every request
	ok       int // answered 200
	limited  int // answered 429
	denied   int // answered 401
	bodies   []string
}

var schemaInPrompt = regexp.MustCompile(`Schema "([A-Za-z0-9_\-]+)"`)

func newProvider(t *testing.T, rateLimitFor time.Duration) *provider {
	t.Helper()
	p := &provider{fixtures: map[string]string{}, rateLimitFor: rateLimitFor, perText: map[string]int{}}
	for _, s := range []string{"invoice", "ticket"} {
		b, err := os.ReadFile(filepath.Join("testdata", s+".json"))
		if err != nil {
			t.Fatal(err)
		}
		p.fixtures[s] = string(b)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/chat/completions", p.complete)
	p.srv = httptest.NewServer(mux)
	t.Cleanup(p.srv.Close)
	return p
}

func (p *provider) url() string { return p.srv.URL + "/v1" }

type chatRequest struct {
	Model    string `json:"model"`
	Messages []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
}

func openAIError(w http.ResponseWriter, status int, typ, msg string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": typ, "code": nil}})
}

func (p *provider) complete(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "unreadable body")
		return
	}
	p.mu.Lock()
	p.requests++
	p.bodies = append(p.bodies, string(body))
	if p.first.IsZero() {
		p.first = time.Now()
	}
	limited := time.Since(p.first) < p.rateLimitFor
	p.mu.Unlock()

	if p.unauthorized.Load() || r.Header.Get("Authorization") != "Bearer "+testKey {
		p.count(&p.denied)
		openAIError(w, http.StatusUnauthorized, "invalid_request_error", "Incorrect API key provided. You can find your API key at https://platform.openai.com/account/api-keys.")
		return
	}
	if limited {
		p.count(&p.limited)
		w.Header().Set("Retry-After", "1")
		openAIError(w, http.StatusTooManyRequests, "rate_limit_exceeded", "Rate limit reached for requests per min. Please try again in 1s.")
		return
	}
	var req chatRequest
	if err := json.Unmarshal(body, &req); err != nil || len(req.Messages) == 0 {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "could not parse the request body")
		return
	}
	m := schemaInPrompt.FindStringSubmatch(req.Messages[0].Content)
	if m == nil || p.fixtures[m[1]] == "" {
		openAIError(w, http.StatusBadRequest, "invalid_request_error", "the fake model knows no schema in this prompt")
		return
	}
	content := p.fixtures[m[1]]
	if len(req.Messages) > 1 {
		p.mu.Lock()
		p.perText[req.Messages[1].Content]++
		again := p.perText[req.Messages[1].Content] > 1
		p.mu.Unlock()
		if again && p.changeMind.Load() {
			content = `{"changed_my_mind": true}`
		}
	}
	p.count(&p.ok)
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id":      fmt.Sprintf("chatcmpl-%d", time.Now().UnixNano()),
		"object":  "chat.completion",
		"created": time.Now().Unix(),
		"model":   req.Model,
		"choices": []map[string]any{{
			"index":         0,
			"message":       map[string]any{"role": "assistant", "content": content},
			"finish_reason": "stop",
		}},
		"usage": map[string]any{"prompt_tokens": len(body) / 4, "completion_tokens": len(content) / 4, "total_tokens": (len(body) + len(content)) / 4},
	})
}

func (p *provider) count(n *int) {
	p.mu.Lock()
	*n++
	p.mu.Unlock()
}

// stats returns the request counters.
func (p *provider) stats() (requests, ok, limited, denied int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.requests, p.ok, p.limited, p.denied
}

// requestBodies returns a copy of every request body received.
func (p *provider) requestBodies() []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]string(nil), p.bodies...)
}

// providerRunArgs are `pipeline run` flags against the fake provider.
func providerRunArgs(p *provider, extra ...string) []string {
	return append([]string{"run", "--model", "openai:fault-model", "--llm-url", p.url(), "--ack-wait", ackWait,
		"--concurrency", "16", "--log-level", logLevel()}, extra...)
}

// callsFor returns how many calls mentioned text in their user turn.
func (p *provider) callsFor(text string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := 0
	for k, v := range p.perText {
		if strings.Contains(k, text) {
			n += v
		}
	}
	return n
}
