package heal

import (
	"strings"
	"testing"

	"github.com/llmpipeline/pipeline/job"
	"github.com/llmpipeline/pipeline/model"
)

// chainConfig is the CLI's config with a primary "p" of n attempts and
// one fallback "f" of fn attempts.
func chainConfig(n int, fb *scripted, fn int) Config {
	c := withAttempts(n)
	c.Model = "openai:p"
	c.Fallbacks = []Fallback{{Name: "openai:f", Model: fb, Attempts: fn}}
	return c
}

func models(as []Attempt) string {
	out := make([]string, len(as))
	for i, a := range as {
		out[i] = a.Model
	}
	return strings.Join(out, ",")
}

func TestFallback(t *testing.T) {
	bad := reply{content: `{"total": "12,50", "currency": "EUR"}`}
	bad2 := reply{content: `{"total": -1, "currency": "EUR"}`}
	good := reply{content: `{"total": 12.5, "currency": "EUR"}`}
	transport := reply{err: &model.Error{Kind: model.KindTransport, Provider: "openai", Message: "circuit breaker open after repeated transport failures"}}
	request := reply{err: &model.Error{Kind: model.KindRequest, Provider: "openai", StatusCode: 400, Message: "context_length_exceeded"}}
	auth := reply{err: &model.Error{Kind: model.KindAuth, Provider: "openai", StatusCode: 401}}
	notFound := reply{err: &model.Error{Kind: model.KindNotFound, Provider: "openai", StatusCode: 404, Message: "The model `p` does not exist"}}

	cases := []struct {
		name      string
		primary   []reply
		fallback  []reply
		fbAtt     int
		class     job.Class
		models    string // the model of each attempt
		final     string // Result.Model
		skipped   int
		fbTurns   int // messages in the fallback's first request
		primCalls int
	}{
		{name: "exhausted primary, fallback heals", primary: []reply{bad, bad2}, fallback: []reply{good},
			class: job.ClassNone, models: "openai:p,openai:p,openai:f", final: "openai:f", fbTurns: 4, primCalls: 2},
		{name: "no progress on primary, fallback heals", primary: []reply{bad, bad}, fallback: []reply{good},
			class: job.ClassNone, models: "openai:p,openai:p,openai:f", final: "openai:f", fbTurns: 4, primCalls: 2},
		{name: "primary unavailable, fallback answers first", primary: []reply{transport}, fallback: []reply{good},
			class: job.ClassNone, models: "openai:f", final: "openai:f", skipped: 1, fbTurns: 2, primCalls: 1},
		{name: "context window exceeded on the primary", primary: []reply{request}, fallback: []reply{good},
			class: job.ClassNone, models: "openai:f", final: "openai:f", skipped: 1, fbTurns: 2, primCalls: 1},
		{name: "unavailable after a failed attempt: the conversation goes on", primary: []reply{bad, transport}, fallback: []reply{good},
			class: job.ClassNone, models: "openai:p,openai:f", final: "openai:f", skipped: 1, fbTurns: 4, primCalls: 2},
		{name: "primary answers: fallback never called", primary: []reply{good}, fallback: nil,
			class: job.ClassNone, models: "openai:p", final: "openai:p", primCalls: 1},
		{name: "both exhausted", primary: []reply{bad, bad2}, fallback: []reply{bad, bad2}, fbAtt: 2,
			class: job.ClassExhausted, models: "openai:p,openai:p,openai:f,openai:f", final: "openai:f", fbTurns: 4, primCalls: 2},
		{name: "no such model on the primary, fallback answers", primary: []reply{notFound}, fallback: []reply{good},
			class: job.ClassNone, models: "openai:f", final: "openai:f", skipped: 1, fbTurns: 2, primCalls: 1},
		{name: "no such model on either", primary: []reply{notFound}, fallback: []reply{notFound},
			class: job.ClassNotFound, models: "", final: "openai:p", skipped: 1, fbTurns: 2, primCalls: 1},
		{name: "auth stops, no fallback", primary: []reply{auth}, fallback: nil,
			class: job.ClassAuth, models: "", final: "openai:p", primCalls: 1},
		{name: "fallback unavailable too", primary: []reply{transport}, fallback: []reply{transport},
			class: job.ClassTransport, models: "", final: "openai:p", skipped: 1, fbTurns: 2, primCalls: 1},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			p := &scripted{script: c.primary}
			f := &scripted{script: c.fallback}
			l, err := New(p, chainConfig(2, f, c.fbAtt))
			if err != nil {
				t.Fatal(err)
			}
			res := l.Run(t.Context(), testTask(t))
			if res.Class != c.class {
				t.Fatalf("class %q (%s), want %q", res.Class, res.Reason, c.class)
			}
			if got := models(res.Attempts); got != c.models {
				t.Errorf("attempt models %q, want %q", got, c.models)
			}
			for i, a := range res.Attempts {
				if a.N != i+1 {
					t.Errorf("attempt %d numbered %d: numbers run on across the chain", i+1, a.N)
				}
			}
			if res.Model != c.final {
				t.Errorf("final model %q, want %q", res.Model, c.final)
			}
			if len(res.Skipped) != c.skipped {
				t.Errorf("skipped %+v, want %d", res.Skipped, c.skipped)
			}
			if got := len(p.requests()); got != c.primCalls {
				t.Errorf("primary called %d times, want %d", got, c.primCalls)
			}
			fr := f.requests()
			if c.fbTurns > 0 {
				if len(fr) == 0 {
					t.Fatal("fallback never called")
				}
				if got := len(fr[0].Messages); got != c.fbTurns {
					t.Errorf("fallback's first request has %d messages %v, want %d", got, roles(fr[0].Messages), c.fbTurns)
				}
				if fr[0].Temperature != 0.7 {
					t.Errorf("fallback starts at temperature %v, want its first (0.7)", fr[0].Temperature)
				}
			} else if len(fr) > 0 {
				t.Errorf("fallback called %d times, want none", len(fr))
			}
		})
	}
}

func TestFallbackExhaustedReasonNamesModels(t *testing.T) {
	bad := reply{content: `{"total": "x", "currency": "EUR"}`}
	bad2 := reply{content: `{"total": "y", "currency": "EUR"}`}
	f := &scripted{script: []reply{bad2}}
	l, err := New(&scripted{script: []reply{bad, bad2}}, chainConfig(2, f, 0))
	if err != nil {
		t.Fatal(err)
	}
	res := l.Run(t.Context(), testTask(t))
	if res.Class != job.ClassExhausted || !strings.Contains(res.Reason, "3 attempts (2 openai:p, 1 openai:f) used") {
		t.Errorf("class %q reason %q; want exhausted naming the attempts per model", res.Class, res.Reason)
	}
	if !strings.Contains(res.Hint, "--fallback-attempts") {
		t.Errorf("hint %q does not name --fallback-attempts", res.Hint)
	}
}

func TestNewRefusesANilFallback(t *testing.T) {
	c := withAttempts(1)
	c.Fallbacks = []Fallback{{Name: "openai:f"}}
	if _, err := New(&scripted{}, c); err == nil || !strings.Contains(err.Error(), "fallback 0 (openai:f)") {
		t.Errorf("New: %v, want an error naming the fallback", err)
	}
}
