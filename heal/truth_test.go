package heal_test

import (
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/heal"
	"github.com/llmpipeline/pipeline/job"
	"github.com/llmpipeline/pipeline/llm"
	"github.com/llmpipeline/pipeline/schemas"
)

// truthInvoice grounds the vendor and checks the total.
const truthInvoice = `{"type":"object","required":["vendor","subtotal","tax","total"],"additionalProperties":false,
	"properties":{"vendor":{"type":"string","x-grounded":true},"subtotal":{"type":"number"},"tax":{"type":"number"},"total":{"type":"number"}},
	"x-rules":[{"rule":"self.total == self.subtotal + self.tax","message":"total must be subtotal + tax","path":"/total"}]}`

const truthInput = "Rechnung von Müller & Söhne GmbH 🧾 — Zwischensumme 100, MwSt 19, Gesamt 119."

// TestLoopHealsTruthFailures: an ungrounded value and a failing rule go
// back to the model as a heal turn with path, keyword and message, like a
// schema failure, through the real OpenAI client; a value never grounded
// stops at the attempt ceiling or the no-progress stop.
func TestLoopHealsTruthFailures(t *testing.T) {
	t.Parallel()
	s, err := schemas.Compile("truth", []byte(truthInvoice))
	if err != nil {
		t.Fatal(err)
	}
	const (
		good      = `{"vendor":"Müller & Söhne GmbH","subtotal":100,"tax":19,"total":119}`
		madeUp    = `{"vendor":"Mueller and Sons Ltd","subtotal":100,"tax":19,"total":119}`
		madeUp2   = `{"vendor":"Muller Sons","subtotal":100,"tax":19,"total":119}`
		wrongSum  = `{"vendor":"Müller & Söhne GmbH","subtotal":100,"tax":19,"total":100}`
		caseShift = `{"vendor":"MÜLLER & SÖHNE  GMBH","subtotal":100,"tax":19,"total":119}`
	)
	ok := func(content string) answer { return answer{status: 200, content: content, finish: "stop"} }
	tests := []struct {
		name     string
		script   []answer
		class    job.Class
		attempts int
		feedback []string // in the second request's last turn
		match    string
	}{
		{name: "an ungrounded value is healed", script: []answer{ok(madeUp), ok(good)}, class: job.ClassNone, attempts: 2, match: schemas.MatchExact,
			feedback: []string{`- /vendor [x-grounded]: "Mueller and Sons Ltd" not found in the input: quote the document exactly, or return null if it says nothing`}},
		{name: "a failing rule is healed", script: []answer{ok(wrongSum), ok(good)}, class: job.ClassNone, attempts: 2, match: schemas.MatchExact,
			feedback: []string{`- /total [x-rules/0]: total must be subtotal + tax (rule: self.total == self.subtotal + self.tax), got 100`}},
		{name: "a normalised match is grounded at once", script: []answer{ok(caseShift)}, class: job.ClassNone, attempts: 1, match: schemas.MatchNormalized},
		{name: "never grounded: no progress", script: []answer{ok(madeUp), ok(madeUp), ok(good)}, class: job.ClassNoProgress, attempts: 2},
		{name: "never grounded: the attempt ceiling", script: []answer{ok(madeUp), ok(madeUp2), ok(good)}, class: job.ClassExhausted, attempts: 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := &openAIServer{script: slices.Clone(tt.script)}
			ts := httptest.NewServer(srv)
			t.Cleanup(ts.Close)
			m, err := llm.NewOpenAI(llm.Config{BaseURL: ts.URL + "/v1", APIKey: "sk-test", Model: "gpt-test",
				BackoffBase: time.Millisecond, BackoffMax: 10 * time.Millisecond, Timeout: 10 * time.Second})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = m.Close() })
			loop, err := heal.New(m, heal.Config{MaxAttempts: 2})
			if err != nil {
				t.Fatal(err)
			}
			res := loop.Run(t.Context(), heal.Task{JobID: "inv-1", Schema: s, Input: truthInput})
			if res.Class != tt.class || len(res.Attempts) != tt.attempts {
				t.Fatalf("class %q after %d attempts, want %q after %d (%s)", res.Class, len(res.Attempts), tt.class, tt.attempts, res.Reason)
			}
			bodies, _ := srv.requests()
			if sys := bodies[0].Messages[0].Content; !strings.Contains(sys, `must be quoted from the text exactly`) || !strings.Contains(sys, `CEL expression`) {
				t.Errorf("the system turn does not explain the truth keywords:\n%s", sys)
			}
			if len(bodies) != tt.attempts {
				t.Fatalf("%d model calls, want %d (the ceiling counts truth failures)", len(bodies), tt.attempts)
			}
			if tt.attempts > 1 {
				last := bodies[1].Messages[len(bodies[1].Messages)-1].Content
				for _, f := range tt.feedback {
					if !strings.Contains(last, f) {
						t.Errorf("heal turn lacks\n%s\ngot\n%s", f, last)
					}
				}
				if a := res.Attempts[0]; a.Class != job.ClassSchema || len(a.Diagnostics) != 1 {
					t.Errorf("first attempt: class %q, diagnostics %+v", a.Class, a.Diagnostics)
				}
			}
			if tt.class != job.ClassNone {
				if !strings.Contains(res.Reason, "/vendor (x-grounded)") {
					t.Errorf("reason %q does not name the ungrounded field", res.Reason)
				}
				return
			}
			if len(res.Grounding) != 1 {
				t.Fatalf("grounding %+v, want the vendor", res.Grounding)
			}
			g := res.Grounding[0]
			if r := []rune(truthInput); g.Path != "/vendor" || g.Match != tt.match || string(r[g.Start:g.End]) != "Müller & Söhne GmbH" {
				t.Errorf("grounding %+v slices %q", g, string([]rune(truthInput)[g.Start:g.End]))
			}
		})
	}
}
