package main

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/llm"
	"github.com/llmpipeline/pipeline/model"
	"github.com/llmpipeline/pipeline/schemas"
)

func discard() *slog.Logger { return slog.New(slog.DiscardHandler) }

func TestParseBenchLine(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name, line string
		ok         bool
		want       string
		values     map[string]float64
	}{
		{"standard", "BenchmarkClean/fenced-2   \t  100000\t  1234 ns/op\t  512 B/op\t  3 allocs/op", true, "BenchmarkClean/fenced",
			map[string]float64{"ns/op": 1234, "B/op": 512, "allocs/op": 3}},
		{"custom metric", "BenchmarkBuild/dead=1M-2  2  566828660 ns/op  120.0 clusters  784648 B/op  16682 allocs/op", true, "BenchmarkBuild/dead=1M",
			map[string]float64{"ns/op": 566828660, "clusters": 120, "B/op": 784648, "allocs/op": 16682}},
		{"no procs suffix", "BenchmarkX 10 5 ns/op", true, "BenchmarkX", map[string]float64{"ns/op": 5}},
		{"name with dash", "BenchmarkWrite/batch-size-2 10 5 ns/op", true, "BenchmarkWrite/batch-size", map[string]float64{"ns/op": 5}},
		{"log line", "--- BENCH: BenchmarkBuild/dead=1M-2", false, "", nil},
		{"pass", "PASS", false, "", nil},
		{"bad iterations", "BenchmarkX abc 5 ns/op", false, "", nil},
		{"odd fields", "BenchmarkX 10 5 ns/op 7", false, "", nil},
		{"bad value", "BenchmarkX 10 five ns/op", false, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			l, ok := parseBenchLine("./pkg", tt.line)
			if ok != tt.ok {
				t.Fatalf("ok = %v, want %v", ok, tt.ok)
			}
			if !ok {
				return
			}
			if l.Name != tt.want || l.Pkg != "./pkg" {
				t.Errorf("name %q pkg %q, want %q ./pkg", l.Name, l.Pkg, tt.want)
			}
			for unit, v := range tt.values {
				if l.Values[unit] != v {
					t.Errorf("%s = %v, want %v", unit, l.Values[unit], v)
				}
			}
			if len(l.Values) != len(tt.values) {
				t.Errorf("values %v, want %v", l.Values, tt.values)
			}
		})
	}
}

func FuzzParseBenchLine(f *testing.F) {
	for _, s := range []string{
		"BenchmarkClean/fenced-2 100000 1234 ns/op 512 B/op 3 allocs/op",
		"BenchmarkX 10 5 ns/op", "PASS", "Benchmark- 1 1 x", "",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		l, ok := parseBenchLine("p", s)
		if !ok {
			return
		}
		if !strings.HasPrefix(l.Name, "Benchmark") {
			t.Errorf("parsed %q into %+v", s, l)
		}
		if len(l.Values) == 0 || len(l.Values) > len(strings.Fields(s))/2 {
			t.Errorf("parsed %q into %d values", s, len(l.Values))
		}
		// A parsed line parses again to the same thing.
		again, ok := parseBenchLine("p", l.Raw)
		if !ok || again.Name != l.Name || len(again.Values) != len(l.Values) {
			t.Errorf("reparsing %q: %+v, %v", l.Raw, again, ok)
		}
	})
}

func TestMaxLag(t *testing.T) {
	t.Parallel()
	t0 := time.Unix(1000, 0)
	at := func(ms int) time.Time { return t0.Add(time.Duration(ms) * time.Millisecond) }
	tests := []struct {
		name    string
		samples []sample
		want    time.Duration
	}{
		{"none", nil, 0},
		{"index in step", []sample{{at(0), 10, 10}, {at(100), 20, 20}}, 0},
		{"one period behind", []sample{{at(0), 10, 0}, {at(100), 20, 10}, {at(200), 20, 20}}, 100 * time.Millisecond},
		{"catches up late", []sample{{at(0), 100, 0}, {at(100), 100, 50}, {at(200), 100, 99}, {at(300), 100, 100}}, 300 * time.Millisecond},
		{"never caught up", []sample{{at(0), 10, 0}, {at(500), 10, 5}}, 500 * time.Millisecond},
		{"nothing published yet", []sample{{at(0), 0, 0}, {at(100), 5, 5}}, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if got := maxLag(tt.samples); got != tt.want {
				t.Errorf("maxLag = %v, want %v", got, tt.want)
			}
		})
	}
}

func TestJobsFor(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		k       int
		latency time.Duration
		target  time.Duration
		min     int
		want    int
	}{
		{"K=1 rounds of L", 1, 200 * time.Millisecond, 12 * time.Second, 5000, 60},
		{"K=16 no minimum", 16, 200 * time.Millisecond, 12 * time.Second, 5000, 960},
		{"K=64 minimum rounded up to whole rounds", 64, 200 * time.Millisecond, 12 * time.Second, 5000, 5056},
		{"K=1024 duration wins", 1024, 200 * time.Millisecond, 12 * time.Second, 5000, 61440},
		{"target shorter than L", 4, time.Second, time.Millisecond, 0, 4},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := jobsFor(tt.k, tt.latency, tt.target, tt.min)
			if got != tt.want {
				t.Errorf("jobsFor = %d, want %d", got, tt.want)
			}
			if got%tt.k != 0 {
				t.Errorf("%d jobs is not a multiple of K=%d", got, tt.k)
			}
		})
	}
}

func TestParseOptions(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		args    []string
		wantErr string
		check   func(t *testing.T, o options)
	}{
		{"defaults", nil, "", func(t *testing.T, o options) {
			if o.Out != "bench/RESULTS.md" || o.Reps != 5 || o.CPUJobs != 60000 || o.MinJobs != 5000 || len(o.Ks) != 5 || !o.enabled("micro") {
				t.Errorf("defaults: %+v", o)
			}
		}},
		{"quick writes nothing", []string{"--quick"}, "", func(t *testing.T, o options) {
			if o.Out != "" || o.Reps != 1 || o.ReportBench == "." {
				t.Errorf("quick: %+v", o)
			}
		}},
		{"only", []string{"--only", "cpu,micro", "--k", "4,8"}, "", func(t *testing.T, o options) {
			if o.enabled("latency") || !o.enabled("cpu") || !o.enabled("micro") || len(o.Ks) != 2 || o.Ks[1] != 8 {
				t.Errorf("only: %+v", o)
			}
		}},
		{"unknown section", []string{"--only", "gpu"}, `unknown section "gpu"`, nil},
		{"bad k", []string{"--k", "1,x"}, `"x" is not a positive integer`, nil},
		{"zero latency", []string{"--latency", "0s"}, "must be positive", nil},
		{"stray argument", []string{"now"}, `unexpected argument "now"`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			o, err := parseOptions(tt.args, io.Discard)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			tt.check(t, o)
		})
	}
}

func TestGoals(t *testing.T) {
	t.Parallel()
	opts, err := parseOptions([]string{"--only", "latency,cpu,micro"}, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	r := &benchRun{
		Opts: opts,
		Latency: []caseResult{
			{Section: "latency", K: 16, Efficiency: 0.97},
			{Section: "latency", K: 1024, Efficiency: 0.90, PeakRSSMB: 300},
		},
		CPU:       []caseResult{{JobsPerSec: 4000, SinkLag: 0.4}, {JobsPerSec: 6000, SinkLag: 1.5}, {JobsPerSec: 5000, SinkLag: 0.2}},
		Raw:       []caseResult{{JobsPerSec: 20000}, {JobsPerSec: 10000}, {JobsPerSec: 9000}},
		RawLedger: []caseResult{{Name: "raw JetStream + ledger KV #1", JobsPerSec: 8000}},
		Micro: []benchLine{{Name: reportBench, Values: map[string]float64{"ns/op": 5e8}},
			{Name: evalBench, Values: map[string]float64{"ns/op": 6e9, "cpu-s/op": 5.5, "peak-heap-MiB": 10.5}}},
	}
	got := map[string]string{}
	for _, g := range goals(r) {
		got[g.Name] = g.Verdict + " | " + g.Measured
	}
	for name, want := range map[string]string{
		"Efficiency, simulated model":      "**missed** (short at K=1024 by 0.050)",
		"Non-model path vs raw JetStream":  "**missed** (-7 points) | 5000 / 8000 jobs/s = 0.62",
		"Sink lag at the CPU-bound rate":   "**missed** (0.50 s over) | 1.50 s",
		"Peak RSS at K=1024":               "**missed** (44 MB over) | latency 300 MB",
		"Full report over 1M dead letters": "met (0.5x the budget) | 500ms",
		"Eval of 100,000 labelled records": "**missed** (1.2x the budget) | 6s per eval, 5.5 CPU s, peak live heap 10.5 MiB",
	} {
		if !strings.HasPrefix(got[name], want) && !strings.Contains(got[name], want) {
			t.Errorf("%s: %q, want it to hold %q", name, got[name], want)
		}
	}
	if _, ok := got["Efficiency, HTTP path"]; ok {
		t.Error("a section that did not run has a goal line")
	}
	md := renderMarkdown(r)
	if want := "bare raw JetStream (no ledger) 10000 jobs/s, 0.50"; !strings.Contains(got["Non-model path vs raw JetStream"], want) {
		t.Errorf("the non-model goal %q lacks %q", got["Non-model path vs raw JetStream"], want)
	}
	for _, want := range []string{"## Machine", "## Goals", "## 1. Latency-bound", "| 1024 |", "## 3. CPU-bound", "ratio 0.50", "| raw JetStream + ledger KV #1 | ", "the pipeline 0.62 of it"} {
		if !strings.Contains(md, want) {
			t.Errorf("markdown lacks %q", want)
		}
	}
}

// TestChatServer drives the bench's model server with the pipeline's own
// OpenAI client: the answer must be a valid invoice.
func TestChatServer(t *testing.T) {
	t.Parallel()
	cs, err := newChatServer(t.Context(), time.Millisecond, 3)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(cs)
	t.Cleanup(srv.Close)
	reg, err := schemas.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	sc, _ := reg.Get(benchSchema)
	client, err := llm.NewOpenAI(llm.Config{BaseURL: srv.URL + "/v1", Model: "bench", TransportRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { client.Close() })

	t.Run("valid answer", func(t *testing.T) {
		seen := map[string]bool{}
		for i := range 4 {
			resp, err := client.Complete(t.Context(), model.Request{Messages: []model.Message{{Role: "user", Content: "extract"}}, SchemaID: benchSchema, JobID: "j", Attempt: i + 1})
			if err != nil {
				t.Fatal(err)
			}
			if resp.FinishReason != model.FinishStop {
				t.Errorf("finish reason %q", resp.FinishReason)
			}
			diags, _, err := sc.Validate([]byte(resp.Content), 5)
			if err != nil || len(diags) > 0 {
				t.Fatalf("answer is not a valid invoice: %v %v", diags, err)
			}
			seen[resp.Content] = true
		}
		if len(seen) < 2 {
			t.Errorf("%d distinct answers over 4 calls, want the variants to rotate", len(seen))
		}
	})
	t.Run("wrong path", func(t *testing.T) {
		resp, err := http.Get(srv.URL + "/v1/models")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotFound {
			t.Errorf("status %d, want 404", resp.StatusCode)
		}
	})
	t.Run("bad request", func(t *testing.T) {
		resp, err := http.Post(srv.URL+"/v1/chat/completions", "application/json", strings.NewReader(`{"model":""}`))
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("status %d, want 400", resp.StatusCode)
		}
	})
}

// TestRunCases runs small cases on the real parts: an embedded nats-server
// with file storage and a SQLite index under a temp dir.
func TestRunCases(t *testing.T) {
	t.Parallel()
	cs, err := newChatServer(t.Context(), time.Millisecond, 2)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(cs)
	t.Cleanup(srv.Close)
	tests := []struct {
		name string
		spec caseSpec
	}{
		{"sim with sink lag", caseSpec{Kind: "sim", K: 4, Jobs: 40, Latency: time.Millisecond, SampleEvery: 20 * time.Millisecond}},
		{"canned", caseSpec{Kind: "canned", K: 16, Jobs: 64}},
		{"http", caseSpec{Kind: "http", K: 8, Jobs: 24, LLMURL: srv.URL + "/v1"}},
		{"raw", caseSpec{Kind: "raw", K: 8, Jobs: 100, ResultBytes: 1500}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			var res caseResult
			var err error
			if tt.spec.Kind == "raw" {
				res, err = runRaw(ctx, tt.spec, discard())
			} else {
				res, err = runPipeline(ctx, tt.spec, discard())
			}
			if err != nil {
				t.Fatalf("%v (%+v)", err, res)
			}
			if res.Succeeded != tt.spec.Jobs {
				t.Errorf("succeeded %d of %d", res.Succeeded, tt.spec.Jobs)
			}
			if tt.spec.Kind != "raw" && res.Indexed != tt.spec.Jobs {
				t.Errorf("indexed %d of %d", res.Indexed, tt.spec.Jobs)
			}
			if res.JobsPerSec <= 0 || res.Seconds <= 0 || res.PeakRSSMB <= 0 || res.JobBytes <= 0 || res.ResultBytes <= 0 {
				t.Errorf("missing figures: %+v", res)
			}
			if tt.spec.SampleEvery > 0 && res.SinkLag < 0 {
				t.Errorf("sink lag not measured: %+v", res)
			}
			if tt.spec.Kind != "raw" && (res.HandlerMs <= 0 || res.StoreMs <= 0) {
				t.Errorf("slot breakdown missing: handler %.3fms, store %.3fms", res.HandlerMs, res.StoreMs)
			}
			if tt.spec.Kind != "raw" && (res.MeanInFlight <= 0 || res.MeanInFlight > float64(tt.spec.K)+0.01) {
				t.Errorf("mean in flight %.2f outside (0, K=%d]", res.MeanInFlight, tt.spec.K)
			}
		})
	}
}

func TestStatusField(t *testing.T) {
	t.Parallel()
	status := "Name:\tbench\nVmPeak:\t  123 kB\nVmHWM:\t   4567 kB\n"
	tests := []struct {
		field string
		want  int64
		ok    bool
	}{{"VmHWM", 4567, true}, {"VmPeak", 123, true}, {"VmRSS", 0, false}, {"Name", 0, false}}
	for _, tt := range tests {
		t.Run(tt.field, func(t *testing.T) {
			t.Parallel()
			got, err := statusField(strings.NewReader(status), tt.field)
			if (err == nil) != tt.ok || got != tt.want {
				t.Errorf("statusField(%s) = %d, %v; want %d ok=%v", tt.field, got, err, tt.want, tt.ok)
			}
		})
	}
	if _, err := procStatusKB("VmHWM"); err != nil {
		t.Errorf("reading this process's VmHWM: %v", err)
	}
}
