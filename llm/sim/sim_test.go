package sim

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/model"
)

func newTestSim(t testing.TB, cfg Config) *Model {
	t.Helper()
	s, err := New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func firstTurn(s testSchema, job string) model.Request {
	return model.Request{
		Messages: []model.Message{
			{Role: "system", Content: "You extract data as JSON matching the schema."},
			{Role: "user", Content: "Extract the " + s.name + " from: ..."},
		},
		Temperature: 0.7,
		Schema:      s.raw,
		SchemaID:    s.name,
		JobID:       job,
		Attempt:     1,
	}
}

func healTurn(first model.Request, prev, fb string) model.Request {
	r := first
	r.Messages = append(slices.Clone(first.Messages),
		model.Message{Role: "assistant", Content: prev},
		model.Message{Role: "user", Content: fb})
	r.Attempt = first.Attempt + 1
	r.Temperature = 0.5
	return r
}

func complete(t testing.TB, m model.Model, req model.Request) model.Response {
	t.Helper()
	resp, err := m.Complete(t.Context(), req)
	if err != nil {
		t.Fatalf("complete %s attempt %d: %v", req.JobID, req.Attempt, err)
	}
	return resp
}

const jobs = 150

func TestSimGeneratesValidInstances(t *testing.T) {
	t.Parallel()
	for _, name := range []string{"invoice", "kitchen"} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := loadSchema(t, name)
			sim := newTestSim(t, Config{Seed: 7})
			for i := range jobs {
				resp := complete(t, sim, firstTurn(s, fmt.Sprintf("job-%d", i)))
				if ds := s.diagnostics(t, resp.Content); ds != nil {
					t.Fatalf("job-%d: invalid instance %v:\n%s", i, ds, resp.Content)
				}
				if resp.FinishReason != model.FinishStop || resp.Usage.PromptTokens <= 0 || resp.Usage.CompletionTokens <= 0 {
					t.Fatalf("job-%d: finish %q usage %+v", i, resp.FinishReason, resp.Usage)
				}
			}
		})
	}
}

func TestSimNeverSatisfiesPattern(t *testing.T) {
	t.Parallel()
	s := loadSchema(t, "contact")
	sim := newTestSim(t, Config{Seed: 3, FixRate: 1})
	want := []diag{{"/country_code", "pattern"}, {"/phone", "pattern"}}
	for i := range jobs {
		first := firstTurn(s, fmt.Sprintf("c-%d", i))
		resp := complete(t, sim, first)
		ds := s.diagnostics(t, resp.Content)
		if !slices.Equal(ds, want) {
			t.Fatalf("c-%d: diagnostics %v, want %v:\n%s", i, ds, want, resp.Content)
		}
		// Told about it, with a fix rate of 1, it still writes a plain word.
		again := complete(t, sim, healTurn(first, resp.Content, feedback(ds)))
		if ds := s.diagnostics(t, again.Content); !slices.Equal(ds, want) {
			t.Fatalf("c-%d heal turn: diagnostics %v, want %v:\n%s", i, ds, want, again.Content)
		}
	}
}

var trailingComma = regexp.MustCompile(`,(\s*[}\]])`)

func TestSimFaults(t *testing.T) {
	t.Parallel()
	s := loadSchema(t, "invoice")
	hasKeyword := func(kw string) func(t *testing.T, out string) {
		return func(t *testing.T, out string) {
			ds := s.diagnostics(t, out)
			for _, d := range ds {
				if d.keyword == kw {
					return
				}
			}
			t.Fatalf("no %s diagnostic in %v:\n%s", kw, ds, out)
		}
	}
	tests := []struct {
		name  string
		cfg   Config
		check func(t *testing.T, out string)
	}{
		{"fence", Config{FenceRate: 1}, func(t *testing.T, out string) {
			inner, ok := strings.CutPrefix(out, "```json\n")
			inner, ok2 := strings.CutSuffix(inner, "\n```")
			if !ok || !ok2 {
				t.Fatalf("not fenced:\n%s", out)
			}
			if ds := s.diagnostics(t, inner); ds != nil {
				t.Fatalf("fenced JSON invalid: %v", ds)
			}
		}},
		{"prose", Config{ProseRate: 1}, func(t *testing.T, out string) {
			i, j := strings.Index(out, "{"), strings.LastIndex(out, "}")
			if i <= 0 || j == len(out)-1 || json.Valid([]byte(out)) {
				t.Fatalf("no prose around:\n%s", out)
			}
			if ds := s.diagnostics(t, out[i:j+1]); ds != nil {
				t.Fatalf("JSON inside prose invalid: %v", ds)
			}
		}},
		{"trailing comma", Config{TrailingCommaRate: 1}, func(t *testing.T, out string) {
			if json.Valid([]byte(out)) || !trailingComma.MatchString(out) {
				t.Fatalf("no trailing comma:\n%s", out)
			}
			if ds := s.diagnostics(t, trailingComma.ReplaceAllString(out, "$1")); ds != nil {
				t.Fatalf("JSON invalid once the comma is gone: %v", ds)
			}
		}},
		{"wrong type", Config{WrongTypeRate: 1}, func(t *testing.T, out string) {
			hasKeyword("type")(t, out)
			if !regexp.MustCompile(`"\d+,\d\d"`).MatchString(out) && !regexp.MustCompile(`: "\d+"`).MatchString(out) {
				t.Fatalf("no number written as a string:\n%s", out)
			}
		}},
		{"missing required", Config{MissingRequiredRate: 1}, hasKeyword("required")},
		{"enum near-miss", Config{EnumNearMissRate: 1}, func(t *testing.T, out string) {
			hasKeyword("enum")(t, out)
			if !regexp.MustCompile(`"currency": "(eur|usd|gbp|chf)"`).MatchString(out) {
				t.Fatalf("currency not in the wrong case:\n%s", out)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			sim := newTestSim(t, tt.cfg)
			for i := range 40 {
				tt.check(t, complete(t, sim, firstTurn(s, fmt.Sprintf("f-%d", i))).Content)
			}
		})
	}
}

func TestSimHealsNamedPaths(t *testing.T) {
	t.Parallel()
	faulty := Config{WrongTypeRate: 1, MissingRequiredRate: 1, EnumNearMissRate: 1}
	tests := []struct {
		name    string
		fixRate float64
		fixed   bool
	}{
		{"fix rate 1 fixes every path", 1, true},
		{"fix rate 0 repeats the output", 0, false},
	}
	for _, name := range []string{"invoice", "kitchen"} {
		s := loadSchema(t, name)
		for _, tt := range tests {
			t.Run(name+"/"+tt.name, func(t *testing.T) {
				t.Parallel()
				cfg := faulty
				cfg.FixRate = tt.fixRate
				sim := newTestSim(t, cfg)
				for i := range 60 {
					first := firstTurn(s, fmt.Sprintf("h-%d", i))
					out := complete(t, sim, first).Content
					ds := s.diagnostics(t, out)
					if ds == nil {
						t.Fatalf("h-%d: first answer valid despite fault rates 1:\n%s", i, out)
					}
					second := healTurn(first, out, feedback(ds))
					again := complete(t, sim, second).Content
					got := s.diagnostics(t, again)
					if tt.fixed && got != nil {
						t.Fatalf("h-%d: still invalid after heal %v (was %v):\nbefore:\n%s\nafter:\n%s", i, got, ds, out, again)
					}
					if !tt.fixed && again != out {
						t.Fatalf("h-%d: fix rate 0 changed the output:\nbefore:\n%s\nafter:\n%s", i, out, again)
					}
				}
			})
		}
	}
}

func TestSimHealTurnAfterGrammarFailure(t *testing.T) {
	t.Parallel()
	s := loadSchema(t, "invoice")
	sim := newTestSim(t, Config{FixRate: 1})
	first := firstTurn(s, "g-1")
	req := healTurn(first, "Sorry, I cannot help with that.", "Your answer held no JSON. Return the JSON object only.")
	out := complete(t, sim, req).Content
	if ds := s.diagnostics(t, out); ds != nil {
		t.Fatalf("invalid after a grammar heal turn: %v\n%s", ds, out)
	}
}

func TestSimDeterminism(t *testing.T) {
	t.Parallel()
	s := loadSchema(t, "invoice")
	cfg := DefaultConfig()
	cfg.Latency = 0
	a, b := newTestSim(t, cfg), newTestSim(t, cfg)
	cfg.Seed++
	c := newTestSim(t, cfg)
	differSeed, differAttempt := 0, 0
	for i := range 30 {
		req := firstTurn(s, fmt.Sprintf("d-%d", i))
		ra, rb, rc := complete(t, a, req).Content, complete(t, b, req).Content, complete(t, c, req).Content
		if ra != rb {
			t.Fatalf("d-%d: same seed, different outputs:\n%s\n---\n%s", i, ra, rb)
		}
		if ra != rc {
			differSeed++
		}
		req.Attempt = 2
		if complete(t, a, req).Content != ra {
			differAttempt++
		}
	}
	if differSeed == 0 || differAttempt == 0 {
		t.Fatalf("outputs ignore the seed (%d differ) or the attempt (%d differ)", differSeed, differAttempt)
	}
}

func TestSimForce(t *testing.T) {
	t.Parallel()
	s := loadSchema(t, "invoice")
	tests := []struct {
		force  string
		kind   model.ErrorKind
		status int
		check  func(t *testing.T, sim *Model)
	}{
		{force: ForceTransport, kind: model.KindTransport, status: 503},
		{force: ForceAuth, kind: model.KindAuth, status: 401},
		{force: ForceRequest, kind: model.KindRequest, status: 400},
		{force: ForceTruncated, check: func(t *testing.T, sim *Model) {
			resp := complete(t, sim, firstTurn(s, "t-1"))
			if resp.FinishReason != model.FinishLength || resp.RawFinishReason != "length" {
				t.Fatalf("finish %q/%q, want length", resp.FinishReason, resp.RawFinishReason)
			}
			if json.Valid([]byte(resp.Content)) || !strings.HasPrefix(resp.Content, "{") {
				t.Fatalf("not a cut JSON document:\n%s", resp.Content)
			}
		}},
		{force: ForceGrammar, check: func(t *testing.T, sim *Model) {
			first := firstTurn(s, "g-1")
			a := complete(t, sim, first).Content
			b := complete(t, sim, healTurn(first, a, "No JSON found. Return the JSON object only.")).Content
			if strings.ContainsAny(a+b, "{[") {
				t.Fatalf("grammar output holds JSON: %q %q", a, b)
			}
			if a == b {
				t.Fatalf("grammar output repeats itself (that is no_progress): %q", a)
			}
		}},
		{force: ForceNoProgress, check: func(t *testing.T, sim *Model) {
			first := firstTurn(s, "n-1")
			a := complete(t, sim, first).Content
			ds := s.diagnostics(t, a)
			if ds == nil {
				t.Fatalf("no_progress first answer is valid:\n%s", a)
			}
			if b := complete(t, sim, healTurn(first, a, feedback(ds))).Content; b != a {
				t.Fatalf("no_progress heal turn changed the output:\n%s\n---\n%s", a, b)
			}
		}},
	}
	for _, tt := range tests {
		t.Run(tt.force, func(t *testing.T) {
			t.Parallel()
			sim := newTestSim(t, Config{Force: tt.force, FixRate: 1})
			if tt.check != nil {
				tt.check(t, sim)
				return
			}
			_, err := sim.Complete(t.Context(), firstTurn(s, "e-1"))
			var he *model.Error
			if !errors.As(err, &he) || he.Kind != tt.kind || he.StatusCode != tt.status || he.Provider != "sim" {
				t.Fatalf("err = %#v, want *model.Error kind %s status %d", err, tt.kind, tt.status)
			}
		})
	}
}

func TestSimMaxTokensTruncates(t *testing.T) {
	t.Parallel()
	s := loadSchema(t, "invoice")
	sim := newTestSim(t, Config{})
	req := firstTurn(s, "m-1")
	req.MaxTokens = 20
	resp := complete(t, sim, req)
	if resp.FinishReason != model.FinishLength || len(resp.Content) > 80 || json.Valid([]byte(resp.Content)) {
		t.Fatalf("finish %q, %d bytes: %q", resp.FinishReason, len(resp.Content), resp.Content)
	}
}

func TestSimLatencyHonoursContext(t *testing.T) {
	t.Parallel()
	s := loadSchema(t, "invoice")
	sim := newTestSim(t, Config{Latency: time.Hour})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, err := sim.Complete(ctx, firstTurn(s, "l-1"))
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("err = %v, want context.Canceled", err)
	}
}

func TestSimDoesNotModifyRequest(t *testing.T) {
	t.Parallel()
	s := loadSchema(t, "invoice")
	sim := newTestSim(t, Config{WrongTypeRate: 1, FixRate: 1})
	first := firstTurn(s, "r-1")
	out := complete(t, sim, first).Content
	req := healTurn(first, out, feedback(s.diagnostics(t, out)))
	before := slices.Clone(req.Messages)
	schema := string(req.Schema)
	complete(t, sim, req)
	if !reflect.DeepEqual(before, req.Messages) || string(req.Schema) != schema {
		t.Fatal("the request was modified")
	}
}

func TestSimRequestErrors(t *testing.T) {
	t.Parallel()
	sim := newTestSim(t, Config{})
	tests := []struct {
		name   string
		schema string
	}{
		{"no schema", ""},
		{"not JSON", "{type: object"},
		{"trailing data", `{"type":"object"} x`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			_, err := sim.Complete(t.Context(), model.Request{Schema: json.RawMessage(tt.schema), JobID: "x"})
			if model.KindOf(err) != model.KindRequest {
				t.Fatalf("err = %v, want request_error", err)
			}
		})
	}
}

func TestNewSimRejectsBadConfig(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		cfg  Config
	}{
		{"rate above one", Config{FenceRate: 1.5}},
		{"negative rate", Config{FixRate: -0.1}},
		{"unknown force", Config{Force: "explode"}},
		{"negative latency", Config{Latency: -time.Second}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if _, err := New(tt.cfg); !errors.Is(err, ErrConfig) {
				t.Fatalf("err = %v, want ErrConfig", err)
			}
		})
	}
}

func TestFeedbackPaths(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, in string
		want     []string
	}{
		{"diagnostic lines", "Fix these:\n- /items/2/price: expected number > 0, got \"12,50\"\n- /currency: expected one of \"EUR\", \"USD\", got \"eur\"\n", []string{"/items/2/price", "/currency"}},
		{"root", "- (root): expected object, got array\n", []string{""}},
		{"slash root", "- /: expected object\n", []string{""}},
		{"backticks and stars", "* `/vendor/name`: required\n", []string{"/vendor/name"}},
		{"escaped pointer kept", "- /a~1b/c~0d: expected string\n", []string{"/a~1b/c~0d"}},
		{"duplicates dropped", "- /a: x\n- /a: y\n", []string{"/a"}},
		{"prose ignored", "Return the whole object.\n- not a path: x\n", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := feedbackPaths(tt.in); !slices.Equal(got, tt.want) {
				t.Fatalf("feedbackPaths = %q, want %q", got, tt.want)
			}
		})
	}
}

func FuzzFeedbackPaths(f *testing.F) {
	f.Add("- /items/2/price: expected number > 0, got \"12,50\"\n")
	f.Add("- (root): x\n* `/a`:\n")
	f.Fuzz(func(t *testing.T, in string) {
		for _, p := range feedbackPaths(in) {
			if p != "" && !strings.HasPrefix(p, "/") {
				t.Fatalf("path %q is not a JSON Pointer", p)
			}
		}
	})
}

func FuzzSimSchema(f *testing.F) {
	for _, name := range []string{"invoice", "kitchen", "contact"} {
		f.Add(loadSchema(f, name).raw, "- /a: x\n")
	}
	f.Add([]byte(`{"$ref":"#"}`), "- /: x")
	f.Add([]byte(`{"type":"array","items":{"$ref":"#"},"minItems":3}`), "- /0/0: x")
	f.Add([]byte(`{"allOf":[{"$ref":"#/allOf/0"}]}`), "")
	f.Add([]byte(`{"type":"integer","minimum":5,"maximum":1}`), "")
	f.Add([]byte(`true`), "")
	f.Fuzz(func(t *testing.T, schema []byte, fb string) {
		sim, err := New(Config{Seed: 1, WrongTypeRate: 0.5, MissingRequiredRate: 0.5, FixRate: 1, TrailingCommaRate: 0.5})
		if err != nil {
			t.Fatal(err)
		}
		req := model.Request{Schema: schema, JobID: "fuzz", Attempt: 1,
			Messages: []model.Message{{Role: "user", Content: "x"}}}
		resp, err := sim.Complete(t.Context(), req)
		if err != nil {
			if model.KindOf(err) != model.KindRequest {
				t.Fatalf("unexpected error kind: %v", err)
			}
			return
		}
		req.Messages = append(req.Messages, model.Message{Role: "assistant", Content: resp.Content}, model.Message{Role: "user", Content: fb})
		req.Attempt = 2
		if _, err := sim.Complete(t.Context(), req); err != nil {
			t.Fatalf("heal turn: %v", err)
		}
	})
}

func FuzzLenientParse(f *testing.F) {
	f.Add("Here you go:\n```json\n{\"a\": [1, 2,],}\n```")
	f.Add(`{"s": "a,}"}`)
	f.Add("[")
	f.Fuzz(func(t *testing.T, in string) {
		v, ok := lenientParse(in)
		if json.Valid([]byte(in)) && strings.HasPrefix(strings.TrimSpace(in), "{") && strings.HasSuffix(strings.TrimSpace(in), "}") && !ok {
			t.Fatalf("valid JSON object %q not parsed", in)
		}
		if ok {
			w := writer{}
			w.value(v, 0)
			if !json.Valid(w.buf) {
				t.Fatalf("re-serialised value is not JSON: %q", w.buf)
			}
		}
	})
}
