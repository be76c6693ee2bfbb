package worker

import (
	"context"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/llmpipeline/pipeline/heal"
	"github.com/llmpipeline/pipeline/internal/queue"
	"github.com/llmpipeline/pipeline/job"
	"github.com/llmpipeline/pipeline/model"
	"github.com/llmpipeline/pipeline/schemas"
)

// transportModel always fails in transport, as a provider that is down.
type transportModel struct{}

func (transportModel) Complete(context.Context, model.Request) (model.Response, error) {
	return model.Response{}, &model.Error{Kind: model.KindTransport, Provider: "test", StatusCode: 503}
}

// TestEveryOutcomeIsCounted: the jobs metric counts each dead letter once,
// whatever decided it (here a transport failure on the last delivery), and
// a job handed back to the stream is not an outcome yet.
func TestEveryOutcomeIsCounted(t *testing.T) {
	t.Parallel()
	reg, err := schemas.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	loop, err := heal.New(transportModel{}, heal.Config{})
	if err != nil {
		t.Fatal(err)
	}
	m := NewMetrics(prometheus.NewRegistry())
	h, err := New(Config{Schemas: reg, Loop: loop, Model: "test", Metrics: m})
	if err != nil {
		t.Fatal(err)
	}
	data := []byte(`{"id":"t-1","schema":"ticket","input":"x"}`)
	for _, tc := range []struct {
		delivered int
		action    queue.Action
		counted   float64
	}{{1, queue.ActionRetry, 0}, {5, queue.ActionDeadLetter, 1}} {
		d := &queue.Delivery{Data: data, SchemaToken: "ticket", MsgID: "t-1", NumDelivered: tc.delivered, MaxDeliver: 5}
		d.Job, d.JobErr = job.Parse(data)
		if out := h.Handle(t.Context(), d); out.Action != tc.action {
			t.Fatalf("delivery %d: action %d, want %d", tc.delivered, out.Action, tc.action)
		}
		if got := testutil.ToFloat64(m.jobs.WithLabelValues("ticket", "dead_lettered", "transport")); got != tc.counted {
			t.Errorf("after delivery %d: %v transport dead letters counted, want %v", tc.delivered, got, tc.counted)
		}
	}
}

// TestSuccessIsMetered: a first-pass result counts one succeeded job, one
// attempt, its tokens as first-phase tokens and one model latency, under
// its schema's labels, job after job (the children are cached per schema).
func TestSuccessIsMetered(t *testing.T) {
	t.Parallel()
	m := NewMetrics(prometheus.NewRegistry())
	h := benchHandler(t, m)
	jobs := invoiceJobs(t, 3)
	for i, data := range jobs {
		d := &queue.Delivery{Data: data, SchemaToken: "invoice", MsgID: "m-" + string(rune('a'+i)), NumDelivered: 1, MaxDeliver: 5}
		d.Job, d.JobErr = job.Parse(data)
		if out := h.Handle(t.Context(), d); out.Action != queue.ActionResult {
			t.Fatalf("job %d: action %d (%s), want a result", i, out.Action, out.Reason)
		}
	}
	n := float64(len(jobs))
	for _, tc := range []struct {
		name string
		c    prometheus.Collector
		want float64
	}{
		{"succeeded", m.jobs.WithLabelValues("invoice", "succeeded", ""), n},
		{"prompt tokens, first", m.tokens.WithLabelValues("invoice", "prompt", "first"), 700 * n},
		{"prompt tokens, heal", m.tokens.WithLabelValues("invoice", "prompt", "heal"), 0},
	} {
		if got := testutil.ToFloat64(tc.c); got != tc.want {
			t.Errorf("%s = %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := testutil.ToFloat64(m.tokens.WithLabelValues("invoice", "completion", "first")); got <= 0 {
		t.Errorf("completion tokens, first = %v, want > 0", got)
	}
	for name, c := range map[string]prometheus.Collector{"attempts": m.attempts, "model latency": m.modelLatency} {
		if got := testutil.CollectAndCount(c); got != 1 {
			t.Errorf("%s: %d series, want 1 (schema invoice)", name, got)
		}
	}
}
