package llm

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
)

// reply is one scripted HTTP answer of a provider.
type reply struct {
	status int
	header map[string]string
	body   string
	// hang holds the request until the client gives up on it.
	hang bool
}

// recorded is one request the fake provider received.
type recorded struct {
	path   string
	header http.Header
	body   map[string]any
	raw    []byte
}

// provider is an httptest server answering with a script, one reply per
// request (the last one repeats), recording every request.
type provider struct {
	*httptest.Server
	mu     sync.Mutex
	script []reply
	reqs   []recorded
	seen   chan struct{} // receives once per request, when buffered room allows
}

func newProvider(t testing.TB, script ...reply) *provider {
	t.Helper()
	p := &provider{script: script, seen: make(chan struct{}, 64)}
	p.Server = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.Close)
	return p
}

func (p *provider) serve(w http.ResponseWriter, r *http.Request) {
	raw, _ := io.ReadAll(r.Body)
	var body map[string]any
	_ = json.Unmarshal(raw, &body)
	p.mu.Lock()
	n := len(p.reqs)
	p.reqs = append(p.reqs, recorded{path: r.URL.Path, header: r.Header.Clone(), body: body, raw: raw})
	rep := p.script[min(n, len(p.script)-1)]
	p.mu.Unlock()
	select {
	case p.seen <- struct{}{}:
	default:
	}
	if rep.hang {
		<-r.Context().Done()
		return
	}
	for k, v := range rep.header {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(rep.status)
	_, _ = io.WriteString(w, rep.body)
}

func (p *provider) requests() []recorded {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]recorded(nil), p.reqs...)
}

// OpenAI wire format.

func openAIOK(content, finish string) reply {
	b, _ := json.Marshal(map[string]any{
		"id": "chatcmpl-abc123", "object": "chat.completion", "created": 1735689600, "model": "gpt-4o-mini-2024-07-18",
		"choices": []any{map[string]any{
			"index":         0,
			"message":       map[string]any{"role": "assistant", "content": content, "refusal": nil},
			"logprobs":      nil,
			"finish_reason": finish,
		}},
		"usage": map[string]any{
			"prompt_tokens": 120, "completion_tokens": 40, "total_tokens": 160,
			"prompt_tokens_details":     map[string]any{"cached_tokens": 64, "audio_tokens": 0},
			"completion_tokens_details": map[string]any{"reasoning_tokens": 8, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0},
		},
		"system_fingerprint": "fp_0123456789",
	})
	return reply{status: 200, body: string(b)}
}

func openAIError(status int, typ, code, message string) reply {
	b, _ := json.Marshal(map[string]any{"error": map[string]any{"message": message, "type": typ, "param": nil, "code": code}})
	return reply{status: status, body: string(b)}
}

// Anthropic wire format.

func anthropicOK(text, stop string) reply {
	b, _ := json.Marshal(map[string]any{
		"id": "msg_01XFDUDYJgAACzvnptvVoYEL", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
		"content":     []any{map[string]any{"type": "text", "text": text}},
		"stop_reason": stop, "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": 100, "output_tokens": 30, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 20},
	})
	return reply{status: 200, body: string(b)}
}

func anthropicError(status int, typ, message string) reply {
	b, _ := json.Marshal(map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": message}})
	return reply{status: status, body: string(b)}
}
