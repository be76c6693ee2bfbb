package report

import (
	"bytes"
	"context"
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/llmpipeline/pipeline/index"
	"github.com/llmpipeline/pipeline/internal/escape"
)

// EvalFigures is the latest stored eval (`pipeline eval`) of one schema
// version: its labelled records scored against the runs of that version,
// summed over the models that answered them.
type EvalFigures struct {
	Schema  string    `json:"schema"`
	Version string    `json:"version"`
	EvalID  int64     `json:"eval_id"`
	At      time.Time `json:"at"`
	File    string    `json:"file"`
	Digest  string    `json:"digest"`
	Records int       `json:"records"`
	Exact   int       `json:"exact"`
	Correct int       `json:"correct"`
	Wrong   int       `json:"wrong"`
	Missing int       `json:"missing"`
	Extra   int       `json:"extra"`
	// Precision, Recall and F1 are micro-averaged over every field path
	// (docs/eval.md).
	Precision float64  `json:"precision"`
	Recall    float64  `json:"recall"`
	F1        float64  `json:"f1"`
	Models    []string `json:"models"`
}

func evalFigures(v index.VersionEval) *EvalFigures {
	e := &EvalFigures{Schema: v.Schema, Version: v.Version, EvalID: v.EvalID, At: v.At, File: v.File, Digest: v.Digest,
		Records: v.Records, Exact: v.Exact, Correct: v.Correct, Wrong: v.Wrong, Missing: v.Missing, Extra: v.Extra, Models: v.Models}
	e.Precision, e.Recall, e.F1 = v.EvalCounts.Figures()
	return e
}

// Evals returns the latest stored eval of every schema version with one
// (of schema, when set), per schema in the order the versions were first
// evaluated: f1 over versions.
func Evals(ctx context.Context, s *index.Store, schema string) ([]*EvalFigures, error) {
	vs, err := s.LatestEvals(ctx, schema)
	if err != nil {
		return nil, fmt.Errorf("reading the evals: %w", err)
	}
	out := make([]*EvalFigures, 0, len(vs))
	for _, v := range vs {
		out = append(out, evalFigures(v))
	}
	return out, nil
}

// attachEvals sets each funnel's Eval to the latest eval of its schema
// version, of evals.
func attachEvals(funnels map[string]*Funnel, evals []*EvalFigures) {
	by := make(map[[2]string]*EvalFigures, len(evals))
	for _, e := range evals {
		by[[2]string{e.Schema, e.Version}] = e
	}
	for _, f := range funnels {
		f.Eval = by[[2]string{f.Schema, f.Version}]
	}
}

func escapedEvals(es []*EvalFigures) []*EvalFigures {
	if es == nil {
		return nil
	}
	out := make([]*EvalFigures, len(es))
	for i, e := range es {
		c := *e
		c.Schema, c.Version, c.File, c.Models = escape.Line(e.Schema), escape.Line(e.Version), escape.Line(e.File), lines(e.Models)
		out[i] = &c
	}
	return out
}

// evalRows is the latest evals of the report's funnel rows, in the
// funnel's order: each schema version's eval next to its heal funnel.
func (r *Report) evalRows() []*EvalFigures {
	var out []*EvalFigures
	for _, s := range r.Schemas() {
		if e := r.Funnel[s].Eval; e != nil {
			out = append(out, e)
		}
	}
	return out
}

func writeEvalsTable(b *bytes.Buffer, r *Report) {
	rows := r.evalRows()
	if len(rows) == 0 {
		return
	}
	b.WriteString("\nEVALS (the latest `pipeline eval` of each schema version above, against labelled data)\n")
	tw := tabwriter.NewWriter(b, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "SCHEMA\tVERSION\tRECORDS\tEXACT\tPRECISION\tRECALL\tF1\tAT\tFILE")
	for _, e := range rows {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.2f\t%.2f\t%.2f\t%s\t%s\n", e.Schema, short(e.Version), e.Records, e.Exact,
			e.Precision, e.Recall, e.F1, e.At.UTC().Format("2006-01-02 15:04"), e.File)
	}
	tw.Flush()
}

func writeEvalsMarkdown(b *bytes.Buffer, r *Report) {
	rows := r.evalRows()
	if len(rows) == 0 {
		return
	}
	b.WriteString("\n## Evals\n\nThe latest `pipeline eval` of each schema version above, against labelled data.\n\n")
	b.WriteString("| schema | version | records | exact | precision | recall | f1 | at | file |\n|---|---|--:|--:|--:|--:|--:|---|---|\n")
	for _, e := range rows {
		fmt.Fprintf(b, "| %s | %s | %d | %d | %.2f | %.2f | %.2f | %s | %s |\n", md(e.Schema), code(short(e.Version)), e.Records, e.Exact,
			e.Precision, e.Recall, e.F1, e.At.UTC().Format("2006-01-02 15:04"), md(e.File))
	}
}
