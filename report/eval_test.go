package report

import (
	"bytes"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/index"
	"github.com/llmpipeline/pipeline/job"
)

// TestEvalsNextToTheFunnel: two schema versions, each evaluated (v1
// twice); the report's funnel rows carry each version's latest eval, Evals
// lists f1 over versions, and every format shows them.
func TestEvalsNextToTheFunnel(t *testing.T) {
	st, err := index.Open(filepath.Join(t.TempDir(), "pipeline.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	ctx := t.Context()
	now := time.Date(2026, 12, 1, 10, 0, 0, 0, time.UTC)
	var outs []job.Outcome
	for i, v := range []string{"v1aaaaaaaaaa", "v1aaaaaaaaaa", "v2bbbbbbbbbb"} {
		outs = append(outs, job.Outcome{JobID: string(rune('a' + i)), Run: 0, Schema: "ticket", SchemaVersion: v, Status: job.StatusSucceeded,
			Model: "m", Attempts: 1, Data: []byte(`{}`), StartedAt: now, FinishedAt: now})
	}
	if err := st.Write(ctx, outs); err != nil {
		t.Fatal(err)
	}
	save := func(at time.Time, version string, c index.EvalCounts) {
		t.Helper()
		if _, err := st.SaveEval(ctx, index.Eval{At: at, File: "labels.jsonl", Digest: "sha256:ab", Groups: []index.EvalGroup{
			{Schema: "ticket", Version: version, Model: "m", Records: 2, WithResult: 2, Exact: 1, EvalCounts: c},
			{Schema: "ticket", Version: version, Model: "fallback", Records: 1, WithResult: 1, EvalCounts: index.EvalCounts{Correct: 1}},
		}}); err != nil {
			t.Fatal(err)
		}
	}
	save(now, "v1aaaaaaaaaa", index.EvalCounts{Correct: 1, Wrong: 3})
	save(now.Add(time.Hour), "v1aaaaaaaaaa", index.EvalCounts{Correct: 5, Wrong: 1, Missing: 2}) // the latest of v1
	save(now.Add(2*time.Hour), "v2bbbbbbbbbb", index.EvalCounts{Correct: 7, Missing: 1})

	r, err := Build(ctx, st, Options{Version: VersionAll, Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Evals) != 2 || r.Evals[0].Version != "v1aaaaaaaaaa" || r.Evals[1].Version != "v2bbbbbbbbbb" {
		t.Fatalf("evals %+v, want v1 then v2", r.Evals)
	}
	// v1's latest eval, both models: correct 6, wrong 1, missing 2 -> f1 12/(12+2+2)
	if e := r.Evals[0]; e.Correct != 6 || e.Wrong != 1 || e.Missing != 2 || e.Records != 3 || e.F1 != 12.0/16 || len(e.Models) != 2 {
		t.Errorf("v1 eval %+v", e)
	}
	for _, f := range r.Funnel {
		if f.Eval == nil || f.Eval.Version != f.Version {
			t.Errorf("funnel %s@%s: eval %+v", f.Schema, f.Version, f.Eval)
		}
	}
	for format, want := range map[string]string{
		"table":    "EVALS (the latest",
		"markdown": "## Evals",
		"html":     `<table id="evals-table">`,
		"json":     `"evals": [`,
	} {
		var b bytes.Buffer
		if err := r.Render(&b, format); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(b.String(), want) || !strings.Contains(b.String(), map[bool]string{true: "0.75", false: "\"f1\": 0.75"}[format != "json"]) {
			t.Errorf("%s: no %q or f1 0.75:\n%s", format, want, b.String())
		}
	}
	// the latest version only (the default): one funnel row, its eval
	r, err = Build(ctx, st, Options{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Funnel) != 1 || r.Funnel["ticket"].Eval == nil || r.Funnel["ticket"].Eval.F1 != 16.0/17 {
		t.Errorf("latest funnel: %+v", r.Funnel["ticket"])
	}
}

// TestEvalFiguresF1 shares eval's computation: 6 correct, 1 missing, 2
// extra is f1 exactly 0.8, as `pipeline eval` and v_evals give it.
func TestEvalFiguresF1(t *testing.T) {
	e := evalFigures(index.VersionEval{EvalCounts: index.EvalCounts{Correct: 6, Missing: 1, Extra: 2}})
	if e.F1 != 0.8 || e.Precision != 0.75 || e.Recall != 6.0/7 {
		t.Errorf("p=%.17g r=%.17g f1=%.17g, want 0.75, 6/7, exactly 0.8", e.Precision, e.Recall, e.F1)
	}
}
