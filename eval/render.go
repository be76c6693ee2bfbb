package eval

import (
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"
	"time"
	"unicode/utf8"

	"github.com/llmpipeline/pipeline/index"
	"github.com/llmpipeline/pipeline/internal/escape"
)

// WriteTable writes r for a terminal: one row per field path (counts,
// precision, recall, f1), the overall line, the records, then the figures
// per model or version when asked, then the mismatches kept.
func WriteTable(w io.Writer, r *Result) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	writeSummary(tw, &r.Summary)
	if len(r.By) > 0 {
		keys := make([]string, 0, len(r.By))
		for k := range r.By {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			fmt.Fprintf(tw, "\nby %s\n", escape.Line(k))
			writeSummary(tw, r.By[k])
		}
	}
	if len(r.Errors) > 0 {
		fmt.Fprintf(tw, "\nJOB\tPATH\tKIND\tEXPECTED\tPRODUCED\n")
		for _, m := range r.Errors {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", escape.Line(m.JobID), escape.Line(m.Path), m.Kind, show(m.Expected), show(m.Produced))
		}
	}
	return tw.Flush()
}

func writeSummary(tw *tabwriter.Writer, s *Summary) {
	fmt.Fprintf(tw, "FIELD\tCORRECT\tWRONG\tMISSING\tEXTRA\tPRECISION\tRECALL\tF1\n")
	paths := make([]string, 0, len(s.Fields))
	for p := range s.Fields {
		paths = append(paths, p)
	}
	slices.Sort(paths)
	for _, p := range paths {
		writeRow(tw, escape.Line(p), s.Fields[p])
	}
	writeRow(tw, "overall", s.Overall)
	fmt.Fprintf(tw, "records %d, with result %d, no result %d (not indexed %d), exact %d\n",
		s.Records, s.WithResult, s.NoResult, s.NotIndexed, s.Exact)
}

func writeRow(tw *tabwriter.Writer, name string, s Score) {
	fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%.2f\t%.2f\t%.2f\n", name, s.Correct, s.Wrong, s.Missing, s.Extra, s.Precision, s.Recall, s.F1)
}

// show is a value as the mismatch list prints it: JSON, cut to 60 bytes.
func show(v any) string {
	if v == nil {
		return "-"
	}
	b, err := json.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	s := string(b)
	if len(s) > 60 {
		cut := 57
		for cut > 0 && !utf8.RuneStart(s[cut]) { // not inside a character
			cut--
		}
		s = s[:cut] + "..."
	}
	return escape.Line(s)
}

// WriteHistory writes stored evals for a terminal, one line per eval and
// schema version: when, the file and its digest, schema, version, models,
// records, exact and the figures.
func WriteHistory(w io.Writer, evals []index.Eval) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "EVAL\tAT\tFILE\tDIGEST\tSCHEMA\tVERSION\tMODELS\tRECORDS\tEXACT\tPRECISION\tRECALL\tF1\n")
	for _, e := range History(evals) {
		digest := e.Digest
		if len(digest) > 19 {
			digest = digest[:19]
		}
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%s\t%s\t%s\t%d\t%d\t%.2f\t%.2f\t%.2f\n", e.EvalID, e.At.Format("2006-01-02T15:04:05Z"),
			escape.Line(e.File), digest, escape.Line(dash(e.Schema)), dash(e.Version), escape.Line(dash(strings.Join(e.Models, ","))), e.Records, e.Exact,
			e.Precision, e.Recall, e.F1)
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// HistoryLine is one stored eval at one schema version, summed over its
// models: a line of `pipeline eval --history`.
type HistoryLine struct {
	EvalID  int64    `json:"eval_id"`
	At      jsonTime `json:"at"`
	File    string   `json:"file"`
	Digest  string   `json:"digest"`
	Schema  string   `json:"schema"`
	Version string   `json:"version"`
	Models  []string `json:"models"`
	Records int      `json:"records"`
	Exact   int      `json:"exact"`
	Score
	Fields map[string]Score `json:"fields"`
}

// History turns stored evals into lines, one per eval and schema version.
func History(evals []index.Eval) []HistoryLine {
	var out []HistoryLine
	for _, e := range evals {
		at := len(out)
		for _, g := range e.Groups {
			i := slices.IndexFunc(out[at:], func(h HistoryLine) bool { return h.Schema == g.Schema && h.Version == g.Version })
			if i < 0 {
				out = append(out, HistoryLine{EvalID: e.ID, At: jsonTime{e.At}, File: e.File, Digest: e.Digest,
					Schema: g.Schema, Version: g.Version, Fields: map[string]Score{}})
				i = len(out) - at - 1
			}
			h := &out[at+i]
			if g.Model != "" {
				h.Models = append(h.Models, g.Model)
			}
			h.Records += g.Records
			h.Exact += g.Exact
			c := h.Counts
			add(&c, g.EvalCounts)
			h.Score = Of(c)
			for p, fc := range g.Fields {
				f := h.Fields[p].Counts
				add(&f, fc)
				h.Fields[p] = Of(f)
			}
		}
	}
	return out
}

type jsonTime struct{ time.Time }

func (t jsonTime) MarshalJSON() ([]byte, error) {
	return json.Marshal(t.UTC().Format("2006-01-02T15:04:05.000Z"))
}
