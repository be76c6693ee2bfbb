package eval_test

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/eval"
	"github.com/llmpipeline/pipeline/index"
	"github.com/llmpipeline/pipeline/job"
)

func openStore(t *testing.T) *index.Store {
	t.Helper()
	st, err := index.Open(filepath.Join(t.TempDir(), "pipeline.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func result(id, schema, version, model string, run int, data string) job.Outcome {
	now := time.Now()
	return job.Outcome{JobID: id, Schema: schema, SchemaVersion: version, Run: run, Status: job.StatusSucceeded,
		Model: model, Attempts: 1, Data: json.RawMessage(data), StartedAt: now, FinishedAt: now}
}

func dead(id, schema, version, model string) job.Outcome {
	now := time.Now()
	return job.Outcome{JobID: id, Schema: schema, SchemaVersion: version, Status: job.StatusDeadLettered,
		Class: job.ClassExhausted, Model: model, Attempts: 2, StartedAt: now, FinishedAt: now}
}

func writeFile(t *testing.T, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "labels.jsonl")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func TestRunJoinsLatestRuns(t *testing.T) {
	st := openStore(t)
	ctx := t.Context()
	if err := st.Write(ctx, []job.Outcome{
		result("a", "person", "v1", "primary", 0, `{"name":"Ada","age":30}`),
		result("b", "person", "v1", "primary", 0, `{"name":"Bob","age":40}`),
		dead("c", "person", "v1", "primary"),
		result("x", "invoice", "v9", "primary", 0, `{"total":1}`),
	}); err != nil {
		t.Fatal(err)
	}
	// b ran again (a replay): the later run is the one scored
	if err := st.Write(ctx, []job.Outcome{result("b", "person", "v2", "fallback", 1, `{"name":"Bob","age":41}`)}); err != nil {
		t.Fatal(err)
	}
	file := writeFile(t,
		`{"id":"a","expected":{"name":"ada","age":30.0}}`,
		``,
		`{"id":"b","expected":{"name":"Bob","age":41}}`,
		`{"id":"c","expected":{"name":"Cy","age":50}}`,
		`{"id":"nobody","expected":{"name":"N"}}`,
		`{"id":"x","expected":{"total":1}}`,
	)
	res, err := eval.Run(ctx, st, file, eval.Options{Schema: "person", By: eval.ByModel, ShowErrors: 10})
	if err != nil {
		t.Fatal(err)
	}
	s := res.Summary
	if s.Records != 4 || s.WithResult != 2 || s.NoResult != 2 || s.NotIndexed != 1 || s.Exact != 2 {
		t.Errorf("records %+v", s)
	}
	if want := (eval.Counts{Correct: 4, Missing: 3}); s.Overall.Counts != want {
		t.Errorf("overall %+v, want %+v", s.Overall.Counts, want)
	}
	if got := s.Fields["/age"].Counts; got != (eval.Counts{Correct: 2, Missing: 1}) {
		t.Errorf("/age %+v", got)
	}
	if f1 := s.Overall.F1; f1 < 0.727 || f1 > 0.728 { // p 1, r 4/7
		t.Errorf("f1 %v", f1)
	}
	// --by model: the fallback answered b's latest run
	if fb := res.By["fallback"]; fb == nil || fb.Records != 1 || fb.Exact != 1 || fb.Overall.Correct != 2 {
		t.Errorf("by fallback: %+v", fb)
	}
	if p := res.By["primary"]; p == nil || p.Records != 2 || p.NoResult != 1 || p.Overall.Missing != 2 {
		t.Errorf("by primary: %+v", p)
	}
	if n := res.By[eval.NoOutcome]; n == nil || n.NotIndexed != 1 {
		t.Errorf("by no outcome: %+v", n)
	}
	if len(res.Errors) != 3 || res.Errors[0].JobID != "c" || res.Errors[0].Kind != eval.Missing {
		t.Errorf("errors %+v", res.Errors)
	}
	// groups for the history: one per schema, version and model
	if len(res.Groups) != 3 {
		t.Errorf("groups %+v", res.Groups)
	}
	if !strings.HasPrefix(res.Digest, "sha256:") || len(res.Digest) != 71 {
		t.Errorf("digest %q", res.Digest)
	}
}

func TestRunRefusesABrokenFile(t *testing.T) {
	st := openStore(t)
	cases := []struct {
		name, line, want string
	}{
		{"not JSON", `{"id":"a","expected":{`, "labels.jsonl:2: not a JSON object"},
		{"an array", `["a"]`, "labels.jsonl:2: not a JSON object"},
		{"no id", `{"expected":{}}`, `labels.jsonl:2: no "id"`},
		{"id a number", `{"id":7,"expected":{}}`, `labels.jsonl:2: "id" is 7, want a string`},
		{"empty id", `{"id":"","expected":{}}`, `labels.jsonl:2: "id" is "", want a non-empty string`},
		{"expected an array", `{"id":"b","expected":[1]}`, `labels.jsonl:2: job "b": "expected" is an array, want a JSON object`},
		{"no expected", `{"id":"b"}`, `labels.jsonl:2: job "b": no "expected"`},
		{"duplicate member", `{"id":"b","id":"c","expected":{}}`, "labels.jsonl:2: not a JSON object"},
		{"labelled twice", `{"id":"a","expected":{}}`, `labels.jsonl:2: job "a" is labelled twice: first at line 1`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			file := writeFile(t, `{"id":"a","expected":{"name":"x"}}`, tc.line, `{"id":"z","expected":{}}`)
			res, err := eval.Run(t.Context(), st, file, eval.Options{})
			var le *eval.LineError
			if !errors.As(err, &le) || le.Line != 2 {
				t.Fatalf("got %v, %v; want a LineError at line 2", res, err)
			}
			if !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), file+":2:") {
				t.Errorf("got %q, want it to hold %q", err, tc.want)
			}
		})
	}
}

// TestRunReadsBOMAndCRLF: a file saved by an editor that writes a byte
// order mark and CRLF line ends reads as any other.
func TestRunReadsBOMAndCRLF(t *testing.T) {
	st := openStore(t)
	if err := st.Write(t.Context(), []job.Outcome{result("a", "s", "v", "m", 0, `{"n":1}`)}); err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "labels.jsonl")
	if err := os.WriteFile(p, []byte("\xef\xbb\xbf{\"id\":\"a\",\"expected\":{\"n\":1}}\r\n\r\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	res, err := eval.Run(t.Context(), st, p, eval.Options{})
	if err != nil || res.Exact != 1 || res.Records != 1 {
		t.Fatalf("%+v, %v", res, err)
	}
}

func TestRunResultWithoutData(t *testing.T) {
	st := openStore(t)
	o := result("a", "person", "v1", "m", 0, `{"name":"A"}`)
	o.Data = nil // as an index written before data was kept reads
	if err := st.Write(t.Context(), []job.Outcome{o}); err != nil {
		t.Fatal(err)
	}
	_, err := eval.Run(t.Context(), st, writeFile(t, `{"id":"a","expected":{"name":"A"}}`), eval.Options{})
	if !errors.Is(err, eval.ErrNoData) || !strings.Contains(err.Error(), "dlq rebuild") {
		t.Fatalf("got %v, want ErrNoData", err)
	}
}

// TestRunPurgedRerunDeadLetter: job p succeeded (run 0), a --rerun dead
// lettered (run 1, which marks run 0 replayed), and the dead letter was
// purged. Run 0 is not the job's latest outcome: it counts as no result,
// not as the old success.
func TestRunPurgedRerunDeadLetter(t *testing.T) {
	st := openStore(t)
	ctx := t.Context()
	if err := st.Write(ctx, []job.Outcome{result("p", "person", "v1", "primary", 0, `{"name":"Ada"}`),
		result("q", "person", "v1", "primary", 0, `{"name":"Bo"}`)}); err != nil {
		t.Fatal(err)
	}
	d := dead("p", "person", "v2", "primary")
	d.Run = 1
	if err := st.Write(ctx, []job.Outcome{d}); err != nil {
		t.Fatal(err)
	}
	if ids, err := st.Purge(ctx, index.Filter{IDs: []string{"p"}}, false); err != nil || len(ids) != 1 {
		t.Fatalf("purge: %v, %v", ids, err)
	}
	// r's dead letter has a dlq replay in flight (marked replayed, no run
	// back yet): still a dead letter of v1
	if err := st.Write(ctx, []job.Outcome{dead("r", "person", "v1", "primary")}); err != nil {
		t.Fatal(err)
	}
	if err := st.MarkReplayed(ctx, "r", 0); err != nil {
		t.Fatal(err)
	}
	file := writeFile(t, `{"id":"p","expected":{"name":"Ada"}}`, `{"id":"q","expected":{"name":"Bo"}}`, `{"id":"r","expected":{"name":"R"}}`)
	res, err := eval.Run(ctx, st, file, eval.Options{By: eval.ByVersion})
	if err != nil {
		t.Fatal(err)
	}
	if s := res.Summary; s.Records != 3 || s.WithResult != 1 || s.NoResult != 2 || s.NotIndexed != 0 || s.Exact != 1 ||
		s.Overall.Counts != (eval.Counts{Correct: 1, Missing: 2}) {
		t.Errorf("summary %+v, want p and r as no result, q exact", s)
	}
	if v1 := res.By["v1"]; v1 == nil || v1.Records != 2 || v1.Exact != 1 || v1.NoResult != 1 {
		t.Errorf("by v1: %+v, want q and r", v1)
	}
	if n := res.By[eval.NoValue]; n == nil || n.Records != 1 || n.NoResult != 1 || n.NotIndexed != 0 {
		t.Errorf("by (none): %+v, want p, superseded by a run the index no longer holds", n)
	}
}

// TestRunByNoModel: a dead letter with no model (it failed before any
// answer) has an outcome: --by lists it under "(none)", and only an id
// with no run under "(no outcome)".
func TestRunByNoModel(t *testing.T) {
	st := openStore(t)
	ctx := t.Context()
	if err := st.Write(ctx, []job.Outcome{dead("d", "person", "v1", ""), result("a", "person", "v1", "m", 0, `{"name":"A"}`)}); err != nil {
		t.Fatal(err)
	}
	file := writeFile(t, `{"id":"d","expected":{"name":"D"}}`, `{"id":"a","expected":{"name":"A"}}`, `{"id":"nobody","expected":{"name":"N"}}`)
	res, err := eval.Run(ctx, st, file, eval.Options{By: eval.ByModel})
	if err != nil {
		t.Fatal(err)
	}
	if n := res.By[eval.NoValue]; n == nil || n.Records != 1 || n.NoResult != 1 || n.NotIndexed != 0 {
		t.Errorf("by (none): %+v, want the dead letter d", n)
	}
	if n := res.By[eval.NoOutcome]; n == nil || n.Records != 1 || n.NotIndexed != 1 {
		t.Errorf("by (no outcome): %+v, want nobody only", n)
	}
	if m := res.By["m"]; m == nil || m.Records != 1 || m.Exact != 1 {
		t.Errorf("by m: %+v", m)
	}
}
