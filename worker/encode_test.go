package worker

import (
	"bytes"
	"encoding/json"
	"math"
	"path/filepath"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/dlq"
	"github.com/llmpipeline/pipeline/schemas"
)

// referenceEncode is the encoder encodeOutcome replaced: json.Marshal
// without Data and Job, which are appended as they are.
func referenceEncode(t testing.TB, o dlq.Outcome) []byte {
	t.Helper()
	data, job := o.Data, o.Job
	o.Data, o.Job = nil, nil
	b, err := json.Marshal(o)
	if err != nil {
		t.Fatalf("json.Marshal: %v", err)
	}
	if len(data) == 0 && len(job) == 0 {
		return b
	}
	b = b[:len(b)-1]
	if len(data) > 0 {
		b = append(append(b, `,"data":`...), data...)
	}
	if len(job) > 0 {
		b = append(append(b, `,"job":`...), job...)
	}
	return append(b, '}')
}

func outcomeCases() []struct {
	name string
	o    dlq.Outcome
} {
	start := time.Date(2026, 11, 30, 0, 17, 13, 184980437, time.UTC)
	return []struct {
		name string
		o    dlq.Outcome
	}{
		{"minimal", dlq.Outcome{JobID: "a", Schema: "invoice", Status: dlq.StatusSucceeded}},
		{"success", dlq.Outcome{
			JobID: "bench-1", Schema: "invoice", SchemaVersion: "09a709393dc0", Status: dlq.StatusSucceeded,
			Model: "openai:gpt-4o-mini", Attempts: 1, Deliveries: 1, StartedAt: start, FinishedAt: start.Add(time.Millisecond),
			Data: json.RawMessage("{\n  \"a\": 1.50,\n  \"b\": [true, null]\n}"),
			Job:  json.RawMessage(`{"id": "bench-1", "schema":"invoice","input":"x\ny"}`),
			Trace: []dlq.Attempt{{N: 1, Temperature: 0.7, Raw: "```json\n{\"a\": 1.50,}\n```", Repairs: []string{"fence", "trailing_comma"},
				FinishReason: "stop", PromptTokens: 700, CompletionTokens: 180, LatencyMS: 12}},
		}},
		{"dead letter with diagnostics", dlq.Outcome{
			JobID: "inv-7", Schema: "invoice", SchemaVersion: "v", Run: 3, Status: dlq.StatusDeadLettered, Class: "exhausted",
			Reason: "2 attempts used; still failing: /total (type)", Hint: "raise --max-attempts <n> & look at \"report\"",
			Model: "sim", Attempts: 2, Deliveries: 2, StartedAt: start.In(time.FixedZone("CET", 3600)), FinishedAt: start.Add(time.Second),
			Job: json.RawMessage(`"not json \u0001"`),
			Trace: []dlq.Attempt{
				{N: 1, Temperature: 0.7, Raw: "{\"total\":\"12,50\"}\t\r\b\f\u2028\u2029 <script>&", Class: "schema",
					Diagnostics: []dlq.Diagnostic{{Path: "/total", Keyword: "type", Message: "want number", Expected: "number", Received: `"12,50"`},
						{Path: "", Keyword: "required"}},
					DiagnosticsOmitted: 4, CachedTokens: 5, ReasoningTokens: 6, TransportRetries: 2, LatencyMS: 1500},
				{N: 2, Temperature: 1e-7, Raw: "bad utf8 \xff\xfe é ☃ \x00\x1f", Class: "grammar", FinishReason: "length"},
				{N: 3, Temperature: 2.5e21, Raw: "", Repairs: []string{}},
				{N: 4, Temperature: -0.25, Raw: "x"},
			},
		}},
		{"zero times and no trace", dlq.Outcome{JobID: "z", Schema: "s", Status: dlq.StatusDeadLettered, Class: "invalid_job", Trace: []dlq.Attempt{}}},
	}
}

// TestEncodeOutcomeMatchesReference: the hand encoder writes the bytes
// json.Marshal wrote, and the sink decodes them to the same Outcome.
func TestEncodeOutcomeMatchesReference(t *testing.T) {
	t.Parallel()
	for _, tc := range outcomeCases() {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, want := encodeOutcome(tc.o), referenceEncode(t, tc.o)
			if !bytes.Equal(got, want) {
				t.Fatalf("encodeOutcome:\n%s\nreference:\n%s", got, want)
			}
			if tc.o.Status == "" {
				return
			}
			gotO, err := dlq.DecodeOutcome(got)
			if err != nil {
				t.Fatalf("DecodeOutcome(encodeOutcome): %v", err)
			}
			wantO, err := dlq.DecodeOutcome(want)
			if err != nil {
				t.Fatalf("DecodeOutcome(reference): %v", err)
			}
			if !reflect.DeepEqual(gotO, wantO) {
				t.Fatalf("decoded outcomes differ:\n%+v\n%+v", gotO, wantO)
			}
		})
	}
}

func FuzzEncodeOutcome(f *testing.F) {
	for _, tc := range outcomeCases() {
		o := tc.o
		var raw, diag string
		if len(o.Trace) > 0 {
			raw = o.Trace[0].Raw
			if len(o.Trace[0].Diagnostics) > 0 {
				diag = o.Trace[0].Diagnostics[0].Received
			}
		}
		f.Add(o.JobID, o.Reason, raw, diag, 0.7, int64(o.StartedAt.UnixNano()), o.Run)
	}
	f.Fuzz(func(t *testing.T, id, reason, raw, diag string, temp float64, nanos int64, run int) {
		if math.IsInf(temp, 0) || math.IsNaN(temp) {
			return
		}
		at := time.Unix(0, nanos).UTC()
		o := dlq.Outcome{
			JobID: id, Schema: "invoice", Status: dlq.StatusDeadLettered, Class: "schema", Reason: reason, Hint: raw,
			Run: run, Attempts: 1, StartedAt: at, FinishedAt: at,
			Trace: []dlq.Attempt{{N: 1, Temperature: temp, Raw: raw, Repairs: []string{reason},
				Diagnostics: []dlq.Diagnostic{{Path: id, Keyword: "type", Received: diag}}}},
		}
		o.Data = json.RawMessage(`{"v":` + strconv.Quote(raw) + `}`)
		o.Job = json.RawMessage(strconv.Quote(id))
		got, data, job := encodeOutcomeSpans(o)
		if want := referenceEncode(t, o); !bytes.Equal(got, want) {
			t.Fatalf("encodeOutcome:\n%q\nreference:\n%q", got, want)
		}
		// The spans the sink cuts the payload with.
		if s := string(got[data[0]:data[1]]); s != `,"data":`+string(o.Data) {
			t.Fatalf("data span %q", s)
		}
		if s := string(got[job[0]:job[1]]); s != string(o.Job) {
			t.Fatalf("job span %q", s)
		}
	})
}

// BenchmarkEncodeOutcome is the encoding of a succeeded outcome, by hand
// and by the json.Marshal encoder it replaced.
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
	b.Run("hand", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = encodeOutcome(o)
		}
	})
	b.Run("json.Marshal", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = referenceEncode(b, o)
		}
	})
}

// TestRecordIndexesAsDecoded holds what the sink stores from the worker's
// hand-over (the Outcome with its message, nothing decoded) to what it
// stores from the same message read back from a stream.
func TestRecordIndexesAsDecoded(t *testing.T) {
	t.Parallel()
	handed, read := openStore(t), openStore(t)
	var ids []string
	for _, tc := range outcomeCases() {
		if tc.o.Status == "" {
			continue
		}
		msg, rec := record(tc.o)
		if !bytes.Equal(msg, encodeOutcome(tc.o)) {
			t.Fatalf("%s: record's message differs from encodeOutcome's", tc.name)
		}
		dec, err := dlq.DecodeOutcome(msg)
		if err != nil {
			t.Fatal(err)
		}
		if err := handed.Write(t.Context(), []dlq.Outcome{*rec}); err != nil {
			t.Fatal(err)
		}
		if err := read.Write(t.Context(), []dlq.Outcome{dec}); err != nil {
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
	sa, err := handed.Stats(t.Context(), dlq.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	sb, err := read.Stats(t.Context(), dlq.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(sa, sb) || sa.Jobs != len(ids) {
		t.Errorf("stats from the hand-over %+v, from the messages %+v (want %d jobs)", sa, sb, len(ids))
	}
}

func openStore(t *testing.T) *dlq.Store {
	t.Helper()
	st, err := dlq.Open(filepath.Join(t.TempDir(), "pipeline.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}
