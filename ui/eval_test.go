package ui_test

import (
	"net/http"
	"strings"
	"testing"

	"github.com/llmpipeline/pipeline/index"
)

// TestEvalsOnTheConsole: the overview shows each version's latest eval f1
// beside its heal funnel; the schema page plots f1 over the versions
// evaluated (one point each, in the order they were first evaluated) and
// lists them.
func TestEvalsOnTheConsole(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	save := func(version string, c index.EvalCounts) {
		t.Helper()
		if _, err := f.st.SaveEval(ctx, index.Eval{At: t0, File: "labels.jsonl", Digest: "sha256:ab", Groups: []index.EvalGroup{
			{Schema: "invoice", Version: version, Model: "sim", Records: 4, WithResult: 4, Exact: 2, EvalCounts: c}}}); err != nil {
			t.Fatal(err)
		}
	}
	save("v0oldoldoldo", index.EvalCounts{Correct: 1, Wrong: 1})             // f1 0.50, a version no longer indexed
	save("v1aaaaaaaaaa", index.EvalCounts{Correct: 2, Wrong: 2})             // superseded by the next
	save("v1aaaaaaaaaa", index.EvalCounts{Correct: 9, Wrong: 1, Missing: 0}) // f1 0.90

	over := f.get(t, "/", http.StatusOK)
	mustContain(t, "the overview", text(over), "eval f1", "0.90")
	page := f.get(t, "/schemas", http.StatusOK)
	mustContain(t, "the schemas page", text(page), "Evals: f1 over versions", "v0oldold", "0.50", "0.90")
	if n := strings.Count(page, "<circle "); n != 2 {
		t.Errorf("the f1 chart has %d points, want 2 (one per version evaluated)", n)
	}
	i, j := strings.Index(page, "v0oldoldoldo: f1 0.50"), strings.Index(page, "v1aaaaaaaaaa: f1 0.90")
	if i < 0 || j < 0 || i > j {
		t.Errorf("the chart's points are not v0 then v1 (at %d and %d)", i, j)
	}
	// the ticket schema has no eval: no chart in its section
	ticket := page[strings.Index(page, `id="schema-ticket"`):]
	if strings.Contains(ticket, "f1-chart") {
		t.Errorf("the ticket schema, never evaluated, has a chart")
	}
}
