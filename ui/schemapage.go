package ui

import (
	"net/http"
	"sort"

	"github.com/llmpipeline/pipeline/report"
)

// schemaRow is one schema on the schemas page.
type schemaRow struct {
	ID      string
	Version string
	File    string
	Broken  string
	Uses    []string
	// Indexed are the versions the index holds outcomes of.
	Indexed []string
	Jobs    int
	Dead    int
	Lint    []report.LintFinding
	// Failing are the schema's clusters that kill the most jobs, every
	// version.
	Failing []report.Cluster
	// Evals is the latest eval of each version that has one, in the order
	// the versions were first evaluated; F1Chart plots their f1.
	Evals   []*report.EvalFigures
	F1Chart *f1Chart
}

type schemasView struct {
	Schemas []*schemaRow
	// Loaded is false when the console has no schema directory to read.
	Loaded  bool
	LoadErr string
}

func (s *Server) schemasPage(w http.ResponseWriter, r *http.Request) {
	rep, err := report.Build(r.Context(), s.cfg.Store, report.Options{Version: report.VersionAll, Source: s.cfg.Source, Now: s.cfg.Now})
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	rows := map[string]*schemaRow{}
	get := func(id string) *schemaRow {
		if rows[id] == nil {
			rows[id] = &schemaRow{ID: id}
		}
		return rows[id]
	}
	var v schemasView
	if s.cfg.LoadSchemas != nil {
		reg, err := s.cfg.LoadSchemas()
		if err != nil {
			v.LoadErr = err.Error()
		} else {
			v.Loaded = true
			for _, id := range reg.IDs() {
				sc, _ := reg.Get(id)
				row := get(id)
				row.Version, row.File, row.Uses = sc.Version, sc.File, sc.Uses
			}
			for _, ce := range reg.Broken() {
				row := get(ce.ID)
				row.File, row.Broken = ce.File, ce.Err.Error()
			}
			for _, f := range reg.Lint() {
				row := get(f.Schema)
				row.Lint = append(row.Lint, report.LintFinding{Schema: f.Schema, File: f.File, Path: f.Path, Rule: f.Rule, Message: f.Message, Suggestion: f.Suggestion})
			}
		}
	}
	for id, vs := range rep.Versions {
		get(id).Indexed = vs
	}
	for _, f := range rep.Funnel {
		row := get(f.Schema)
		row.Jobs += f.Jobs
		row.Dead += f.DeadLettered
	}
	for _, c := range rep.Clusters { // sorted by the jobs they kill
		row := get(c.Schema)
		if len(row.Failing) < 5 {
			row.Failing = append(row.Failing, c)
		}
	}
	for _, e := range rep.Evals {
		row := get(e.Schema)
		row.Evals = append(row.Evals, e)
	}
	for _, row := range rows {
		row.F1Chart = newF1Chart(row.Evals)
		v.Schemas = append(v.Schemas, row)
	}
	sort.Slice(v.Schemas, func(i, j int) bool { return v.Schemas[i].ID < v.Schemas[j].ID })
	s.render(w, r, http.StatusOK, "schemas", page{Title: "Schemas", Nav: "schemas", Data: v})
}
