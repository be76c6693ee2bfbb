package llm

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/model"
)

func newTestAnthropic(t testing.TB, url string, mod func(*Config)) *Anthropic {
	t.Helper()
	cfg := Config{BaseURL: url, APIKey: testKey, Model: "claude-sonnet-4-5", BackoffBase: time.Millisecond, BackoffMax: time.Second}
	if mod != nil {
		mod(&cfg)
	}
	a, err := NewAnthropic(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = a.Close() })
	return a
}

func TestAnthropicStatuses(t *testing.T) {
	t.Parallel()
	ok := anthropicOK(`{"total": 12.5}`, "end_turn")
	tests := []statusCase{
		{name: "200", script: []reply{ok}, wantCalls: 1},
		{name: "529 overloaded then 200", script: []reply{anthropicError(529, "overloaded_error", "Overloaded"), ok}, wantCalls: 2, wantRetries: 1},
		{name: "429 retry-after then 200", script: []reply{{status: 429, header: map[string]string{"retry-after": "0"}, body: `{"type":"error","error":{"type":"rate_limit_error","message":"Number of request tokens has exceeded your per-minute rate limit"}}`}, ok},
			wantCalls: 2, wantRetries: 1},
		{name: "500 exhausted", script: []reply{anthropicError(500, "api_error", "Internal server error")}, retries: 1, wantCalls: 2,
			wantKind: model.KindTransport, wantStatus: 500, wantRetries: 1, wantMessage: "api_error: Internal server error"},
		{name: "401", script: []reply{anthropicError(401, "authentication_error", "invalid x-api-key")}, wantCalls: 1,
			wantKind: model.KindAuth, wantStatus: 401, wantMessage: "invalid x-api-key"},
		{name: "403", script: []reply{anthropicError(403, "permission_error", "Your API key does not have permission to use the specified resource.")}, wantCalls: 1,
			wantKind: model.KindAuth, wantStatus: 403, wantMessage: "permission"},
		{name: "402 billing_error is no credit", script: []reply{anthropicError(402, "billing_error", "Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."), ok}, wantCalls: 1,
			wantKind: model.KindNoCredit, wantStatus: 402, wantMessage: "billing_error: Your credit balance is too low"},
		{name: "400", script: []reply{anthropicError(400, "invalid_request_error", "messages: roles must alternate between \"user\" and \"assistant\"")}, wantCalls: 1,
			wantKind: model.KindRequest, wantStatus: 400, wantMessage: "roles must alternate"},
		{name: "404 unknown model", script: []reply{anthropicError(404, "not_found_error", "model: claude-9")}, wantCalls: 1,
			wantKind: model.KindNotFound, wantStatus: 404, wantMessage: "not_found_error: model: claude-9 (POST http://"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := newProvider(t, tt.script...)
			a := newTestAnthropic(t, p.URL, func(c *Config) { c.TransportRetries = tt.retries })
			resp, err := a.Complete(t.Context(), testRequest())
			checkStatusCase(t, tt, p, resp, err)
			if tt.wantKind == "" && (resp.Content != `{"total": 12.5}` || resp.FinishReason != model.FinishStop) {
				t.Fatalf("response %+v", resp)
			}
			if tt.wantKind == model.KindAuth && !strings.Contains(err.Error(), "ANTHROPIC_API_KEY") {
				t.Fatalf("auth error %q does not name ANTHROPIC_API_KEY", err)
			}
		})
	}
}

func TestAnthropicRequestAndResponse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name      string
		cfgMax    int
		reqMax    int
		temp      float64
		wantMax   float64
		wantTemp  float64
		messages  []model.Message
		wantRoles []string
		system    string
	}{
		{name: "heal turn", wantMax: 4096, temp: 0.5, wantTemp: 0.5, messages: testRequest().Messages,
			wantRoles: []string{"user", "assistant", "user"}, system: "Return JSON matching the schema."},
		{name: "config max tokens, temperature clamped", cfgMax: 1000, temp: 1.4, wantMax: 1000, wantTemp: 1,
			messages:  []model.Message{{Role: "system", Content: "a"}, {Role: "system", Content: "b"}, {Role: "user", Content: "x"}, {Role: "user", Content: "y"}},
			wantRoles: []string{"user"}, system: "a\n\nb"},
		{name: "request max tokens win", cfgMax: 1000, reqMax: 64, wantMax: 64,
			messages: []model.Message{{Role: "user", Content: "x"}}, wantRoles: []string{"user"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := newProvider(t, anthropicOK(`{"total": 12.5}`, "end_turn"))
			a := newTestAnthropic(t, p.URL, func(c *Config) { c.MaxTokens = tt.cfgMax })
			req := testRequest()
			req.Messages, req.MaxTokens, req.Temperature = slices.Clone(tt.messages), tt.reqMax, tt.temp
			resp, err := a.Complete(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(req.Messages, tt.messages) {
				t.Error("the request's messages were modified")
			}
			want := model.Usage{PromptTokens: 120, CompletionTokens: 30, CachedTokens: 20}
			if resp.Usage != want || resp.RawFinishReason != "end_turn" {
				t.Errorf("response %+v", resp)
			}
			r := p.requests()[0]
			if r.path != "/v1/messages" || r.header.Get("x-api-key") != testKey || r.header.Get("anthropic-version") != "2023-06-01" || r.header.Get("Authorization") != "" {
				t.Errorf("path %q headers %v", r.path, r.header)
			}
			if r.body["model"] != "claude-sonnet-4-5" || r.body["max_tokens"] != tt.wantMax || r.body["temperature"] != tt.wantTemp {
				t.Errorf("model %v max_tokens %v temperature %v", r.body["model"], r.body["max_tokens"], r.body["temperature"])
			}
			if got := systemText(t, r.body); got != tt.system {
				t.Errorf("system %q, want %q", got, tt.system)
			}
			var roles []string
			for _, m := range r.body["messages"].([]any) {
				roles = append(roles, m.(map[string]any)["role"].(string))
			}
			if !slices.Equal(roles, tt.wantRoles) {
				t.Errorf("roles %v, want %v", roles, tt.wantRoles)
			}
		})
	}
}

func TestAnthropicMaxTokensIsTruncation(t *testing.T) {
	t.Parallel()
	p := newProvider(t, anthropicOK(`{"total": 1`, "max_tokens"))
	resp, err := newTestAnthropic(t, p.URL, nil).Complete(t.Context(), testRequest())
	if err != nil {
		t.Fatal(err)
	}
	if resp.FinishReason != model.FinishLength || resp.RawFinishReason != "max_tokens" {
		t.Fatalf("finish %q raw %q, want length", resp.FinishReason, resp.RawFinishReason)
	}
}

func TestAnthropicTimeoutIsTransport(t *testing.T) {
	t.Parallel()
	p := newProvider(t, reply{hang: true})
	a := newTestAnthropic(t, p.URL, func(c *Config) { c.Timeout = 20 * time.Millisecond; c.TransportRetries = -1 })
	_, err := a.Complete(t.Context(), testRequest())
	var he *model.Error
	if !errors.As(err, &he) || he.Kind != model.KindTransport || he.Provider != "anthropic" {
		t.Fatalf("err = %v, want an anthropic transport error", err)
	}
}

// systemText reads the system prompt of a Messages request: one text block
// marked for prompt caching, or none.
func systemText(t *testing.T, body map[string]any) string {
	t.Helper()
	sys, ok := body["system"]
	if !ok {
		return ""
	}
	blocks, _ := sys.([]any)
	if len(blocks) != 1 {
		t.Fatalf("system %v, want one block", sys)
	}
	b := blocks[0].(map[string]any)
	if b["type"] != "text" || fmt.Sprint(b["cache_control"]) != "map[type:ephemeral]" {
		t.Errorf("system block %v, want a text block with cache_control ephemeral", b)
	}
	text, _ := b["text"].(string)
	return text
}
