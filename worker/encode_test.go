package worker

import (
	"bytes"
	"encoding/json"
	"log/slog"
	"math"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/index"
	"github.com/llmpipeline/pipeline/internal/queue"
	"github.com/llmpipeline/pipeline/job"
	"github.com/llmpipeline/pipeline/schemas"
)

func outcomeCases() []struct {
	name string
	o    job.Outcome
} {
	start := time.Date(2026, 11, 30, 0, 17, 13, 184980437, time.UTC)
	return []struct {
		name string
		o    job.Outcome
	}{
		{"minimal", job.Outcome{JobID: "a", Schema: "invoice", Status: job.StatusSucceeded}},
		{"success", job.Outcome{
			JobID: "bench-1", Schema: "invoice", SchemaVersion: "09a709393dc0", Status: job.StatusSucceeded,
			Model: "openai:gpt-4o-mini", Attempts: 1, Deliveries: 1, StartedAt: start, FinishedAt: start.Add(time.Millisecond),
			Data: json.RawMessage("{\n  \"a\": 1.50,\n  \"b\": [true, null]\n}"),
			Job:  json.RawMessage(`{"id": "bench-1", "schema":"invoice","input":"x\ny"}`),
			Trace: []job.Attempt{{N: 1, Temperature: 0.7, Raw: "```json\n{\"a\": 1.50,}\n```", Repairs: []string{"fence", "trailing_comma"},
				FinishReason: "stop", PromptTokens: 700, CompletionTokens: 180, LatencyMS: 12}},
		}},
		{"dead letter with diagnostics", job.Outcome{
			JobID: "inv-7", Schema: "invoice", SchemaVersion: "v", Run: 3, Status: job.StatusDeadLettered, Class: "exhausted",
			Reason: "2 attempts used; still failing: /total (type)", Hint: "raise --max-attempts <n> & look at \"report\"",
			Model: "sim", Attempts: 2, Deliveries: 2, StartedAt: start.In(time.FixedZone("CET", 3600)), FinishedAt: start.Add(time.Second),
			Job: json.RawMessage(`"not json \u0001"`),
			Trace: []job.Attempt{
				{N: 1, Temperature: 0.7, Raw: "{\"total\":\"12,50\"}\t\r\b\f\u2028\u2029 <script>&", Class: "schema",
					Diagnostics: []job.Diagnostic{{Path: "/total", Keyword: "type", Message: "want number", Expected: "number", Received: `"12,50"`},
						{Path: "", Keyword: "required"}},
					DiagnosticsOmitted: 4, CachedTokens: 5, ReasoningTokens: 6, TransportRetries: 2, LatencyMS: 1500},
				{N: 2, Temperature: 1e-7, Raw: "bad utf8 \xff\xfe é ☃ \x00\x1f", Class: "grammar", FinishReason: "length"},
				{N: 3, Temperature: 2.5e21, Raw: "", Repairs: []string{}},
				{N: 4, Temperature: -0.25, Raw: "x"},
			},
		}},
		{"zero times and no trace", job.Outcome{JobID: "z", Schema: "s", Status: job.StatusDeadLettered, Class: "invalid_job", Trace: []job.Attempt{}}},
	}
}

// BenchmarkEncodeOutcome is the encoding of a succeeded outcome: the
// message the worker publishes, and the same outcome by encoding/json.
func BenchmarkEncodeOutcome(b *testing.B) {
	o := outcomeCases()[1].o
	// A succeeded invoice as the canned model's: its answer in the trace
	// (about 1 KB of JSON, quotes and newlines escaped) and as data.
	reg, err := schemas.Builtin()
	if err != nil {
		b.Fatal(err)
	}
	sc, _ := reg.Get("invoice")
	answer := validInvoices(b, sc, 1)[0].Content
	o.Trace[0].Raw, o.Trace[0].Repairs = answer, nil
	o.Data = json.RawMessage(answer)
	b.Run("EncodeOutcome", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := job.EncodeOutcome(&o); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encoding/json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(&o); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestPublishUnencodable: an outcome JSON cannot hold (a NaN temperature)
// is retried, not published and not a panic.
func TestPublishUnencodable(t *testing.T) {
	t.Parallel()
	o := outcomeCases()[2].o
	o.Trace[0].Temperature = math.NaN()
	h := &Handler{cfg: Config{Logger: slog.New(slog.DiscardHandler)}}
	out := h.publish(&queue.Delivery{SchemaToken: "invoice"}, queue.ActionDeadLetter, o, "x")
	if out.Action != queue.ActionRetry || out.Payload != nil || out.Record != nil {
		t.Errorf("publish of an unencodable outcome = %+v, want a retry with nothing published", out)
	}
}

// TestRecordIndexesAsDecoded holds what the sink stores from the worker's
// hand-over (the Outcome as built, nothing decoded) to what it stores from
// the same message read back from a stream, and the message to one compact
// line.
func TestRecordIndexesAsDecoded(t *testing.T) {
	t.Parallel()
	handed, read := openStore(t), openStore(t)
	h := &Handler{cfg: Config{Logger: slog.New(slog.DiscardHandler)}}
	var ids []string
	for _, tc := range outcomeCases() {
		if tc.o.Status == "" {
			continue
		}
		out := h.publish(&queue.Delivery{SchemaToken: tc.o.Schema}, queue.ActionResult, tc.o, "")
		msg, rec := out.Payload, out.Record.(*job.Outcome)
		var compact bytes.Buffer
		if err := json.Compact(&compact, msg); err != nil || !bytes.Equal(compact.Bytes(), msg) || bytes.ContainsAny(msg, "\n\r") {
			t.Fatalf("%s: message is not one compact line (%v):\n%s", tc.name, err, msg)
		}
		dec, err := job.DecodeOutcome(msg)
		if err != nil {
			t.Fatal(err)
		}
		if err := handed.Write(t.Context(), []job.Outcome{*rec}); err != nil {
			t.Fatal(err)
		}
		if err := read.Write(t.Context(), []job.Outcome{dec}); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, tc.o.JobID)
	}
	for _, id := range ids {
		a, err := handed.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		b, err := read.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s: from the hand-over\n%+v\nfrom the message\n%+v", id, a, b)
		}
	}
	sa, err := handed.Stats(t.Context(), index.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := read.Stats(t.Context(), index.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(sa, sb) || sa.Jobs != len(ids) {
		t.Errorf("stats from the hand-over %+v, from the messages %+v (want %d jobs)", sa, sb, len(ids))
	}
}

func openStore(t *testing.T) *index.Store {
	t.Helper()
	st, err := index.Open(filepath.Join(t.TempDir(), "pipeline.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
