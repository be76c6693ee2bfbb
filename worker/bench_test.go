package worker

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/llmpipeline/pipeline/examples"
	"github.com/llmpipeline/pipeline/heal"
	"github.com/llmpipeline/pipeline/internal/queue"
	"github.com/llmpipeline/pipeline/job"
	"github.com/llmpipeline/pipeline/llm/sim"
	"github.com/llmpipeline/pipeline/model"
	"github.com/llmpipeline/pipeline/schemas"
)

// cannedModel answers every call at once with one of a few valid
// invoices, as scripts/benchrun's canned model does: the handler's own
// per-job cost, without model work.
type cannedModel struct {
	answers []model.Response
	n       atomic.Uint64
}

func (m *cannedModel) Complete(ctx context.Context, _ model.Request) (model.Response, error) {
	if err := ctx.Err(); err != nil {
		return model.Response{}, &model.Error{Kind: model.KindTransport, Provider: "canned", Message: err.Error()}
	}
	r := m.answers[m.n.Add(1)%uint64(len(m.answers))]
	r.Usage.PromptTokens = 700
	return r, nil
}

// validInvoices are n valid invoices written by the simulator with every
// fault rate at 0.
func validInvoices(tb testing.TB, sc *schemas.Schema, n int) []model.Response {
	tb.Helper()
	cfg := sim.DefaultConfig()
	cfg.Latency = 0
	cfg.FenceRate, cfg.ProseRate, cfg.TrailingCommaRate = 0, 0, 0
	cfg.WrongTypeRate, cfg.MissingRequiredRate, cfg.EnumNearMissRate = 0, 0, 0
	sim, err := sim.New(cfg)
	if err != nil {
		tb.Fatal(err)
	}
	out := make([]model.Response, 0, n)
	for i := range n {
		resp, err := sim.Complete(context.Background(), model.Request{
			Messages: []model.Message{{Role: model.RoleUser, Content: "extract"}},
			Schema:   sc.Raw, SchemaID: sc.ID, JobID: "answer-" + strconv.Itoa(i), Attempt: 1,
		})
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, resp)
	}
	return out
}

// invoiceJobs are the example invoice jobs encoded as the bench submits
// them (ids bench-NNNNNNN).
func invoiceJobs(tb testing.TB, n int) [][]byte {
	tb.Helper()
	var inputs []job.Job
	sc := bufio.NewScanner(bytes.NewReader(examples.Jobs()))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		if j, err := job.Parse(sc.Bytes()); err == nil && j.Schema == "invoice" {
			inputs = append(inputs, j)
		}
	}
	if len(inputs) == 0 {
		tb.Fatal("no example invoice jobs")
	}
	out := make([][]byte, n)
	for i := range out {
		src := inputs[i%len(inputs)]
		data, err := json.Marshal(job.Job{ID: fmt.Sprintf("bench-%07d", i), Schema: "invoice", Input: src.Input, Instructions: src.Instructions})
		if err != nil {
			tb.Fatal(err)
		}
		out[i] = data
	}
	return out
}

// benchHandler is a Handler as scripts/benchrun wires it, with a canned model.
func benchHandler(tb testing.TB, metrics *Metrics) *Handler {
	tb.Helper()
	reg, err := schemas.Builtin()
	if err != nil {
		tb.Fatal(err)
	}
	sc, ok := reg.Get("invoice")
	if !ok {
		tb.Fatal("no invoice schema")
	}
	loop, err := heal.New(&cannedModel{answers: validInvoices(tb, sc, 16)}, heal.Config{
		MaxAttempts: 2, Temperature: 0.7, TemperatureStep: 0.2, TemperatureFloor: 0.1,
		History: heal.HistoryLatest, MaxDiagnostics: 20,
	})
	if err != nil {
		tb.Fatal(err)
	}
	h, err := New(Config{Schemas: reg, Loop: loop, Model: "canned", Metrics: metrics})
	if err != nil {
		tb.Fatal(err)
	}
	return h
}

// BenchmarkHandle is the handler's per-job cost on a realistic invoice
// job whose model answers at once with a valid invoice: ParseJob (as the
// runtime calls it), the heal loop (sanitize, validate), the outcome's
// encoding and, in the metrics case, the Prometheus updates.
func BenchmarkHandle(b *testing.B) {
	jobs := invoiceJobs(b, 64)
	for _, bc := range []struct {
		name    string
		metrics bool
	}{
		{"no_metrics", false},
		{"metrics", true},
	} {
		b.Run(bc.name, func(b *testing.B) {
			var m *Metrics
			if bc.metrics {
				m = NewMetrics(prometheus.NewRegistry())
			}
			h := benchHandler(b, m)
			ctx := context.Background()
			b.ReportAllocs()
			i := 0
			size := 0
			for b.Loop() {
				data := jobs[i%len(jobs)]
				i++
				d := &queue.Delivery{Data: data, SchemaToken: "invoice", MsgID: "bench-" + strconv.Itoa(i), NumDelivered: 1, MaxDeliver: 5}
				d.Job, d.JobErr = job.Parse(d.Data)
				out := h.Handle(ctx, d)
				if out.Action != queue.ActionResult {
					b.Fatalf("action %d: %s", out.Action, out.Reason)
				}
				size += len(out.Payload)
			}
			b.ReportMetric(float64(size)/float64(i), "outcome-B")
		})
	}
}

// BenchmarkMetrics is the metrics' share of a first-pass job: the heal
// loop's observations and the outcome's count.
func BenchmarkMetrics(b *testing.B) {
	m := NewMetrics(prometheus.NewRegistry())
	res := heal.Result{Class: job.ClassNone, Attempts: []heal.Attempt{{N: 1, Usage: model.Usage{PromptTokens: 700, CompletionTokens: 180}, Latency: 1}}}
	b.ReportAllocs()
	for b.Loop() {
		m.observe("invoice", res)
		m.outcome("invoice", "succeeded", "")
	}
}
