package worker

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/llmpipeline/pipeline/heal"
	"github.com/llmpipeline/pipeline/internal/queue"
	"github.com/llmpipeline/pipeline/job"
	"github.com/llmpipeline/pipeline/model"
	"github.com/llmpipeline/pipeline/schemas"
)

func TestBudget(t *testing.T) {
	t.Parallel()
	if b, err := NewBudget(0, 0); b != nil || err != nil {
		t.Errorf("no limits: %v, %v; want no budget", b, err)
	}
	if _, err := NewBudget(-1, 0); err == nil {
		t.Error("a negative budget was accepted")
	}
	b, err := NewBudget(1, 0)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for range 9 {
		wg.Go(func() { b.Add(0.1, 100) })
	}
	wg.Wait()
	if b.Reached() {
		t.Fatalf("reached at $0.9 of $1")
	}
	b.Add(0.1, 100)
	err = b.Err()
	if !errors.Is(err, ErrBudget) || err.Error() != "budget reached: $1 of $1 spent" {
		t.Errorf("at $1 of $1: %v", err)
	}
	tb, _ := NewBudget(0, 1000)
	tb.Add(0, 999)
	if tb.Reached() {
		t.Fatal("reached at 999 of 1000 tokens")
	}
	tb.Add(0, 1)
	if err := tb.Err(); err == nil || err.Error() != "budget reached: 1000 of 1000 tokens spent" {
		t.Errorf("at 1000 tokens: %v", err)
	}
}

func TestBudgetGate(t *testing.T) {
	t.Parallel()
	b, _ := NewBudget(1, 0)
	inner := 0
	g := b.gate(func(context.Context) error { inner++; return nil })
	if err := g(t.Context()); err != nil || inner != 1 {
		t.Fatalf("under the budget: %v, inner gate called %d times", err, inner)
	}
	// Reached while the inner gate waited (a breaker's cool-down).
	g = b.gate(func(context.Context) error { b.Add(1, 0); return nil })
	if err := g(t.Context()); !errors.Is(err, ErrBudget) {
		t.Errorf("reached during the inner gate: %v, want the budget error", err)
	}
	var none *Budget
	if none.gate(nil) != nil {
		t.Error("no budget, no gate: want the inner gate (nil)")
	}
}

func TestAnyGate(t *testing.T) {
	t.Parallel()
	closed := func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
	open := func(context.Context) error { return nil }
	if err := AnyGate(closed, open)(t.Context()); err != nil {
		t.Errorf("one gate open: %v, want open", err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := AnyGate(closed, closed)(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("every gate closed, ctx done: %v", err)
	}
	broken := errors.New("store failing")
	if err := AnyGate(func(context.Context) error { return broken }, func(context.Context) error { return broken })(t.Context()); !errors.Is(err, broken) {
		t.Errorf("every gate failed: %v", err)
	}
	if AnyGate(closed, nil) != nil {
		t.Error("a nil gate is open: the whole gate must be")
	}
}

// pricedModel answers a valid ticket on its second call, and counts the
// tokens of each.
type pricedModel struct{ calls int }

func (m *pricedModel) Complete(_ context.Context, req model.Request) (model.Response, error) {
	m.calls++
	content := `{"subject": "x"}`
	if m.calls%2 == 0 {
		content = `{"subject": "Cannot log in", "priority": "high", "category": "account", "customer": {"name": "Ana", "email": "ana@example.com"}}`
	}
	return model.Response{Content: content, FinishReason: model.FinishStop, Usage: model.Usage{PromptTokens: 1000, CompletionTokens: 500}}, nil
}

// TestHandlerPricesEveryAttempt: each attempt of the trace carries its
// model and its cost, the outcome their sum; and once the budget is
// reached a job is handed back unstarted, the model not called.
func TestHandlerPricesEveryAttempt(t *testing.T) {
	t.Parallel()
	reg, err := schemas.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	pm := &pricedModel{}
	loop, err := heal.New(pm, heal.Config{MaxAttempts: 2, Model: "openai:m"})
	if err != nil {
		t.Fatal(err)
	}
	budget, _ := NewBudget(0.5, 0)
	m := NewMetrics(prometheus.NewRegistry())
	cost := func(spec string, u model.Usage) (float64, bool) {
		return float64(u.Total()) / 10000, spec == "openai:m" // $0.15 a call
	}
	h, err := New(Config{Schemas: reg, Loop: loop, Model: "openai:m", Cost: cost, Budget: budget, Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	data := []byte(`{"id":"t-1","schema":"ticket","input":"x"}`)
	d := &queue.Delivery{Data: data, SchemaToken: "ticket", MsgID: "t-1", NumDelivered: 1, MaxDeliver: 5}
	d.Job, d.JobErr = job.Parse(data)
	out := h.Handle(t.Context(), d)
	if out.Action != queue.ActionResult {
		t.Fatalf("action %d (%s), want a result", out.Action, out.Reason)
	}
	o := out.Record.(*job.Outcome)
	if len(o.Trace) != 2 {
		t.Fatalf("%d attempts, want 2", len(o.Trace))
	}
	for _, a := range o.Trace {
		if a.Model != "openai:m" || a.CostUSD == nil || *a.CostUSD != 0.15 {
			t.Errorf("attempt %d: model %q, cost %v; want openai:m at $0.15", a.N, a.Model, a.CostUSD)
		}
	}
	if o.CostUSD == nil || *o.CostUSD != 0.3 || o.Model != "openai:m" {
		t.Errorf("outcome cost %v model %q, want $0.3 of openai:m", o.CostUSD, o.Model)
	}

	budget.Add(0.5, 0)
	calls := pm.calls
	out = h.Handle(t.Context(), d)
	if out.Action != queue.ActionRetry || !strings.Contains(out.Reason, "budget reached") || pm.calls != calls {
		t.Errorf("over the budget: action %d (%s), %d model calls; want handed back, no call", out.Action, out.Reason, pm.calls-calls)
	}
	m.Paid("openai", "openai:m", 0.25)
	if got := testutil.ToFloat64(m.cost.WithLabelValues("openai", "openai:m")); got != 0.25 {
		t.Errorf("pipeline_cost_usd_total %v, want 0.25", got)
	}
}
