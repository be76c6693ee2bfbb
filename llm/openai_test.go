package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/llmpipeline/pipeline/model"
)

const testKey = "sk-test-SECRET-0123456789abcdef"

func testRequest() model.Request {
	return model.Request{
		Messages: []model.Message{
			{Role: "system", Content: "Return JSON matching the schema."},
			{Role: "user", Content: "Extract the invoice from: ..."},
			{Role: "assistant", Content: `{"total": "12,50"}`},
			{Role: "user", Content: "- /total: expected number, got \"12,50\""},
		},
		Temperature: 0.5,
		Schema:      json.RawMessage(`{"type":"object","properties":{"total":{"type":"number"}},"required":["total"]}`),
		SchemaID:    "invoice",
		JobID:       "inv-0001",
		Attempt:     2,
	}
}

func newTestOpenAI(t testing.TB, url string, mod func(*Config)) *OpenAI {
	t.Helper()
	cfg := Config{BaseURL: url + "/v1", APIKey: testKey, Model: "gpt-4o-mini", BackoffBase: time.Millisecond, BackoffMax: time.Second}
	if mod != nil {
		mod(&cfg)
	}
	o, err := NewOpenAI(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = o.Close() })
	return o
}

// statusCases are the HTTP outcomes both providers classify the same way.
type statusCase struct {
	name        string
	script      []reply
	retries     int // TransportRetries config
	wantCalls   int
	wantKind    model.ErrorKind // "" for success
	wantStatus  int
	wantRetries int    // Response.TransportRetries or Error.Retries
	wantMessage string // substring of the error
}

func TestOpenAIStatuses(t *testing.T) {
	t.Parallel()
	ok := openAIOK(`{"total": 12.5}`, "stop")
	rate := openAIError(429, "requests", "rate_limit_exceeded", "Rate limit reached for gpt-4o-mini")
	past := time.Now().Add(-time.Minute).UTC().Format(http.TimeFormat)
	with := func(r reply, h map[string]string) reply { r.header = h; return r }
	tests := []statusCase{
		{name: "200", script: []reply{ok}, wantCalls: 1},
		{name: "429 Retry-After seconds then 200", script: []reply{with(rate, map[string]string{"Retry-After": "0"}), ok}, wantCalls: 2, wantRetries: 1},
		{name: "429 retry-after-ms then 200", script: []reply{with(rate, map[string]string{"retry-after-ms": "2"}), ok}, wantCalls: 2, wantRetries: 1},
		{name: "429 Retry-After date then 200", script: []reply{with(rate, map[string]string{"Retry-After": past}), ok}, wantCalls: 2, wantRetries: 1},
		{name: "500 then 200", script: []reply{openAIError(500, "server_error", "", "The server had an error"), ok}, wantCalls: 2, wantRetries: 1},
		{name: "408 409 502 then 200", script: []reply{{status: 408, body: "timeout"}, {status: 409, body: "{}"}, {status: 502, body: "<html>bad gateway</html>"}, ok}, wantCalls: 4, wantRetries: 3},
		{name: "garbled 200 then 200", script: []reply{{status: 200, body: "<html>oops"}, ok}, wantCalls: 2, wantRetries: 1},
		{name: "retries exhausted", script: []reply{openAIError(503, "server_error", "", "The engine is currently overloaded")}, retries: 2, wantCalls: 3,
			wantKind: model.KindTransport, wantStatus: 503, wantRetries: 2, wantMessage: "overloaded"},
		{name: "no retries", script: []reply{rate}, retries: -1, wantCalls: 1, wantKind: model.KindTransport, wantStatus: 429},
		{name: "Retry-After beyond max retry after gives up", script: []reply{with(rate, map[string]string{"Retry-After": "3600"}), ok}, wantCalls: 1,
			wantKind: model.KindTransport, wantStatus: 429, wantMessage: "retry after 1h0m0s"},
		{name: "401", script: []reply{openAIError(401, "invalid_request_error", "invalid_api_key", "Incorrect API key provided: "+testKey+". You can find your API key at https://platform.openai.com/account/api-keys.")},
			wantCalls: 1, wantKind: model.KindAuth, wantStatus: 401, wantMessage: "Incorrect API key provided: [REDACTED]"},
		{name: "429 insufficient_quota is no credit, not retried", script: []reply{openAIError(429, "insufficient_quota", "insufficient_quota", "You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors."), ok},
			wantCalls: 1, wantKind: model.KindNoCredit, wantStatus: 429, wantMessage: "You exceeded your current quota"},
		{name: "402 is no credit", script: []reply{{status: 402, body: `{"error":{"message":"Insufficient credits","code":402}}`}, ok},
			wantCalls: 1, wantKind: model.KindNoCredit, wantStatus: 402, wantMessage: "Insufficient credits"},
		{name: "403", script: []reply{openAIError(403, "invalid_request_error", "unsupported_country_region_territory", "Country, region, or territory not supported")},
			wantCalls: 1, wantKind: model.KindAuth, wantStatus: 403, wantMessage: "not supported"},
		{name: "400", script: []reply{openAIError(400, "invalid_request_error", "", "'messages' must contain the word 'json' in some form, to use 'response_format' of type 'json_object'.")},
			wantCalls: 1, wantKind: model.KindRequest, wantStatus: 400, wantMessage: "must contain the word 'json'"},
		{name: "404 unknown model", script: []reply{openAIError(404, "invalid_request_error", "model_not_found", "The model `gpt-9` does not exist or you do not have access to it.")},
			wantCalls: 1, wantKind: model.KindNotFound, wantStatus: 404, wantMessage: "The model `gpt-9` does not exist or you do not have access to it. (POST http://"},
		{name: "404 no such route", script: []reply{{status: 404, body: "404 page not found"}},
			wantCalls: 1, wantKind: model.KindNotFound, wantStatus: 404, wantMessage: "/chat/completions)"},
		{name: "405", script: []reply{{status: 405, body: ""}}, wantCalls: 1, wantKind: model.KindNotFound, wantStatus: 405, wantMessage: "Method Not Allowed (POST http://"},
		{name: "501 not retried", script: []reply{{status: 501, body: "<p>Unsupported method ('POST')</p>"}, ok}, wantCalls: 1, wantKind: model.KindNotFound, wantStatus: 501, wantMessage: "Unsupported method"},
		{name: "422", script: []reply{{status: 422, body: `{"error": "unknown field max_tokens"}`}}, wantCalls: 1, wantKind: model.KindRequest, wantStatus: 422, wantMessage: "unknown field max_tokens"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := newProvider(t, tt.script...)
			o := newTestOpenAI(t, p.URL, func(c *Config) { c.TransportRetries = tt.retries })
			resp, err := o.Complete(t.Context(), testRequest())
			checkStatusCase(t, tt, p, resp, err)
			if tt.wantKind == "" && (resp.Content != `{"total": 12.5}` || resp.FinishReason != model.FinishStop) {
				t.Fatalf("response %+v", resp)
			}
		})
	}
}

func checkStatusCase(t *testing.T, tt statusCase, p *provider, resp model.Response, err error) {
	t.Helper()
	if got := len(p.requests()); got != tt.wantCalls {
		t.Errorf("provider saw %d requests, want %d", got, tt.wantCalls)
	}
	if tt.wantKind == "" {
		if err != nil {
			t.Fatalf("err = %v", err)
		}
		if resp.TransportRetries != tt.wantRetries {
			t.Errorf("TransportRetries = %d, want %d", resp.TransportRetries, tt.wantRetries)
		}
		return
	}
	var he *model.Error
	if !errors.As(err, &he) {
		t.Fatalf("err = %v (%T), want *model.Error", err, err)
	}
	if he.Kind != tt.wantKind || he.StatusCode != tt.wantStatus || he.Retries != tt.wantRetries {
		t.Errorf("error kind %s status %d retries %d, want %s %d %d", he.Kind, he.StatusCode, he.Retries, tt.wantKind, tt.wantStatus, tt.wantRetries)
	}
	if !strings.Contains(he.Message, tt.wantMessage) {
		t.Errorf("message %q does not contain %q", he.Message, tt.wantMessage)
	}
	if strings.Contains(err.Error(), testKey) || strings.Contains(he.Message, testKey) {
		t.Errorf("the API key leaked into the error: %v", err)
	}
	if he.Kind == model.KindAuth && !strings.Contains(err.Error(), he.KeyEnv) || he.Kind == model.KindAuth && he.KeyEnv == "" {
		t.Errorf("auth error %q does not name the key's env var %q", err, he.KeyEnv)
	}
	if he.Kind == model.KindNoCredit && (!strings.Contains(err.Error(), "billing and credit") || he.KeyEnv == "" || !strings.Contains(err.Error(), he.KeyEnv)) {
		t.Errorf("no-credit error %q does not say to check the account's billing and credit of the key in %q", err, he.KeyEnv)
	}
}

func TestOpenAIRequestAndResponse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		format     string
		maxTokens  int
		reqTokens  int
		wantFormat string // JSON of response_format, "" for absent
		wantMax    float64
	}{
		{"json_object default", "", 0, 0, `{"type":"json_object"}`, 0},
		{"json_schema sends the schema's strict form", FormatJSONSchema, 512, 0,
			`{"json_schema":{"name":"invoice","schema":{"additionalProperties":false,"properties":{"total":{"type":"number"}},"required":["total"],"type":"object"},"strict":true},"type":"json_schema"}`, 512},
		{"none", FormatNone, 0, 100, "", 100},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := newProvider(t, openAIOK(`{"total": 12.5}`, "stop"))
			o := newTestOpenAI(t, p.URL, func(c *Config) { c.ResponseFormat = tt.format; c.MaxTokens = tt.maxTokens })
			req := testRequest()
			req.MaxTokens = tt.reqTokens
			before := slices.Clone(req.Messages)
			resp, err := o.Complete(t.Context(), req)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(before, req.Messages) {
				t.Error("the request's messages were modified")
			}
			want := model.Usage{PromptTokens: 120, CompletionTokens: 40, CachedTokens: 64, ReasoningTokens: 8}
			if resp.Usage != want || resp.RawFinishReason != "stop" || resp.Latency <= 0 {
				t.Errorf("response %+v", resp)
			}
			r := p.requests()[0]
			if r.path != "/v1/chat/completions" || r.header.Get("Authorization") != "Bearer "+testKey || r.header.Get("Content-Type") != "application/json" {
				t.Errorf("path %q headers %v", r.path, r.header)
			}
			if r.body["model"] != "gpt-4o-mini" || r.body["temperature"] != 0.5 {
				t.Errorf("model %v temperature %v", r.body["model"], r.body["temperature"])
			}
			var roles []string
			for _, m := range r.body["messages"].([]any) {
				roles = append(roles, m.(map[string]any)["role"].(string))
			}
			if !slices.Equal(roles, []string{"system", "user", "assistant", "user"}) {
				t.Errorf("roles %v", roles)
			}
			if got := r.body["messages"].([]any)[3].(map[string]any)["content"]; got != req.Messages[3].Content {
				t.Errorf("last message %q", got)
			}
			if got, _ := r.body["max_tokens"].(float64); got != tt.wantMax {
				t.Errorf("max_tokens %v, want %v", r.body["max_tokens"], tt.wantMax)
			}
			var gotFormat string
			if f, ok := r.body["response_format"]; ok {
				b, _ := json.Marshal(f)
				gotFormat = string(b)
			}
			if gotFormat != tt.wantFormat {
				t.Errorf("response_format %s, want %s", gotFormat, tt.wantFormat)
			}
		})
	}
}

func TestOpenAIFinishReasons(t *testing.T) {
	t.Parallel()
	tests := []struct{ raw, want string }{
		{"stop", model.FinishStop},
		{"length", model.FinishLength},
		{"content_filter", model.FinishOther},
		{"MAX_TOKENS", model.FinishLength},
	}
	for _, tt := range tests {
		t.Run(tt.raw, func(t *testing.T) {
			t.Parallel()
			p := newProvider(t, openAIOK(`{"total": 1`, tt.raw))
			resp, err := newTestOpenAI(t, p.URL, nil).Complete(t.Context(), testRequest())
			if err != nil {
				t.Fatal(err)
			}
			if resp.FinishReason != tt.want || resp.RawFinishReason != tt.raw {
				t.Fatalf("finish %q (raw %q), want %q", resp.FinishReason, resp.RawFinishReason, tt.want)
			}
		})
	}
}

func TestOpenAITimeoutIsTransport(t *testing.T) {
	t.Parallel()
	p := newProvider(t, reply{hang: true}, reply{hang: true}, openAIOK(`{}`, "stop"))
	// Long enough that the retry reaches the server on a loaded machine.
	o := newTestOpenAI(t, p.URL, func(c *Config) { c.Timeout = 200 * time.Millisecond; c.TransportRetries = 1 })
	_, err := o.Complete(t.Context(), testRequest())
	var he *model.Error
	if !errors.As(err, &he) || he.Kind != model.KindTransport || he.Retries != 1 || !strings.Contains(he.Message, "timed out") {
		t.Fatalf("err = %v, want a transport timeout after 1 retry", err)
	}
	if n := len(p.requests()); n != 2 {
		t.Fatalf("provider saw %d requests, want 2", n)
	}
}

func TestOpenAIConnectionRefusedIsTransport(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.NotFoundHandler())
	url := srv.URL
	srv.Close()
	o := newTestOpenAI(t, url, func(c *Config) { c.TransportRetries = 2 })
	_, err := o.Complete(t.Context(), testRequest())
	var he *model.Error
	if !errors.As(err, &he) || he.Kind != model.KindTransport || he.Retries != 2 || he.StatusCode != 0 {
		t.Fatalf("err = %#v, want transport after 2 retries", err)
	}
}

func TestOpenAICancelDuringBackoffReturnsPromptly(t *testing.T) {
	t.Parallel()
	// The provider asks for a 20s pause; cancelling must not wait for it.
	p := newProvider(t, reply{status: 503, header: map[string]string{"Retry-After": "20"}, body: "{}"})
	o := newTestOpenAI(t, p.URL, func(c *Config) { c.BackoffMax = time.Minute })
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		_, err := o.Complete(ctx, testRequest())
		done <- err
	}()
	<-p.seen
	cancel()
	select {
	case err := <-done:
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("err = %v, want context.Canceled", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Complete did not return after its context was cancelled")
	}
	if n := len(p.requests()); n != 1 {
		t.Fatalf("provider saw %d requests, want 1", n)
	}
}

func TestOpenAIKeyNeverLogged(t *testing.T) {
	t.Parallel()
	var logs bytes.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	p := newProvider(t,
		openAIError(500, "server_error", "", "upstream rejected key "+testKey),
		openAIError(401, "invalid_request_error", "invalid_api_key", "Incorrect API key provided: "+testKey))
	o := newTestOpenAI(t, p.URL, func(c *Config) { c.Logger = logger })
	_, err := o.Complete(t.Context(), testRequest())
	if model.KindOf(err) != model.KindAuth {
		t.Fatalf("err = %v, want auth", err)
	}
	if logs.Len() == 0 {
		t.Fatal("nothing was logged for the retry")
	}
	if strings.Contains(logs.String(), testKey) || strings.Contains(err.Error(), testKey) {
		t.Fatalf("key leaked:\nlogs: %s\nerr: %v", logs.String(), err)
	}
}

func TestOpenAIWithoutKeySendsNoAuthorization(t *testing.T) {
	t.Parallel()
	p := newProvider(t, openAIOK(`{}`, "stop"))
	o := newTestOpenAI(t, p.URL, func(c *Config) { c.APIKey = "" })
	if _, err := o.Complete(t.Context(), testRequest()); err != nil {
		t.Fatal(err)
	}
	if h := p.requests()[0].header.Get("Authorization"); h != "" {
		t.Fatalf("Authorization %q sent without a key", h)
	}
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  Config
		new  func(Config) error
	}{
		{"no model", Config{}, openAINew},
		{"relative URL", Config{Model: "m", BaseURL: "localhost:8080/v1"}, openAINew},
		{"bad response format", Config{Model: "m", ResponseFormat: "xml"}, openAINew},
		{"negative timeout", Config{Model: "m", Timeout: -time.Second}, openAINew},
		{"anthropic without key", Config{Model: "claude"}, anthropicNew},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := tt.new(tt.cfg)
			if !errors.Is(err, ErrConfig) {
				t.Fatalf("err = %v, want ErrConfig", err)
			}
		})
	}
	t.Run("credentials in the URL are not echoed", func(t *testing.T) {
		t.Parallel()
		err := openAINew(Config{Model: "m", BaseURL: "ftp://user:hunter2@example.com"})
		if err == nil || strings.Contains(err.Error(), "hunter2") {
			t.Fatalf("err = %v", err)
		}
	})
}

func openAINew(c Config) error    { _, err := NewOpenAI(c); return err }
func anthropicNew(c Config) error { _, err := NewAnthropic(c); return err }

func TestParse(t *testing.T) {
	t.Parallel()
	tests := []struct {
		spec, provider, model string
		ok                    bool
	}{
		{"openai:gpt-4o-mini", "openai", "gpt-4o-mini", true},
		{"anthropic:claude-sonnet-4-5", "anthropic", "claude-sonnet-4-5", true},
		{"sim", "sim", "", true},
		{" OpenAI:llama3.1:8b ", "openai", "llama3.1:8b", true},
		{"openai", "", "", false},
		{"openai:", "", "", false},
		{"sim:fast", "", "", false},
		{"gemini:pro", "", "", false},
		{"", "", "", false},
	}
	for _, tt := range tests {
		t.Run(tt.spec, func(t *testing.T) {
			t.Parallel()
			p, m, err := Parse(tt.spec)
			if (err == nil) != tt.ok || p != tt.provider || m != tt.model {
				t.Fatalf("Parse(%q) = %q, %q, %v", tt.spec, p, m, err)
			}
			if err != nil && !errors.Is(err, ErrSpec) {
				t.Fatalf("err %v does not wrap ErrSpec", err)
			}
		})
	}
}

func FuzzParse(f *testing.F) {
	for _, s := range []string{"openai:gpt-4o-mini", "anthropic:claude", "sim", "x:", ":"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, spec string) {
		p, m, err := Parse(spec)
		if err != nil {
			return
		}
		switch p {
		case ProviderSim:
			if m != "" {
				t.Fatalf("sim with model %q", m)
			}
		case ProviderOpenAI, ProviderAnthropic:
			if m == "" {
				t.Fatalf("%s without a model", p)
			}
		default:
			t.Fatalf("unknown provider %q accepted", p)
		}
	})
}

func TestRetryAfter(t *testing.T) {
	t.Parallel()
	now := time.Date(2025, 1, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name   string
		header map[string]string
		want   time.Duration
		ok     bool
	}{
		{"seconds", map[string]string{"Retry-After": "2"}, 2 * time.Second, true},
		{"fraction", map[string]string{"Retry-After": "0.5"}, 500 * time.Millisecond, true},
		{"milliseconds win", map[string]string{"Retry-After": "2", "Retry-After-Ms": "150"}, 150 * time.Millisecond, true},
		{"date", map[string]string{"Retry-After": now.Add(30 * time.Second).Format(http.TimeFormat)}, 30 * time.Second, true},
		{"past date", map[string]string{"Retry-After": now.Add(-time.Hour).Format(http.TimeFormat)}, 0, true},
		{"absent", nil, 0, false},
		{"garbage", map[string]string{"Retry-After": "soon"}, 0, false},
		{"negative", map[string]string{"Retry-After": "-3"}, 0, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			h := http.Header{}
			for k, v := range tt.header {
				h.Set(k, v)
			}
			got, ok := retryAfter(h, now)
			if got != tt.want || ok != tt.ok {
				t.Fatalf("retryAfter = %v, %v; want %v, %v", got, ok, tt.want, tt.ok)
			}
		})
	}
}

func FuzzRetryAfter(f *testing.F) {
	f.Add("2", "")
	f.Add("Wed, 21 Oct 2015 07:28:00 GMT", "")
	f.Add("", "250")
	f.Fuzz(func(t *testing.T, after, ms string) {
		h := http.Header{}
		h.Set("Retry-After", after)
		h.Set("Retry-After-Ms", ms)
		if d, ok := retryAfter(h, time.Now()); ok && d < 0 {
			t.Fatalf("negative delay %v", d)
		}
	})
}

func TestBackoffIsBoundedFullJitter(t *testing.T) {
	t.Parallel()
	base, ceil := 10*time.Millisecond, 80*time.Millisecond
	for n := range 10 {
		limit := min(base<<n, ceil)
		for range 200 {
			if d := backoff(base, ceil, n); d < 0 || d > limit {
				t.Fatalf("backoff(%d) = %v, want within [0, %v]", n, d, limit)
			}
		}
	}
}

// TestErrorPageIsOneLine: a proxy's HTML error page (nginx, a load
// balancer) becomes a message of one line, and a message cut in the middle
// of a character stays UTF-8, so the log line and the dead letter's reason
// read as one.
func TestErrorPageIsOneLine(t *testing.T) {
	t.Parallel()
	page := "<html>\r\n<head><title>502 Bad Gateway</title></head>\r\n<body>\r\n<center><h1>502 Bad Gateway</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n"
	p := newProvider(t, reply{status: 502, body: page})
	o := newTestOpenAI(t, p.URL, func(c *Config) { c.TransportRetries = -1 })
	_, err := o.Complete(t.Context(), testRequest())
	var he *model.Error
	if !errors.As(err, &he) {
		t.Fatalf("error %v, want a *model.Error", err)
	}
	if want := "<html> <head><title>502 Bad Gateway</title></head> <body> <center><h1>502 Bad Gateway</h1></center> <hr><center>nginx</center> </body> </html>"; he.Message != want {
		t.Errorf("message %q, want %q", he.Message, want)
	}
	long := "x" + strings.Repeat("é", 400) // 801 bytes: byte 300 is inside a character
	p = newProvider(t, reply{status: 400, body: long})
	o = newTestOpenAI(t, p.URL, nil)
	_, err = o.Complete(t.Context(), testRequest())
	if !errors.As(err, &he) || !strings.HasSuffix(he.Message, "...") || !utf8.ValidString(he.Message) || len(he.Message) > 303 {
		t.Errorf("a long message cut to %d bytes, valid UTF-8 %v: %q", len(he.Message), utf8.ValidString(he.Message), he.Message)
	}
}

// reasoningServer answers as OpenAI's reasoning models (gpt-5, o-series)
// do: a 400 naming max_tokens (unsupported_parameter) when the request has
// it, a 400 naming temperature (unsupported_value) when it has one other
// than 1, else the answer. It records every request body.
type reasoningServer struct {
	*httptest.Server
	mu     sync.Mutex
	bodies []map[string]any
}

func newReasoningServer(t *testing.T, tempMessage string) *reasoningServer {
	t.Helper()
	s := &reasoningServer{}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		s.mu.Lock()
		s.bodies = append(s.bodies, body)
		s.mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		refuse := func(param, code, msg string) {
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "param": param, "code": code}})
		}
		if _, ok := body["max_tokens"]; ok {
			refuse("max_tokens", "unsupported_parameter", "Unsupported parameter: 'max_tokens' is not supported with this model. Use 'max_completion_tokens' instead.")
			return
		}
		if t, ok := body["temperature"]; ok && t != 1.0 {
			if tempMessage != "" { // a compatible server that says it in words only
				w.WriteHeader(http.StatusBadRequest)
				_ = json.NewEncoder(w).Encode(map[string]any{"message": tempMessage, "type": "invalid_request_error"})
				return
			}
			refuse("temperature", "unsupported_value", fmt.Sprintf("Unsupported value: 'temperature' does not support %v with this model. Only the default (1) value is supported.", t))
			return
		}
		_, _ = io.WriteString(w, openAIOK(`{"total": 12.5}`, "stop").body)
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *reasoningServer) sent() []map[string]any {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.bodies)
}

// TestOpenAIReasoningModelParameters: a model that takes only its default
// temperature and wants max_completion_tokens answers the first call once
// the client has dropped what it refused, and every later call is sent
// right at once; the response says the answer came at temperature 1. A 400
// about a temperature's value out of range is not taken for that.
func TestOpenAIReasoningModelParameters(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ name, tempMessage string }{
		{"OpenAI", ""},
		{"words only", "invalid temperature: only 1 is allowed for this model"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newReasoningServer(t, tc.tempMessage)
			// A model whose name says nothing (gpt-5-mini is known up front).
			o := newTestOpenAI(t, s.URL, func(c *Config) { c.Model = "reasoner-1"; c.MaxTokens = 1024 })
			for call := 1; call <= 2; call++ {
				resp, err := o.Complete(t.Context(), testRequest())
				if err != nil {
					t.Fatalf("call %d: %v", call, err)
				}
				if resp.Content != `{"total": 12.5}` || resp.Temperature == nil || *resp.Temperature != 1 {
					t.Fatalf("call %d: response %+v, want the answer at temperature 1", call, resp)
				}
			}
			bodies := s.sent()
			if len(bodies) != 4 {
				t.Fatalf("%d requests, want 4: the first call sent three times (max_tokens, then temperature refused), the second once", len(bodies))
			}
			last := bodies[3]
			if _, ok := last["temperature"]; ok {
				t.Errorf("the second call sent temperature %v", last["temperature"])
			}
			if _, ok := last["max_tokens"]; ok || last["max_completion_tokens"] != 1024.0 {
				t.Errorf("the second call sent max_tokens %v, max_completion_tokens %v; want only max_completion_tokens 1024", last["max_tokens"], last["max_completion_tokens"])
			}
		})
	}

	p := newProvider(t, openAIError(400, "invalid_request_error", "decimal_above_max_value", "Invalid 'temperature': decimal above maximum value. Expected a value <= 2, but got 3 instead."))
	o := newTestOpenAI(t, p.URL, nil)
	_, err := o.Complete(t.Context(), testRequest())
	if model.KindOf(err) != model.KindRequest || len(p.requests()) != 1 {
		t.Errorf("a temperature out of range: %v after %d calls, want one request_error", err, len(p.requests()))
	}
	if body := p.requests()[0].body; body["temperature"] != 0.5 {
		t.Errorf("temperature sent %v, want the request's 0.5", body["temperature"])
	}
}

// TestOpenAIHeadersAndQuery: Config.Headers reach the provider after its
// own (one of the same name replaces it), a secret header value a
// provider echoes is redacted, and a base URL's query (an Azure OpenAI
// deployment's api-version) is kept on the endpoint.
func TestOpenAIHeadersAndQuery(t *testing.T) {
	t.Parallel()
	const gatewayKey = "pk-gateway-0123456789"
	p := newProvider(t, openAIOK(`{"total": 1}`, "stop"), openAIError(400, "invalid_request_error", "", "bad gateway key "+gatewayKey+" for route v2"))
	o := newTestOpenAI(t, p.URL, func(c *Config) {
		c.BaseURL = p.URL + "/openai/deployments/gpt-4o/?api-version=2024-10-21"
		c.Headers = http.Header{"X-Portkey-Api-Key": {gatewayKey}, "Openai-Beta": {"v2"}, "Authorization": {"Bearer from-the-header"}}
	})
	if _, err := o.Complete(t.Context(), testRequest()); err != nil {
		t.Fatal(err)
	}
	_, err := o.Complete(t.Context(), testRequest())
	reqs := p.requests()
	r := reqs[0]
	if r.path != "/openai/deployments/gpt-4o/chat/completions" {
		t.Errorf("path %q", r.path)
	}
	if got := r.header.Get("X-Portkey-Api-Key"); got != gatewayKey {
		t.Errorf("gateway key header %q", got)
	}
	if got := r.header.Get("Openai-Beta"); got != "v2" {
		t.Errorf("Openai-Beta %q", got)
	}
	if got := r.header.Values("Authorization"); len(got) != 1 || got[0] != "Bearer from-the-header" {
		t.Errorf("Authorization %q, want the header's only", got)
	}
	var he *model.Error
	if !errors.As(err, &he) || strings.Contains(he.Message, gatewayKey) || !strings.Contains(he.Message, "[REDACTED]") || !strings.Contains(he.Message, "route v2") {
		t.Errorf("error %v: want the gateway key redacted, the short value kept", err)
	}
}

func TestEndpointKeepsTheQuery(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ base, path, want string }{
		{"https://api.openai.com/v1", "/chat/completions", "https://api.openai.com/v1/chat/completions"},
		{"https://x.openai.azure.com/openai/deployments/d?api-version=2024-10-21", "/chat/completions", "https://x.openai.azure.com/openai/deployments/d/chat/completions?api-version=2024-10-21"},
		{"https://x.example/v1/?k=1", "/batches?after=b_1&limit=100", "https://x.example/v1/batches?k=1&after=b_1&limit=100"},
		{"https://x.example/v1", "/batches?limit=100", "https://x.example/v1/batches?limit=100"},
	} {
		if got := (Config{BaseURL: tc.base}).endpoint(tc.path); got != tc.want {
			t.Errorf("endpoint(%q, %q) = %q, want %q", tc.base, tc.path, got, tc.want)
		}
	}
}
