package llm

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/llmpipeline/pipeline/heal"
	"github.com/llmpipeline/pipeline/job"
	"github.com/llmpipeline/pipeline/model"
	"github.com/llmpipeline/pipeline/schemas"
)

// The tool-mode tests run the heal loop itself against httptest servers
// speaking each provider's wire format: the requests are checked member by
// member, the answers carry the providers' headers.

const toolSchema = `{"type":"object","properties":{"total":{"type":"number"},"currency":{"type":"string"}},"required":["total","currency"],"additionalProperties":false}`

func toolLoop(t *testing.T, m model.Model) (*heal.Loop, heal.Task) {
	t.Helper()
	s, err := schemas.Compile("invoice", []byte(toolSchema))
	if err != nil {
		t.Fatal(err)
	}
	loop, err := heal.New(m, heal.Config{MaxAttempts: 3, Temperature: 0.7, TemperatureStep: 0.2, TemperatureFloor: 0.1})
	if err != nil {
		t.Fatal(err)
	}
	return loop, heal.Task{JobID: "inv-7", Schema: s, Input: "Total due: 12.50 EUR"}
}

// OpenAI wire format, tool mode.

func openAIHeaders(id string) map[string]string {
	return map[string]string{"x-request-id": id, "openai-processing-ms": "312", "openai-version": "2020-10-01"}
}

// openAIToolReply is a forced function call: content null, the arguments
// a JSON string, finish_reason "stop" (what the API sends when tool_choice
// names the function).
func openAIToolReply(callID, arguments string) reply {
	b, _ := json.Marshal(map[string]any{
		"id": "chatcmpl-tool1", "object": "chat.completion", "created": 1735689600, "model": "gpt-4o-mini-2024-07-18",
		"choices": []any{map[string]any{
			"index": 0,
			"message": map[string]any{"role": "assistant", "content": nil, "refusal": nil,
				"tool_calls": []any{map[string]any{"id": callID, "type": "function",
					"function": map[string]any{"name": "invoice", "arguments": arguments}}}},
			"logprobs": nil, "finish_reason": "stop",
		}},
		"usage": map[string]any{"prompt_tokens": 210, "completion_tokens": 18, "total_tokens": 228,
			"prompt_tokens_details": map[string]any{"cached_tokens": 128}},
	})
	return reply{status: 200, header: openAIHeaders("req_" + callID), body: string(b)}
}

// openAIRefusalReply is a structured-outputs refusal: content null, the
// refusal a string.
func openAIRefusalReply(text string) reply {
	b, _ := json.Marshal(map[string]any{
		"id": "chatcmpl-ref1", "object": "chat.completion", "created": 1735689600, "model": "gpt-4o-2024-08-06",
		"choices": []any{map[string]any{
			"index":         0,
			"message":       map[string]any{"role": "assistant", "content": nil, "refusal": text},
			"logprobs":      nil,
			"finish_reason": "stop",
		}},
		"usage": map[string]any{"prompt_tokens": 90, "completion_tokens": 12, "total_tokens": 102},
	})
	return reply{status: 200, header: openAIHeaders("req_refusal"), body: string(b)}
}

func TestOpenAIToolMode(t *testing.T) {
	t.Parallel()
	p := newProvider(t, openAIToolReply("call_A1", `{"total":12.5,"currency":"EUR"}`))
	o := newTestOpenAI(t, p.URL, func(c *Config) { c.ResponseFormat = FormatTool })
	loop, task := toolLoop(t, o)
	res := loop.Run(t.Context(), task)
	if !res.OK() || string(res.Data) != `{"total":12.5,"currency":"EUR"}` || len(res.Attempts) != 1 {
		t.Fatalf("result %+v, want the tool call's arguments validated at attempt 1", res)
	}
	if u := res.Attempts[0].Usage; u.PromptTokens != 210 || u.CachedTokens != 128 || u.CompletionTokens != 18 {
		t.Errorf("usage %+v", u)
	}
	r := p.requests()[0]
	if _, ok := r.body["response_format"]; ok {
		t.Errorf("tool mode sent response_format %v", r.body["response_format"])
	}
	tools, _ := json.Marshal(r.body["tools"])
	wantTools := `[{"function":{"description":"` + toolDescription + `","name":"invoice","parameters":` + compactJSON(t, toolSchema) + `},"type":"function"}]`
	if string(tools) != wantTools {
		t.Errorf("tools\n%s\nwant\n%s", tools, wantTools)
	}
	if choice, _ := json.Marshal(r.body["tool_choice"]); string(choice) != `{"function":{"name":"invoice"},"type":"function"}` {
		t.Errorf("tool_choice %s", choice)
	}
}

func TestOpenAIToolModeHealTurn(t *testing.T) {
	t.Parallel()
	p := newProvider(t,
		openAIToolReply("call_A1", `{"total":"12,50","currency":"EUR"}`),
		openAIToolReply("call_B2", `{"total":12.5,"currency":"EUR"}`))
	o := newTestOpenAI(t, p.URL, func(c *Config) { c.ResponseFormat = FormatTool })
	loop, task := toolLoop(t, o)
	res := loop.Run(t.Context(), task)
	if !res.OK() || len(res.Attempts) != 2 || res.Attempts[0].Class != job.ClassSchema {
		t.Fatalf("result %+v, want a schema failure healed at attempt 2", res)
	}
	reqs := p.requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	if n := strings.Count(string(reqs[1].raw), `"messages"`); n != 1 {
		t.Fatalf("the heal request holds %d messages members, want 1: %s", n, reqs[1].raw)
	}
	msgs := reqs[1].body["messages"].([]any)
	if len(msgs) != 4 {
		t.Fatalf("heal request has %d messages, want 4: %v", len(msgs), msgs)
	}
	call := msgs[2].(map[string]any)
	content, hasContent := call["content"]
	calls, _ := json.Marshal(call["tool_calls"])
	if call["role"] != "assistant" || !hasContent || content != nil ||
		string(calls) != `[{"function":{"arguments":"{\"total\":\"12,50\",\"currency\":\"EUR\"}","name":"invoice"},"id":"call_A1","type":"function"}]` {
		t.Errorf("assistant turn %v (tool_calls %s), want the first call with a null content", call, calls)
	}
	result := msgs[3].(map[string]any)
	if result["role"] != "tool" || result["tool_call_id"] != "call_A1" || !strings.Contains(result["content"].(string), "/total") {
		t.Errorf("tool turn %v, want the diagnostics for call_A1", result)
	}
	if _, ok := reqs[1].body["tool_choice"]; !ok {
		t.Error("the heal request does not force the tool again")
	}
	// The first request has no tool turn, so it keeps the plain shape.
	if first := reqs[0].body["messages"].([]any); len(first) != 2 {
		t.Errorf("first request has %d messages, want 2", len(first))
	}
}

// A server that ignores tool_choice and answers with text is judged on the
// text, and its heal turn is plain text too.
func TestOpenAIToolModeTextAnswer(t *testing.T) {
	t.Parallel()
	p := newProvider(t, openAIOK("```json\n{\"total\": \"12,50\", \"currency\": \"EUR\"}\n```", "stop"), openAIOK(`{"total": 12.5, "currency": "EUR"}`, "stop"))
	o := newTestOpenAI(t, p.URL, func(c *Config) { c.ResponseFormat = FormatTool })
	loop, task := toolLoop(t, o)
	res := loop.Run(t.Context(), task)
	if !res.OK() || len(res.Attempts) != 2 || !strings.Contains(strings.Join(res.Attempts[0].Stages, ","), "fence") {
		t.Fatalf("result %+v, want the fenced text sanitized, validated and healed", res)
	}
	var roles []string
	for _, m := range p.requests()[1].body["messages"].([]any) {
		roles = append(roles, m.(map[string]any)["role"].(string))
	}
	if got := strings.Join(roles, ","); got != "system,user,assistant,user" {
		t.Errorf("roles %s", got)
	}
}

func TestOpenAIRefusal(t *testing.T) {
	t.Parallel()
	for _, format := range []string{FormatJSONSchema, FormatTool, FormatJSONObject} {
		t.Run(format, func(t *testing.T) {
			t.Parallel()
			p := newProvider(t, openAIRefusalReply("I'm sorry, I cannot assist with that request."), openAIToolReply("call_X", `{"total":1,"currency":"EUR"}`))
			o := newTestOpenAI(t, p.URL, func(c *Config) { c.ResponseFormat = format })
			loop, task := toolLoop(t, o)
			res := loop.Run(t.Context(), task)
			if res.Class != job.ClassRefused || len(res.Attempts) != 1 || len(p.requests()) != 1 {
				t.Fatalf("class %q after %d attempts, %d calls; want refused after one call", res.Class, len(res.Attempts), len(p.requests()))
			}
			if !strings.Contains(res.Reason, "I cannot assist with that request") || res.Hint == "" {
				t.Errorf("reason %q hint %q", res.Reason, res.Hint)
			}
			a := res.Attempts[0]
			if a.Class != job.ClassRefused || a.Raw != "I'm sorry, I cannot assist with that request." || a.Usage.PromptTokens != 90 {
				t.Errorf("attempt %+v", a)
			}
		})
	}
}

// Anthropic wire format, tool mode.

func anthropicHeaders(id string) map[string]string {
	return map[string]string{"request-id": id, "anthropic-organization-id": "org-test"}
}

type anthropicUsage struct{ input, output, cacheWrite, cacheRead int }

// anthropicToolReply is a forced tool call: one tool_use block, stop
// reason "tool_use".
func anthropicToolReply(id, input string, u anthropicUsage) reply {
	b, _ := json.Marshal(map[string]any{
		"id": "msg_01Tool" + id, "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
		"content":     []any{map[string]any{"type": "tool_use", "id": id, "name": "invoice", "input": json.RawMessage(input)}},
		"stop_reason": "tool_use", "stop_sequence": nil,
		"usage": map[string]any{"input_tokens": u.input, "output_tokens": u.output,
			"cache_creation_input_tokens": u.cacheWrite, "cache_read_input_tokens": u.cacheRead,
			"cache_creation": map[string]any{"ephemeral_5m_input_tokens": u.cacheWrite, "ephemeral_1h_input_tokens": 0},
			"service_tier":   "standard"},
	})
	return reply{status: 200, header: anthropicHeaders("req_011" + id), body: string(b)}
}

func anthropicRefusalReply(text string) reply {
	b, _ := json.Marshal(map[string]any{
		"id": "msg_01Refusal", "type": "message", "role": "assistant", "model": "claude-sonnet-4-5",
		"content":     []any{map[string]any{"type": "text", "text": text}},
		"stop_reason": "refusal", "stop_sequence": nil,
		"stop_details": map[string]any{"type": "refusal", "category": "cyber", "explanation": "This request was declined because it could enable cyber harm."},
		"usage":        map[string]any{"input_tokens": 80, "output_tokens": 3, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0},
	})
	return reply{status: 200, header: anthropicHeaders("req_011Refusal"), body: string(b)}
}

func TestAnthropicToolMode(t *testing.T) {
	t.Parallel()
	p := newProvider(t, anthropicToolReply("toolu_01A", `{"total": 12.5, "currency": "EUR"}`, anthropicUsage{input: 40, output: 25, cacheWrite: 1500}))
	a := newTestAnthropic(t, p.URL, func(c *Config) { c.ResponseFormat = FormatTool })
	loop, task := toolLoop(t, a)
	res := loop.Run(t.Context(), task)
	if !res.OK() || string(res.Data) != `{"total":12.5,"currency":"EUR"}` || len(res.Attempts) != 1 {
		t.Fatalf("result %+v, want the tool_use input validated at attempt 1", res)
	}
	if u := res.Attempts[0].Usage; u != (model.Usage{PromptTokens: 1540, CompletionTokens: 25, CacheWriteTokens: 1500}) {
		t.Errorf("usage %+v", u)
	}
	r := p.requests()[0]
	tools, _ := json.Marshal(r.body["tools"])
	wantTools := `[{"description":"` + toolDescription + `","input_schema":` + compactJSON(t, toolSchema) + `,"name":"invoice"}]`
	if string(tools) != wantTools {
		t.Errorf("tools\n%s\nwant\n%s", tools, wantTools)
	}
	if choice, _ := json.Marshal(r.body["tool_choice"]); string(choice) != `{"name":"invoice","type":"tool"}` {
		t.Errorf("tool_choice %s", choice)
	}
	if sys := systemText(t, r.body); !strings.Contains(sys, `"required":["total","currency"]`) {
		t.Errorf("system %q does not carry the schema", sys)
	}
}

func TestAnthropicToolModeHealTurn(t *testing.T) {
	t.Parallel()
	p := newProvider(t,
		anthropicToolReply("toolu_01A", `{"total": "12,50", "currency": "EUR"}`, anthropicUsage{input: 40, output: 25, cacheWrite: 1500}),
		anthropicToolReply("toolu_01B", `{"total": 12.5, "currency": "EUR"}`, anthropicUsage{input: 160, output: 22, cacheRead: 1500}))
	a := newTestAnthropic(t, p.URL, func(c *Config) { c.ResponseFormat = FormatTool })
	loop, task := toolLoop(t, a)
	res := loop.Run(t.Context(), task)
	if !res.OK() || len(res.Attempts) != 2 || res.Attempts[0].Class != job.ClassSchema {
		t.Fatalf("result %+v, want a schema failure healed at attempt 2", res)
	}
	if u := res.Usage(); u != (model.Usage{PromptTokens: 3200, CompletionTokens: 47, CachedTokens: 1500, CacheWriteTokens: 1500}) {
		t.Errorf("job usage %+v: want one cache write and one cache read", u)
	}
	reqs := p.requests()
	msgs := reqs[1].body["messages"].([]any)
	if len(msgs) != 3 {
		t.Fatalf("heal request has %d messages, want user, assistant, user: %v", len(msgs), msgs)
	}
	assistant, _ := json.Marshal(msgs[1])
	if want := `{"content":[{"id":"toolu_01A","input":{"currency":"EUR","total":"12,50"},"name":"invoice","type":"tool_use"}],"role":"assistant"}`; string(assistant) != want {
		t.Errorf("assistant turn\n%s\nwant\n%s", assistant, want)
	}
	user := msgs[2].(map[string]any)
	blocks, _ := user["content"].([]any)
	if user["role"] != "user" || len(blocks) != 1 {
		t.Fatalf("user turn %v, want one tool_result block", user)
	}
	b := blocks[0].(map[string]any)
	if b["type"] != "tool_result" || b["tool_use_id"] != "toolu_01A" || b["is_error"] != true || !strings.Contains(b["content"].(string), "/total") {
		t.Errorf("tool_result %v, want the diagnostics for toolu_01A with is_error", b)
	}
	// The cached prefix (tools, system) is the same on both calls.
	if s0, s1 := systemText(t, reqs[0].body), systemText(t, reqs[1].body); s0 != s1 {
		t.Error("the system turn changed between attempts: the cache would miss")
	}
}

func TestAnthropicRefusal(t *testing.T) {
	t.Parallel()
	for _, format := range []string{FormatTool, FormatJSONObject} {
		t.Run(format, func(t *testing.T) {
			t.Parallel()
			p := newProvider(t, anthropicRefusalReply("I can't"), anthropicToolReply("toolu_X", `{"total":1,"currency":"EUR"}`, anthropicUsage{}))
			a := newTestAnthropic(t, p.URL, func(c *Config) { c.ResponseFormat = format })
			loop, task := toolLoop(t, a)
			res := loop.Run(t.Context(), task)
			if res.Class != job.ClassRefused || len(res.Attempts) != 1 || len(p.requests()) != 1 {
				t.Fatalf("class %q after %d attempts, %d calls; want refused after one call", res.Class, len(res.Attempts), len(p.requests()))
			}
			for _, want := range []string{"refusal (cyber)", "could enable cyber harm", "I can't"} {
				if !strings.Contains(res.Reason, want) {
					t.Errorf("reason %q lacks %q", res.Reason, want)
				}
			}
			if a := res.Attempts[0]; a.Class != job.ClassRefused || a.FinishReason != "refusal" || a.Usage.PromptTokens != 80 {
				t.Errorf("attempt %+v", a)
			}
		})
	}
}

func TestAnthropicCacheTokens(t *testing.T) {
	t.Parallel()
	p := newProvider(t, anthropicToolReply("toolu_01C", `{"total":1,"currency":"EUR"}`, anthropicUsage{input: 12, output: 9, cacheWrite: 300, cacheRead: 2048}))
	a := newTestAnthropic(t, p.URL, nil)
	resp, err := a.Complete(t.Context(), testRequest())
	if err != nil {
		t.Fatal(err)
	}
	if want := (model.Usage{PromptTokens: 2360, CompletionTokens: 9, CachedTokens: 2048, CacheWriteTokens: 300}); resp.Usage != want {
		t.Errorf("usage %+v, want %+v", resp.Usage, want)
	}
	// Not in tool mode: no tools sent, the system block still marked.
	r := p.requests()[0]
	if _, ok := r.body["tools"]; ok {
		t.Error("tools sent in text mode")
	}
	if got := systemText(t, r.body); got != "Return JSON matching the schema." {
		t.Errorf("system %q", got)
	}
}

func TestToolModeWithoutSchemaIsPlain(t *testing.T) {
	t.Parallel()
	req := testRequest()
	req.Schema = nil
	po := newProvider(t, openAIOK(`{"total": 1}`, "stop"))
	if _, err := newTestOpenAI(t, po.URL, func(c *Config) { c.ResponseFormat = FormatTool }).Complete(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if b := po.requests()[0].body; b["tools"] != nil || fmt.Sprint(b["response_format"]) != "map[type:json_object]" {
		t.Errorf("openai request %v", b)
	}
	pa := newProvider(t, anthropicOK(`{"total": 1}`, "end_turn"))
	if _, err := newTestAnthropic(t, pa.URL, func(c *Config) { c.ResponseFormat = FormatTool }).Complete(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if b := pa.requests()[0].body; b["tools"] != nil || b["tool_choice"] != nil {
		t.Errorf("anthropic request %v", b)
	}
}

func compactJSON(t *testing.T, s string) string {
	t.Helper()
	var v any
	if err := json.Unmarshal([]byte(s), &v); err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(v)
	return string(b)
}
