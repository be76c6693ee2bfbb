package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
)

// toolServer answers chat completions with whole scripted bodies in the
// OpenAI wire format (the last one repeats) and records the requests.
type toolServer struct {
	*httptest.Server
	mu       sync.Mutex
	bodies   []string
	requests []map[string]any
}

func newToolServer(t *testing.T, bodies ...string) *toolServer {
	t.Helper()
	s := &toolServer{bodies: bodies}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var req map[string]any
		_ = json.Unmarshal(raw, &req)
		s.mu.Lock()
		s.requests = append(s.requests, req)
		body := s.bodies[min(len(s.requests), len(s.bodies))-1]
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("x-request-id", "req_tool_test")
		if r.URL.Path != "/v1/chat/completions" {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		_, _ = io.WriteString(w, body)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *toolServer) recorded() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]map[string]any(nil), s.requests...)
}

// toolCallBody is a forced function call answering with arguments.
func toolCallBody(id, arguments string) string {
	b, _ := json.Marshal(map[string]any{
		"id": "chatcmpl-" + id, "object": "chat.completion", "model": "x",
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": nil, "refusal": nil,
				"tool_calls": []any{map[string]any{"id": id, "type": "function",
					"function": map[string]any{"name": "ticket", "arguments": arguments}}}}}},
		"usage": map[string]any{"prompt_tokens": 300, "completion_tokens": 40, "total_tokens": 340,
			"prompt_tokens_details": map[string]any{"cached_tokens": 256}},
	})
	return string(b)
}

// TestRunResponseFormatTool runs one job through `pipeline run --model
// openai:x --response-format tool`: the first tool call misses a required
// field, the heal turn goes back as the call and a tool message with the
// diagnostics, the second call is right.
func TestRunResponseFormatTool(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-test-tool")
	first := `{"subject":"Cannot log in","priority":"high","category":"account"}`
	second := `{"subject":"Cannot log in","priority":"high","category":"account","customer":{"name":"Ana Lima","email":"ana@example.com"}}`
	srv := newToolServer(t, toolCallBody("call_1", first), toolCallBody("call_2", second))
	dir := t.TempDir()
	mustCLI(t, `{"id":"t-1","schema":"ticket","input":"From: Ana Lima <ana@example.com>\nI cannot log in."}`+"\n", "submit", "--data-dir", dir, "-")
	_, errs, code := runCLI(t, "", "run", "--data-dir", dir, "--until-idle", "--model", "openai:x",
		"--llm-url", srv.URL+"/v1", "--response-format", "tool")
	if code != 0 {
		t.Fatalf("run: exit %d\n%s", code, errs)
	}
	reqs := srv.recorded()
	if len(reqs) != 2 {
		t.Fatalf("%d model calls, want 2", len(reqs))
	}
	tools, _ := reqs[0]["tools"].([]any)
	if len(tools) != 1 {
		t.Fatalf("tools %v, want one", reqs[0]["tools"])
	}
	fn := tools[0].(map[string]any)["function"].(map[string]any)
	params, _ := fn["parameters"].(map[string]any)
	if fn["name"] != "ticket" || params["properties"] == nil {
		t.Errorf("function %v, want ticket with the schema as parameters", fn)
	}
	if choice, _ := json.Marshal(reqs[0]["tool_choice"]); string(choice) != `{"function":{"name":"ticket"},"type":"function"}` {
		t.Errorf("tool_choice %s", choice)
	}
	if _, ok := reqs[0]["response_format"]; ok {
		t.Error("response_format sent in tool mode")
	}
	msgs := reqs[1]["messages"].([]any)
	var roles []string
	for _, m := range msgs {
		roles = append(roles, m.(map[string]any)["role"].(string))
	}
	if got := strings.Join(roles, ","); got != "system,user,assistant,tool" {
		t.Fatalf("heal request roles %s, want system,user,assistant,tool", got)
	}
	if tm := msgs[3].(map[string]any); tm["tool_call_id"] != "call_1" || !strings.Contains(tm["content"].(string), "/customer") {
		t.Errorf("tool message %v, want the diagnostics for call_1", tm)
	}

	results := jsonLines(t, mustCLI(t, "", "results", "--data-dir", dir))
	if len(results) != 1 || results[0]["attempts"].(float64) != 2 {
		t.Fatalf("results %v: want one result after 2 attempts", results)
	}
	if data, _ := json.Marshal(results[0]["data"]); !strings.Contains(string(data), `"email":"ana@example.com"`) {
		t.Errorf("result data %s, want the second call's arguments", data)
	}
	var o struct {
		Status string `json:"status"`
		Trace  []struct {
			Class        string `json:"class"`
			Raw          string `json:"raw"`
			CachedTokens int    `json:"cached_tokens"`
		} `json:"trace"`
	}
	if err := json.Unmarshal([]byte(mustCLI(t, "", "dlq", "show", "--data-dir", dir, "--json", "t-1")), &o); err != nil {
		t.Fatal(err)
	}
	if o.Status != "succeeded" || len(o.Trace) != 2 {
		t.Fatalf("outcome %+v, want success after 2 attempts", o)
	}
	if o.Trace[0].Class != "schema" || o.Trace[0].Raw != first || o.Trace[1].CachedTokens != 256 {
		t.Errorf("trace %+v", o.Trace)
	}
}

// TestRunRefusalIsDeadLettered: a refusal ends the job after one call as
// class refused, the refusal in the reason.
func TestRunRefusalIsDeadLettered(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-test-tool")
	refusal, _ := json.Marshal(map[string]any{
		"id": "chatcmpl-r", "object": "chat.completion", "model": "x",
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
			"message": map[string]any{"role": "assistant", "content": nil, "refusal": "I'm sorry, I can't help with that."}}},
		"usage": map[string]any{"prompt_tokens": 300, "completion_tokens": 9, "total_tokens": 309},
	})
	srv := newToolServer(t, string(refusal), toolCallBody("call_1", `{}`))
	dir := t.TempDir()
	mustCLI(t, `{"id":"t-1","schema":"ticket","input":"text"}`+"\n", "submit", "--data-dir", dir, "-")
	mustCLI(t, "", "run", "--data-dir", dir, "--until-idle", "--model", "openai:x", "--llm-url", srv.URL+"/v1",
		"--response-format", "json_schema", "--max-attempts", "3")
	if n := len(srv.recorded()); n != 1 {
		t.Errorf("%d model calls, want 1 (a refusal is not retried)", n)
	}
	dead := jsonLines(t, mustCLI(t, "", "dlq", "list", "--data-dir", dir, "--json", "--class", "refused"))
	if len(dead) != 1 || !strings.Contains(dead[0]["reason"].(string), "I can't help with that") {
		t.Fatalf("dead letters %v, want one refused with the refusal as reason", dead)
	}
}

// TestRunAnthropicToolRecordsCacheTokens runs `--model anthropic:x
// --response-format tool` against a Messages API server: the tool_use
// input is the result, and the trace keeps the cache write and read counts.
func TestRunAnthropicToolRecordsCacheTokens(t *testing.T) {
	t.Parallel()
	wantTestKeys(t)
	var mu sync.Mutex
	var reqs []map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var req map[string]any
		_ = json.Unmarshal(raw, &req)
		mu.Lock()
		reqs = append(reqs, req)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("request-id", "req_011CTest")
		if r.URL.Path != "/v1/messages" || r.Header.Get("x-api-key") != "sk-ant-test" {
			w.WriteHeader(http.StatusNotFound)
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": "msg_01", "type": "message", "role": "assistant", "model": "x",
			"content": []any{map[string]any{"type": "tool_use", "id": "toolu_01", "name": "ticket",
				"input": map[string]any{"subject": "Cannot log in", "priority": "high", "category": "account",
					"customer": map[string]any{"name": "Ana Lima", "email": "ana@example.com"}}}},
			"stop_reason": "tool_use", "stop_sequence": nil,
			"usage": map[string]any{"input_tokens": 50, "output_tokens": 60, "cache_creation_input_tokens": 1200, "cache_read_input_tokens": 0},
		})
	}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	mustCLI(t, `{"id":"t-1","schema":"ticket","input":"From: Ana Lima <ana@example.com>\nI cannot log in."}`+"\n", "submit", "--data-dir", dir, "-")
	mustCLI(t, "", "run", "--data-dir", dir, "--until-idle", "--model", "anthropic:x", "--llm-url", srv.URL, "--response-format", "tool")
	mu.Lock()
	n := len(reqs)
	mu.Unlock()
	if n != 1 {
		t.Fatalf("%d model calls, want 1", n)
	}
	if choice, _ := json.Marshal(reqs[0]["tool_choice"]); string(choice) != `{"name":"ticket","type":"tool"}` {
		t.Errorf("tool_choice %s", choice)
	}
	var o struct {
		Status string `json:"status"`
		Trace  []struct {
			PromptTokens     int `json:"prompt_tokens"`
			CacheWriteTokens int `json:"cache_write_tokens"`
		} `json:"trace"`
	}
	if err := json.Unmarshal([]byte(mustCLI(t, "", "dlq", "show", "--data-dir", dir, "--json", "t-1")), &o); err != nil {
		t.Fatal(err)
	}
	if o.Status != "succeeded" || len(o.Trace) != 1 || o.Trace[0].CacheWriteTokens != 1200 || o.Trace[0].PromptTokens != 1250 {
		t.Fatalf("outcome %+v, want success with 1200 cache-write tokens of 1250 prompt tokens", o)
	}
}
