package heal

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/job"
	"github.com/llmpipeline/pipeline/model"
	"github.com/llmpipeline/pipeline/schemas"
)

const testSchema = `{"title":"Receipt","description":"A shop receipt.","type":"object","required":["total","currency"],
"additionalProperties":false,
"properties":{"total":{"type":"number","minimum":0},"currency":{"enum":["EUR","USD"]},"note":{"type":"string"}}}`

func testTask(t testing.TB) Task {
	t.Helper()
	s, err := schemas.Compile("receipt", []byte(testSchema))
	if err != nil {
		t.Fatal(err)
	}
	return Task{JobID: "job-1", Schema: s, Input: "Total: 12,50 EUR", Instructions: "amounts as numbers"}
}

// reply is one scripted model answer.
type reply struct {
	content string
	finish  string // FinishStop when empty
	raw     string // provider's word
	usage   model.Usage
	retries int
	err     error
	// refusal and toolCallID fill Response.Refusal and Response.ToolCallID.
	refusal, toolCallID string
}

// scripted is a Model that answers from a script and records every request
// it got (deep copies, taken before it optionally scribbles on them).
type scripted struct {
	mu       sync.Mutex
	script   []reply
	reqs     []model.Request
	scribble bool // modify req.Messages in place, as a careless Model might
}

func (m *scripted) Complete(ctx context.Context, req model.Request) (model.Response, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	cp := req
	cp.Messages = slices.Clone(req.Messages)
	m.reqs = append(m.reqs, cp)
	if m.scribble {
		for i := range req.Messages {
			req.Messages[i].Content = "scribbled"
		}
	}
	if len(m.script) == 0 {
		return model.Response{}, errors.New("script exhausted: the loop called the model too often")
	}
	r := m.script[0]
	m.script = m.script[1:]
	if r.err != nil {
		return model.Response{}, r.err
	}
	f := r.finish
	if f == "" {
		f = model.FinishStop
	}
	rawF := r.raw
	if rawF == "" {
		rawF = f
	}
	return model.Response{Content: r.content, FinishReason: f, RawFinishReason: rawF, Usage: r.usage,
		Latency: 5 * time.Millisecond, TransportRetries: r.retries, Refusal: r.refusal, ToolCallID: r.toolCallID}, nil
}

func (m *scripted) requests() []model.Request {
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.reqs)
}

func roles(msgs []model.Message) []string {
	out := make([]string, len(msgs))
	for i, m := range msgs {
		out[i] = m.Role
	}
	return out
}

func temps(reqs []model.Request) []float64 {
	out := make([]float64, len(reqs))
	for i, r := range reqs {
		out[i] = r.Temperature
	}
	return out
}

var cliConfig = Config{Temperature: 0.7, TemperatureStep: 0.2, TemperatureFloor: 0.1}

func withAttempts(n int) Config { c := cliConfig; c.MaxAttempts = n; return c }

func TestRun(t *testing.T) {
	t.Parallel()
	const (
		good       = `{"total":12.5,"currency":"EUR"}`
		badTotal   = `{"total":"12,50","currency":"EUR"}`
		badTotal2  = `{"total":"12.50 EUR","currency":"EUR"}`
		badBoth    = `{"total":-1,"currency":"euro"}`
		fenced     = "Here you go:\n```json\n" + good + "\n```"
		prose      = "I am sorry, I cannot find a receipt in this text."
		unfinished = `{"total":12.5,"currency":"EU`
	)
	transportErr := &model.Error{Kind: model.KindTransport, Provider: "openai", StatusCode: 503, Message: "overloaded", Retries: 3}
	authErr := &model.Error{Kind: model.KindAuth, Provider: "openai", StatusCode: 401, Message: "bad key", KeyEnv: "OPENAI_API_KEY"}
	reqErr := &model.Error{Kind: model.KindRequest, Provider: "openai", StatusCode: 400, Message: "unknown model gpt-9"}
	longErr := &model.Error{Kind: model.KindRequest, Provider: "anthropic", StatusCode: 400, Message: "invalid_request_error: prompt is too long: 210412 tokens > 200000 maximum"}
	notFound := &model.Error{Kind: model.KindNotFound, Provider: "openai", StatusCode: 404, Message: "The model `gpt-9` does not exist (POST https://api.example.com/chat/completions)"}

	tests := []struct {
		name      string
		cfg       Config
		script    []reply
		class     job.Class
		calls     int
		temps     []float64
		attempts  []job.Class
		data      string
		errKind   model.ErrorKind
		reasonHas []string
		hintHas   []string
	}{
		{name: "valid at once", cfg: cliConfig, script: []reply{{content: good}},
			class: job.ClassNone, calls: 1, temps: []float64{0.7}, attempts: []job.Class{job.ClassNone}, data: good},
		{name: "sanitized then valid", cfg: cliConfig, script: []reply{{content: fenced}},
			class: job.ClassNone, calls: 1, temps: []float64{0.7}, attempts: []job.Class{job.ClassNone}, data: good},
		{name: "healed at attempt 2", cfg: cliConfig, script: []reply{{content: badTotal}, {content: good}},
			class: job.ClassNone, calls: 2, temps: []float64{0.7, 0.5}, attempts: []job.Class{job.ClassSchema, job.ClassNone}, data: good},
		{name: "grammar failure healed", cfg: cliConfig, script: []reply{{content: prose}, {content: good}},
			class: job.ClassNone, calls: 2, temps: []float64{0.7, 0.5}, attempts: []job.Class{job.ClassGrammar, job.ClassNone}, data: good},
		{name: "ceiling of 2 means 2 calls", cfg: withAttempts(2),
			script: []reply{{content: badTotal}, {content: badBoth}, {content: good}},
			class:  job.ClassExhausted, calls: 2, temps: []float64{0.7, 0.5}, attempts: []job.Class{job.ClassSchema, job.ClassSchema},
			reasonHas: []string{"2 attempts", "/currency (enum)", "/total (minimum)"}},
		{name: "zero MaxAttempts means 2", cfg: cliConfig,
			script: []reply{{content: badTotal}, {content: badBoth}, {content: good}},
			class:  job.ClassExhausted, calls: 2, attempts: []job.Class{job.ClassSchema, job.ClassSchema}},
		{name: "ceiling of 1", cfg: withAttempts(1), script: []reply{{content: badTotal}, {content: good}},
			class: job.ClassExhausted, calls: 1, temps: []float64{0.7}, attempts: []job.Class{job.ClassSchema}},
		{name: "temperature steps down to the floor", cfg: withAttempts(5),
			script: []reply{{content: badTotal}, {content: badBoth}, {content: badTotal2}, {content: prose}, {content: good}},
			class:  job.ClassNone, calls: 5, temps: []float64{0.7, 0.5, 0.3, 0.1, 0.1},
			attempts: []job.Class{job.ClassSchema, job.ClassSchema, job.ClassSchema, job.ClassGrammar, job.ClassNone}, data: good},
		{name: "content filter is a refusal, never healed", cfg: withAttempts(4),
			script: []reply{{content: `{"total":`, finish: model.FinishOther, raw: "content_filter"}, {content: good}},
			class:  job.ClassRefused, calls: 1, attempts: []job.Class{job.ClassRefused},
			reasonHas: []string{"content filter"}, hintHas: []string{"never healed"}},
		{name: "finish reason length is truncation, never retried", cfg: withAttempts(4),
			script: []reply{{content: good, finish: model.FinishLength, raw: "length"}, {content: good}},
			class:  job.ClassTruncated, calls: 1, attempts: []job.Class{job.ClassTruncated},
			reasonHas: []string{"finish reason length"}, hintHas: []string{"--max-tokens", "split the schema"}},
		{name: "provider spelling MAX_TOKENS is truncation", cfg: withAttempts(4),
			script: []reply{{content: unfinished, finish: model.FinishOther, raw: "MAX_TOKENS"}, {content: good}},
			class:  job.ClassTruncated, calls: 1, attempts: []job.Class{job.ClassTruncated}},
		{name: "unterminated JSON is truncation, never retried", cfg: withAttempts(4),
			script: []reply{{content: unfinished}, {content: good}},
			class:  job.ClassTruncated, calls: 1, attempts: []job.Class{job.ClassTruncated}, reasonHas: []string{"ends inside"}},
		{name: "same output twice stops early", cfg: withAttempts(5),
			script: []reply{{content: badTotal}, {content: badTotal + "\n"}, {content: good}},
			class:  job.ClassNoProgress, calls: 2, attempts: []job.Class{job.ClassSchema, job.ClassSchema},
			reasonHas: []string{"repeated the output", "/total"}},
		{name: "same diagnostics twice stops early", cfg: withAttempts(5),
			script: []reply{{content: badBoth}, {content: `{"currency":"euro","total":-1}`}, {content: good}},
			class:  job.ClassNoProgress, calls: 2, attempts: []job.Class{job.ClassSchema, job.ClassSchema},
			reasonHas: []string{"same diagnostics"}},
		{name: "different diagnostics keep going", cfg: withAttempts(3),
			script: []reply{{content: badTotal}, {content: badTotal2}, {content: good}},
			class:  job.ClassNone, calls: 3, attempts: []job.Class{job.ClassSchema, job.ClassSchema, job.ClassNone}, data: good},
		{name: "transport error at first call", cfg: cliConfig, script: []reply{{err: transportErr}},
			class: job.ClassTransport, calls: 1, errKind: model.KindTransport, hintHas: []string{"retried later"}},
		{name: "transport error after a failed attempt keeps the attempt", cfg: cliConfig,
			script: []reply{{content: badTotal, usage: model.Usage{PromptTokens: 100, CompletionTokens: 10}}, {err: transportErr}},
			class:  job.ClassTransport, calls: 2, attempts: []job.Class{job.ClassSchema}, errKind: model.KindTransport},
		{name: "auth error", cfg: cliConfig, script: []reply{{err: authErr}},
			class: job.ClassAuth, calls: 1, errKind: model.KindAuth, hintHas: []string{"OPENAI_API_KEY"}},
		{name: "request error", cfg: cliConfig, script: []reply{{content: badTotal}, {err: reqErr}},
			class: job.ClassRequest, calls: 2, attempts: []job.Class{job.ClassSchema}, errKind: model.KindRequest, reasonHas: []string{"gpt-9"}},
		{name: "input over the context window", cfg: cliConfig, script: []reply{{err: longErr}},
			class: job.ClassRequest, calls: 1, errKind: model.KindRequest, reasonHas: []string{"prompt is too long"}, hintHas: []string{"context window", "--fallback-model", "split the input"}},
		{name: "no such endpoint or model", cfg: cliConfig, script: []reply{{err: notFound}},
			class: job.ClassNotFound, calls: 1, errKind: model.KindNotFound, reasonHas: []string{"gpt-9", "/chat/completions"}, hintHas: []string{"base URL", "no job is dead-lettered"}},
		{name: "unknown model error counts as transport", cfg: cliConfig, script: []reply{{err: errors.New("boom")}},
			class: job.ClassTransport, calls: 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := &scripted{script: slices.Clone(tt.script)}
			l, err := New(m, tt.cfg)
			if err != nil {
				t.Fatal(err)
			}
			res := l.Run(t.Context(), testTask(t))
			reqs := m.requests()
			if res.Class != tt.class {
				t.Errorf("class = %q, want %q (reason %q, err %v)", res.Class, tt.class, res.Reason, res.Err)
			}
			if len(reqs) != tt.calls {
				t.Errorf("model called %d times, want %d", len(reqs), tt.calls)
			}
			if tt.temps != nil && !slices.Equal(temps(reqs), tt.temps) {
				t.Errorf("temperatures = %v, want %v", temps(reqs), tt.temps)
			}
			var got []job.Class
			for i, a := range res.Attempts {
				got = append(got, a.Class)
				if a.N != i+1 || a.Temperature != reqs[i].Temperature || a.Raw != tt.script[i].content {
					t.Errorf("attempt %d trace: N=%d temp=%v raw=%q", i, a.N, a.Temperature, a.Raw)
				}
				if a.Latency != 5*time.Millisecond {
					t.Errorf("attempt %d latency = %v", i, a.Latency)
				}
				if (a.Class == job.ClassSchema) != (len(a.Diagnostics) > 0) {
					t.Errorf("attempt %d: class %s with %d diagnostics", i, a.Class, len(a.Diagnostics))
				}
			}
			if !slices.Equal(got, tt.attempts) {
				t.Errorf("attempt classes = %v, want %v", got, tt.attempts)
			}
			if string(res.Data) != tt.data {
				t.Errorf("data = %s, want %s", res.Data, tt.data)
			}
			if res.OK() != (tt.class == job.ClassNone) {
				t.Errorf("OK() = %v", res.OK())
			}
			if tt.errKind != "" && model.KindOf(res.Err) != tt.errKind {
				t.Errorf("KindOf(Err) = %q, want %q (%v)", model.KindOf(res.Err), tt.errKind, res.Err)
			}
			if tt.class == job.ClassNone && res.Err != nil {
				t.Errorf("Err = %v on success", res.Err)
			}
			if tt.class != job.ClassNone && res.Reason == "" {
				t.Error("no Reason on failure")
			}
			for _, s := range tt.reasonHas {
				if !strings.Contains(res.Reason, s) {
					t.Errorf("reason %q lacks %q", res.Reason, s)
				}
			}
			for _, s := range tt.hintHas {
				if !strings.Contains(res.Hint, s) {
					t.Errorf("hint %q lacks %q", res.Hint, s)
				}
			}
			for i, r := range reqs {
				if r.Attempt != i+1 || r.JobID != "job-1" || r.SchemaID != "receipt" || len(r.Schema) == 0 {
					t.Errorf("request %d identity: attempt=%d job=%q schema=%q", i, r.Attempt, r.JobID, r.SchemaID)
				}
			}
		})
	}
}

// TestHealRequest checks the second request: the original task, the previous
// output as an assistant turn, and a user turn naming the failing path.
func TestHealRequest(t *testing.T) {
	t.Parallel()
	task := testTask(t)
	const bad = `{"total":"12,50","currency":"EUR"}`
	tests := []struct {
		name    string
		first   string
		wantFix []string
	}{
		{"schema failure", bad, []string{`- /total: expected number >= 0, got "12,50"`, "Fix only these fields", "whole corrected JSON object"}},
		{"grammar failure", "no JSON here, sorry", []string{"could not be parsed as JSON", "no JSON found"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			m := &scripted{script: []reply{{content: tt.first}, {content: `{"total":12.5,"currency":"EUR"}`}}}
			l, err := New(m, cliConfig)
			if err != nil {
				t.Fatal(err)
			}
			if res := l.Run(t.Context(), task); !res.OK() {
				t.Fatalf("Run: %s %s", res.Class, res.Reason)
			}
			reqs := m.requests()
			if len(reqs) != 2 {
				t.Fatalf("%d requests", len(reqs))
			}
			orig := Messages(task)
			if !reflect.DeepEqual(reqs[0].Messages, orig) {
				t.Errorf("first request is not the task:\n%v", reqs[0].Messages)
			}
			second := reqs[1].Messages
			if got, want := roles(second), []string{model.RoleSystem, model.RoleUser, model.RoleAssistant, model.RoleUser}; !slices.Equal(got, want) {
				t.Fatalf("roles = %v, want %v", got, want)
			}
			if !reflect.DeepEqual(second[:2], orig) {
				t.Errorf("second request does not start with the task")
			}
			if second[2].Content != tt.first {
				t.Errorf("assistant turn = %q, want the previous output %q", second[2].Content, tt.first)
			}
			for _, s := range tt.wantFix {
				if !strings.Contains(second[3].Content, s) {
					t.Errorf("feedback turn lacks %q:\n%s", s, second[3].Content)
				}
			}
		})
	}
}

func TestHistory(t *testing.T) {
	t.Parallel()
	outs := []string{`{"total":"a","currency":"EUR"}`, `{"total":"b","currency":"EUR"}`, `{"total":"c","currency":"EUR"}`}
	tests := []struct {
		history History
		// contents of the assistant turns of the third request
		want []string
	}{
		{"", outs[1:2]},
		{HistoryLatest, outs[1:2]},
		{HistoryAll, outs[0:2]},
	}
	for _, tt := range tests {
		t.Run(string(tt.history), func(t *testing.T) {
			t.Parallel()
			m := &scripted{script: []reply{{content: outs[0]}, {content: outs[1]}, {content: outs[2]}}}
			cfg := withAttempts(3)
			cfg.History = tt.history
			l, err := New(m, cfg)
			if err != nil {
				t.Fatal(err)
			}
			res := l.Run(t.Context(), testTask(t))
			if res.Class != job.ClassExhausted {
				t.Fatalf("class %s: %s", res.Class, res.Reason)
			}
			third := m.requests()[2].Messages
			var asst []string
			for i, msg := range third {
				if msg.Role == model.RoleAssistant {
					asst = append(asst, msg.Content)
					if next := third[i+1]; next.Role != model.RoleUser || !strings.Contains(next.Content, `got "`+msg.Content[10:11]+`"`) {
						t.Errorf("turn after %s is not its feedback: %q", msg.Content, next.Content)
					}
				}
			}
			if !slices.Equal(asst, tt.want) {
				t.Errorf("assistant turns = %v, want %v", asst, tt.want)
			}
			if len(third) != 2+2*len(tt.want) {
				t.Errorf("third request has %d messages, want %d", len(third), 2+2*len(tt.want))
			}
		})
	}
}

// TestTaskUnchanged: a healed run leaves the caller's task and the task
// messages as they were, even when the model scribbles on its requests.
func TestTaskUnchanged(t *testing.T) {
	t.Parallel()
	task := testTask(t)
	before := task
	rawBefore := slices.Clone(task.Schema.Raw)
	msgsBefore := Messages(task)
	m := &scripted{scribble: true, script: []reply{
		{content: `{"total":"x","currency":"EUR"}`},
		{content: `{"total":"y","currency":"EUR"}`},
		{content: `{"total":1,"currency":"EUR"}`},
	}}
	l, err := New(m, withAttempts(3))
	if err != nil {
		t.Fatal(err)
	}
	if res := l.Run(t.Context(), task); !res.OK() {
		t.Fatalf("Run: %s %s", res.Class, res.Reason)
	}
	if !reflect.DeepEqual(task, before) || !slices.Equal(task.Schema.Raw, rawBefore) {
		t.Error("the task changed")
	}
	if !reflect.DeepEqual(Messages(task), msgsBefore) {
		t.Error("the task messages changed")
	}
	for i, r := range m.requests() {
		if !reflect.DeepEqual(r.Messages[:2], msgsBefore) {
			t.Errorf("request %d does not carry the original task (a scribble leaked)", i+1)
		}
	}
}

func TestUsageKept(t *testing.T) {
	t.Parallel()
	m := &scripted{script: []reply{
		{content: `{"total":"x","currency":"EUR"}`, usage: model.Usage{PromptTokens: 100, CompletionTokens: 20, CachedTokens: 50}, retries: 2},
		{content: `{"total":1,"currency":"EUR"}`, usage: model.Usage{PromptTokens: 160, CompletionTokens: 15, ReasoningTokens: 7}},
	}}
	l, err := New(m, cliConfig)
	if err != nil {
		t.Fatal(err)
	}
	res := l.Run(t.Context(), testTask(t))
	if !res.OK() {
		t.Fatalf("Run: %s", res.Reason)
	}
	if got, want := res.Usage(), (model.Usage{PromptTokens: 260, CompletionTokens: 35, CachedTokens: 50, ReasoningTokens: 7}); got != want {
		t.Errorf("Usage = %+v, want %+v", got, want)
	}
	if got := res.HealUsage().Total(); got != 175 {
		t.Errorf("HealUsage total = %d, want 175", got)
	}
	if got := res.TransportRetries(); got != 2 || res.Attempts[0].TransportRetries != 2 {
		t.Errorf("TransportRetries = %d", got)
	}
	if res.Attempts[0].FinishReason != model.FinishStop {
		t.Errorf("finish reason = %q", res.Attempts[0].FinishReason)
	}
}

func TestRunCancelled(t *testing.T) {
	t.Parallel()
	entered := make(chan struct{})
	m := model.Func(func(ctx context.Context, req model.Request) (model.Response, error) {
		close(entered)
		<-ctx.Done()
		return model.Response{}, &model.Error{Kind: model.KindTransport, Provider: "sim", Message: ctx.Err().Error()}
	})
	l, err := New(m, cliConfig)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan Result, 1)
	go func() { done <- l.Run(ctx, testTask(t)) }()
	<-entered
	cancel()
	res := <-done
	if res.Class != job.ClassTransport || !errors.Is(res.Err, context.Canceled) {
		t.Errorf("got %s, %v; want transport with context.Canceled", res.Class, res.Err)
	}

	// Already cancelled: the model is never called.
	calls := 0
	l2, _ := New(model.Func(func(context.Context, model.Request) (model.Response, error) { calls++; return model.Response{}, nil }), cliConfig)
	ctx2, cancel2 := context.WithCancel(t.Context())
	cancel2()
	if res := l2.Run(ctx2, testTask(t)); res.Class != job.ClassTransport || calls != 0 || !errors.Is(res.Err, context.Canceled) {
		t.Errorf("pre-cancelled: class %s, %d calls, err %v", res.Class, calls, res.Err)
	}
}

func TestRunNoSchema(t *testing.T) {
	t.Parallel()
	m := &scripted{}
	l, _ := New(m, cliConfig)
	res := l.Run(t.Context(), Task{JobID: "x"})
	if res.Class != job.ClassRequest || res.Err == nil || len(m.requests()) != 0 {
		t.Errorf("got %s %v after %d calls", res.Class, res.Err, len(m.requests()))
	}
}

func TestNewValidatesConfig(t *testing.T) {
	t.Parallel()
	m := &scripted{}
	tests := []struct {
		name  string
		cfg   Config
		field string // "" means valid
	}{
		{"zero value", Config{}, ""},
		{"cli values", Config{MaxAttempts: 3, Temperature: 0.7, TemperatureStep: 0.2, TemperatureFloor: 0.1, MaxTokens: 2000, History: HistoryAll, MaxDiagnostics: 5}, ""},
		{"negative attempts", Config{MaxAttempts: -1}, "MaxAttempts"},
		{"negative temperature", Config{Temperature: -0.1}, "Temperature"},
		{"NaN step", Config{TemperatureStep: math.NaN()}, "TemperatureStep"},
		{"negative floor", Config{TemperatureFloor: -1}, "TemperatureFloor"},
		{"negative max tokens", Config{MaxTokens: -5}, "MaxTokens"},
		{"negative diagnostics", Config{MaxDiagnostics: -2}, "MaxDiagnostics"},
		{"unknown history", Config{History: "some"}, "History"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l, err := New(m, tt.cfg)
			if tt.field == "" {
				if err != nil {
					t.Fatalf("New: %v", err)
				}
				c := l.Config()
				if c.MaxAttempts < 1 || c.MaxDiagnostics < 1 || c.History == "" || c.Logger == nil {
					t.Errorf("defaults not applied: %+v", c)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.field) {
				t.Errorf("New: err = %v, want one naming %s", err, tt.field)
			}
		})
	}
	if _, err := New(nil, Config{}); err == nil {
		t.Error("New(nil model): want error")
	}
}

func TestTemperatureFor(t *testing.T) {
	t.Parallel()
	tests := []struct {
		cfg  Config
		n    int
		want float64
	}{
		{cliConfig, 1, 0.7}, {cliConfig, 2, 0.5}, {cliConfig, 3, 0.3}, {cliConfig, 4, 0.1}, {cliConfig, 9, 0.1},
		{cliConfig, 0, 0.7},
		{Config{Temperature: 1, TemperatureStep: 0.3}, 5, 0},
		{Config{Temperature: 0.2, TemperatureFloor: 0.5}, 1, 0.5},
		{Config{}, 3, 0},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%v/%d", tt.cfg.Temperature, tt.n), func(t *testing.T) {
			t.Parallel()
			if got := tt.cfg.TemperatureFor(tt.n); got != tt.want {
				t.Errorf("TemperatureFor(%d) = %v, want %v", tt.n, got, tt.want)
			}
		})
	}
}

func TestMessages(t *testing.T) {
	t.Parallel()
	task := testTask(t)
	msgs := Messages(task)
	if got := roles(msgs); !slices.Equal(got, []string{model.RoleSystem, model.RoleUser}) {
		t.Fatalf("roles = %v", got)
	}
	for _, s := range []string{string(task.Schema.Raw), "Receipt", "A shop receipt.", `"receipt"`, "no code fences"} {
		if !strings.Contains(msgs[0].Content, s) {
			t.Errorf("system turn lacks %q", s)
		}
	}
	for _, s := range []string{task.Input, task.Instructions, "Receipt"} {
		if !strings.Contains(msgs[1].Content, s) {
			t.Errorf("user turn lacks %q", s)
		}
	}
	task.Instructions = "  "
	if strings.Contains(Messages(task)[1].Content, "Additional instructions") {
		t.Error("blank instructions rendered")
	}
	msgs[0].Content = "changed"
	if Messages(testTask(t))[0].Content == "changed" {
		t.Error("Messages shares its slice")
	}
}

// TestSystemTurnPerSchema: one loop serves jobs of several schemas; each
// request carries exactly Messages(task), whatever the loop built before.
func TestSystemTurnPerSchema(t *testing.T) {
	t.Parallel()
	other, err := schemas.Compile("note", []byte(`{"title":"Note","type":"object","required":["text"],"properties":{"text":{"type":"string"}}}`))
	if err != nil {
		t.Fatal(err)
	}
	m := &scripted{script: []reply{{content: `{"total": 1, "currency": "EUR"}`}, {content: `{"text": "x"}`}, {content: `{"total": 2, "currency": "USD"}`}}}
	l, err := New(m, cliConfig)
	if err != nil {
		t.Fatal(err)
	}
	tasks := []Task{testTask(t), {JobID: "job-2", Schema: other, Input: "x"}, testTask(t)}
	for _, task := range tasks {
		if res := l.Run(context.Background(), task); !res.OK() {
			t.Fatalf("job %s: %s %s", task.JobID, res.Class, res.Reason)
		}
	}
	reqs := m.requests()
	for i, task := range tasks {
		want := Messages(task)
		if !reflect.DeepEqual(reqs[i].Messages, want) {
			t.Errorf("request %d messages differ from Messages(task):\n got %+v\nwant %+v", i, reqs[i].Messages, want)
		}
	}
	if reqs[0].Messages[0].Content == reqs[1].Messages[0].Content {
		t.Errorf("two schemas got the same system turn")
	}
}
