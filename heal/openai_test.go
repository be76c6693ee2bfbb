package heal_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/heal"
	"github.com/llmpipeline/pipeline/job"
	"github.com/llmpipeline/pipeline/llm"
	"github.com/llmpipeline/pipeline/model"
	"github.com/llmpipeline/pipeline/schemas"
)

// chatBody is the part of an OpenAI chat-completions request the test reads.
type chatBody struct {
	Model       string          `json:"model"`
	Messages    []model.Message `json:"messages"`
	Temperature float64         `json:"temperature"`
	MaxTokens   int             `json:"max_tokens"`
}

// answer is one scripted HTTP reply: a status, headers and, for 200, the
// assistant content and finish reason in the real wire format.
type answer struct {
	status  int
	header  map[string]string
	content string
	finish  string
}

// openAIServer answers /v1/chat/completions from a script and records every
// request body and Authorization header.
type openAIServer struct {
	mu      sync.Mutex
	script  []answer
	bodies  []chatBody
	authHdr []string
}

func (s *openAIServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/chat/completions" {
		http.Error(w, "not found", http.StatusNotFound)
		return
	}
	raw, _ := io.ReadAll(r.Body)
	var b chatBody
	if err := json.Unmarshal(raw, &b); err != nil {
		http.Error(w, `{"error":{"message":"bad json"}}`, http.StatusBadRequest)
		return
	}
	s.mu.Lock()
	s.bodies = append(s.bodies, b)
	s.authHdr = append(s.authHdr, r.Header.Get("Authorization"))
	var a answer
	if len(s.script) > 0 {
		a, s.script = s.script[0], s.script[1:]
	} else {
		a = answer{status: http.StatusInternalServerError}
	}
	n := len(s.bodies)
	s.mu.Unlock()

	w.Header().Set("Content-Type", "application/json")
	for k, v := range a.header {
		w.Header().Set(k, v)
	}
	if a.status != http.StatusOK {
		w.WriteHeader(a.status)
		fmt.Fprintf(w, `{"error":{"message":"scripted %d","type":"test"}}`, a.status)
		return
	}
	resp := map[string]any{
		"id": fmt.Sprintf("chatcmpl-%d", n), "object": "chat.completion", "created": 1700000000, "model": b.Model,
		"choices": []any{map[string]any{
			"index": 0, "message": map[string]any{"role": "assistant", "content": a.content}, "finish_reason": a.finish,
		}},
		"usage": map[string]any{"prompt_tokens": 100 * n, "completion_tokens": 20, "total_tokens": 100*n + 20},
	}
	_ = json.NewEncoder(w).Encode(resp)
}

func (s *openAIServer) requests() ([]chatBody, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.bodies), slices.Clone(s.authHdr)
}

// TestLoopThroughOpenAI drives the loop through the real OpenAI client
// against an httptest server speaking the chat-completions wire format.
func TestLoopThroughOpenAI(t *testing.T) {
	t.Parallel()
	reg, err := schemas.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	ticket, _ := reg.Get("ticket")
	const (
		bad  = "```json\n{\"subject\":\"Login broken\",\"priority\":\"hi\",\"category\":\"account\",\"customer\":{\"name\":\"Ada\",\"email\":\"ada@example.com\"}}\n```"
		good = `{"subject":"Login broken","priority":"high","category":"account","customer":{"name":"Ada","email":"ada@example.com"}}`
	)
	ok := func(content string) answer { return answer{status: 200, content: content, finish: "stop"} }
	tests := []struct {
		name      string
		script    []answer
		class     job.Class
		httpCalls int
		attempts  int
		retries   []int // transport retries per attempt
	}{
		{name: "healed at the second call", script: []answer{ok(bad), ok(good)},
			class: job.ClassNone, httpCalls: 2, attempts: 2, retries: []int{0, 0}},
		{name: "a 429 is a transport retry, not an attempt",
			script: []answer{{status: 429, header: map[string]string{"Retry-After": "0"}}, ok(bad), ok(good)},
			class:  job.ClassNone, httpCalls: 3, attempts: 2, retries: []int{1, 0}},
		{name: "finish_reason length is never retried",
			script: []answer{{status: 200, content: `{"subject":"Login`, finish: "length"}, ok(good)},
			class:  job.ClassTruncated, httpCalls: 1, attempts: 1, retries: []int{0}},
		{name: "401 is auth", script: []answer{{status: 401}, ok(good)},
			class: job.ClassAuth, httpCalls: 1, attempts: 0},
		{name: "400 is a request error", script: []answer{ok(bad), {status: 400}},
			class: job.ClassRequest, httpCalls: 2, attempts: 1, retries: []int{0}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := &openAIServer{script: slices.Clone(tt.script)}
			ts := httptest.NewServer(srv)
			t.Cleanup(ts.Close)
			model, err := llm.NewOpenAI(llm.Config{
				BaseURL: ts.URL + "/v1", APIKey: "sk-test-key", Model: "gpt-test",
				BackoffBase: time.Millisecond, BackoffMax: 50 * time.Millisecond, Timeout: 10 * time.Second,
			})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = model.Close() })
			loop, err := heal.New(model, heal.Config{MaxAttempts: 2, Temperature: 0.7, TemperatureStep: 0.2, TemperatureFloor: 0.1, MaxTokens: 800})
			if err != nil {
				t.Fatal(err)
			}
			task := heal.Task{JobID: "t-1", Schema: ticket, Input: "Ada cannot log in since this morning. ada@example.com"}
			res := loop.Run(t.Context(), task)

			bodies, auth := srv.requests()
			if res.Class != tt.class {
				t.Errorf("class = %q, want %q (%s; %v)", res.Class, tt.class, res.Reason, res.Err)
			}
			if len(bodies) != tt.httpCalls || len(res.Attempts) != tt.attempts {
				t.Fatalf("%d HTTP calls and %d attempts, want %d and %d", len(bodies), len(res.Attempts), tt.httpCalls, tt.attempts)
			}
			for i, a := range res.Attempts {
				if a.TransportRetries != tt.retries[i] {
					t.Errorf("attempt %d: %d transport retries, want %d", a.N, a.TransportRetries, tt.retries[i])
				}
				if a.Usage.PromptTokens == 0 || a.Usage.CompletionTokens != 20 {
					t.Errorf("attempt %d usage not recorded: %+v", a.N, a.Usage)
				}
			}
			for i, h := range auth {
				if h != "Bearer sk-test-key" {
					t.Errorf("request %d Authorization = %q", i, h)
				}
			}
			task0 := heal.Messages(task)
			first := bodies[0]
			if first.Model != "gpt-test" || first.Temperature != 0.7 || first.MaxTokens != 800 || !reflect.DeepEqual(first.Messages, task0) {
				t.Errorf("first request: model %q temperature %v max_tokens %d, %d messages", first.Model, first.Temperature, first.MaxTokens, len(first.Messages))
			}
			if tt.class == job.ClassAuth {
				if !strings.Contains(res.Hint, "OPENAI_API_KEY") || strings.Contains(res.Err.Error(), "sk-test-key") {
					t.Errorf("auth: hint %q, err %v", res.Hint, res.Err)
				}
			}
			if tt.attempts < 2 {
				return
			}
			// The second attempt's HTTP body: the task, the previous output,
			// the failing path, at the next temperature.
			second := bodies[len(bodies)-1]
			if second.Temperature != 0.5 {
				t.Errorf("second attempt temperature = %v, want 0.5", second.Temperature)
			}
			var roles []string
			for _, m := range second.Messages {
				roles = append(roles, m.Role)
			}
			if want := []string{"system", "user", "assistant", "user"}; !slices.Equal(roles, want) {
				t.Fatalf("second attempt roles = %v, want %v", roles, want)
			}
			if !reflect.DeepEqual(second.Messages[:2], task0) {
				t.Error("second attempt does not start with the original task")
			}
			if second.Messages[2].Content != bad {
				t.Errorf("assistant turn = %q, want the previous raw output", second.Messages[2].Content)
			}
			fix := second.Messages[3].Content
			for _, s := range []string{`- /priority: expected one of "low", "normal", "high", "urgent", got "hi"`, "Fix only these fields"} {
				if !strings.Contains(fix, s) {
					t.Errorf("feedback turn lacks %q:\n%s", s, fix)
				}
			}
			if tt.class == job.ClassNone && string(res.Data) != good {
				t.Errorf("data = %s", res.Data)
			}
		})
	}
}
