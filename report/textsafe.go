package report

import (
	"github.com/llmpipeline/pipeline/index"
	"github.com/llmpipeline/pipeline/internal/escape"
	"github.com/llmpipeline/pipeline/job"
)

// escaped is a copy of r for the text renderers (table, markdown, html):
// every string a model, a job or a stored outcome wrote (paths, keywords,
// received values, reasons, examples, models, classes, the lint's
// messages) with its control characters as escapes (internal/escape), so a
// report printed on a terminal cannot be made to move the cursor, clear
// the screen or retitle the window. The JSON form keeps the values as they
// are (encoding/json escapes them).
func (r *Report) escaped() *Report {
	l := escape.Line
	out := *r
	out.Source = l(r.Source)
	out.Filter.Schema, out.Filter.Version, out.Filter.Model = l(r.Filter.Schema), l(r.Filter.Version), l(r.Filter.Model)
	out.Versions = make(map[string][]string, len(r.Versions))
	for k, vs := range r.Versions {
		out.Versions[l(k)] = lines(vs)
	}
	out.Conflicts = make([]index.ConflictCount, len(r.Conflicts))
	for i, c := range r.Conflicts {
		c.Schema, c.Path = l(c.Schema), l(c.Path)
		out.Conflicts[i] = c
	}
	out.Clusters = make([]Cluster, len(r.Clusters))
	for i, c := range r.Clusters {
		c.ID, c.Schema, c.Version, c.Path, c.Keyword = l(c.ID), l(c.Schema), l(c.Version), l(c.Path), l(c.Keyword)
		c.Reason, c.Suggestion, c.Examples = l(c.Reason), l(c.Suggestion), lines(c.Examples)
		rs := c.Received
		c.Received = make([]index.ValueCount, len(rs))
		for j, v := range rs {
			c.Received[j] = index.ValueCount{Value: l(v.Value), Count: v.Count}
		}
		out.Clusters[i] = c
	}
	out.Funnel = make(map[string]*Funnel, len(r.Funnel))
	for k, f := range r.Funnel {
		g := *f
		g.Schema, g.Version = l(f.Schema), l(f.Version)
		g.DeadByClass = make([]ClassShare, len(f.DeadByClass))
		for j, cs := range f.DeadByClass {
			cs.Class = job.Class(l(string(cs.Class)))
			g.DeadByClass[j] = cs
		}
		g.Models = make([]ModelShare, len(f.Models))
		for j, m := range f.Models {
			m.Model = l(m.Model)
			g.Models[j] = m
		}
		out.Funnel[l(k)] = &g // the html's chart labels its rows by the key
	}
	out.Evals = escapedEvals(r.Evals)
	for _, f := range out.Funnel {
		if f.Eval != nil {
			f.Eval = escapedEvals([]*EvalFigures{f.Eval})[0]
		}
	}
	out.Lint = make([]LintFinding, len(r.Lint))
	for i, f := range r.Lint {
		out.Lint[i] = LintFinding{Schema: l(f.Schema), File: l(f.File), Path: l(f.Path), Rule: l(f.Rule), Message: l(f.Message), Suggestion: l(f.Suggestion)}
	}
	return &out
}

func lines(ss []string) []string {
	out := make([]string, len(ss))
	for i, s := range ss {
		out[i] = escape.Line(s)
	}
	return out
}
