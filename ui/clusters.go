package ui

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/llmpipeline/pipeline/index"
	"github.com/llmpipeline/pipeline/job"
	"github.com/llmpipeline/pipeline/report"
	"github.com/llmpipeline/pipeline/schemas"
)

// clusterQuery is the clusters page's selection, from its URL.
type clusterQuery struct {
	Schema, Version, Model, Keyword string
	Class                           job.Class
	Top                             int
}

func readClusterQuery(q url.Values) (clusterQuery, error) {
	c := clusterQuery{Schema: q.Get("schema"), Version: q.Get("version"), Class: job.Class(q.Get("class")), Model: q.Get("model"), Keyword: q.Get("keyword"), Top: 50}
	if c.Version == "" {
		c.Version = report.VersionLatest
	}
	if t := q.Get("top"); t != "" {
		n, err := strconv.Atoi(t)
		if err != nil || n < 0 {
			return c, fmt.Errorf("top %q: want a number of clusters (0 for all)", t)
		}
		c.Top = n
	}
	return c, nil
}

// clustersView is the clusters page.
type clustersView struct {
	Q        clusterQuery
	Report   *report.Report
	Clusters []report.Cluster
	// Shown is the "N of M clusters" line.
	Shown string
	// Narrowed says the class or model filter kept clusters with a dead
	// letter of that class or model; their counts are over every job.
	Narrowed string
	Schemas  []string
	MaxDead  int
	Lint     []report.LintFinding
}

// lintFindings are the lint's findings over the schemas load reads as
// they are now; none when there are no schemas to read or they do not
// load (the schemas page says why).
func lintFindings(load func() (*schemas.Registry, error)) []report.LintFinding {
	if load == nil {
		return nil
	}
	reg, err := load()
	if err != nil {
		return nil
	}
	var out []report.LintFinding
	for _, f := range reg.Lint() {
		out = append(out, report.LintFinding{Schema: f.Schema, File: f.File, Path: f.Path, Rule: f.Rule, Message: f.Message, Suggestion: f.Suggestion})
	}
	return out
}

func (s *Server) clusters(w http.ResponseWriter, r *http.Request) {
	q, err := readClusterQuery(r.URL.Query())
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err)
		return
	}
	narrow := q.Class != "" || q.Model != "" || q.Keyword != ""
	top := q.Top
	if narrow {
		top = 0 // filtered below, then cut
	}
	rep, err := report.Build(r.Context(), s.cfg.Store, report.Options{Schema: q.Schema, Version: q.Version, Top: top, Source: s.cfg.Source, Now: s.cfg.Now, Lint: lintFindings(s.cfg.LoadSchemas)})
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	v := clustersView{Q: q, Report: rep, Lint: rep.Lint}
	total := rep.ClustersTotal
	cs := rep.Clusters
	if narrow {
		cs, err = s.narrow(r.Context(), cs, q)
		if err != nil {
			s.fail(w, r, http.StatusInternalServerError, err)
			return
		}
		total = len(cs)
		if q.Top > 0 && len(cs) > q.Top {
			cs = cs[:q.Top]
		}
		if q.Class != "" || q.Model != "" {
			v.Narrowed = "clusters with a dead letter of"
			if q.Class != "" {
				v.Narrowed += " class " + string(q.Class)
			}
			if q.Model != "" {
				v.Narrowed += " model " + q.Model
			}
			v.Narrowed += "; their counts cover every job of the cluster"
		}
	}
	v.Clusters = cs
	v.Shown = fmt.Sprintf("%d of %d clusters", len(cs), total)
	if len(cs) < total {
		v.Shown += " (top=0 for all)"
	}
	for _, c := range cs {
		v.MaxDead = max(v.MaxDead, c.DeadLetters)
	}
	v.Schemas = rep.Schemas()
	s.render(w, r, http.StatusOK, "clusters", page{Title: "Clusters", Nav: "clusters", Data: v})
}

// narrow keeps the clusters of the keyword, and those with a dead letter of
// the class and model asked for (the report's counts are over every class
// and model: a cluster is a field's failures, whoever made them).
func (s *Server) narrow(ctx context.Context, cs []report.Cluster, q clusterQuery) ([]report.Cluster, error) {
	var out []report.Cluster
	for _, c := range cs {
		if q.Keyword != "" && c.Keyword != q.Keyword && !strings.HasPrefix(c.Keyword, q.Keyword+"/") { // x-rules: every rule
			continue
		}
		if q.Class != "" || q.Model != "" {
			one, err := s.cfg.Store.List(ctx, index.Filter{Cluster: c.ID, Class: q.Class, Model: q.Model, Limit: 1, IncludeReplayed: true})
			if err != nil {
				return nil, err
			}
			if len(one) == 0 {
				continue
			}
		}
		out = append(out, c)
	}
	return out, nil
}

// clusterView is one cluster's page.
type clusterView struct {
	C report.Cluster
	// Rules are the x-rules the cluster's keyword names (x-rules/<i>) in
	// the schema as loaded now, when its version is the cluster's.
	Rules    []schemas.Rule
	Dead     []index.Entry
	More     bool
	Filter   string
	Versions []string
}

func (s *Server) cluster(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("id")
	rep, err := report.Build(r.Context(), s.cfg.Store, report.Options{Version: report.VersionAll, Source: s.cfg.Source, Now: s.cfg.Now})
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	var v clusterView
	found := false
	for _, c := range rep.Clusters {
		if c.ID == id {
			v.C, found = c, true
			break
		}
	}
	if !found {
		s.fail(w, r, http.StatusNotFound, errors.New("no cluster "+id+" in the index"))
		return
	}
	v.Rules = s.rulesOf(v.C)
	v.Dead, err = s.cfg.Store.List(r.Context(), index.Filter{Cluster: id, Limit: s.cfg.PageSize + 1})
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	if len(v.Dead) > s.cfg.PageSize {
		v.Dead, v.More = v.Dead[:s.cfg.PageSize], true
	}
	v.Filter = url.Values{"cluster": {id}}.Encode()
	s.render(w, r, http.StatusOK, "cluster", page{Title: "Cluster " + id, Nav: "clusters", Data: v})
}

// rulesOf returns the rules an x-rules cluster fails on: those of the
// schema's current version with the keyword's index, narrowed to the
// ones reported at the cluster's path when that tells them apart. None
// when the schemas do not load or the version is another.
func (s *Server) rulesOf(c report.Cluster) []schemas.Rule {
	idx, ok := strings.CutPrefix(c.Keyword, schemas.KeywordRules+"/")
	if !ok || s.cfg.LoadSchemas == nil {
		return nil
	}
	n, err := strconv.Atoi(idx)
	if err != nil {
		return nil
	}
	reg, err := s.cfg.LoadSchemas()
	if err != nil {
		return nil
	}
	sc, ok := reg.Get(c.Schema)
	if !ok || sc.Version != c.Version {
		return nil
	}
	var all, at []schemas.Rule
	for _, r := range sc.Rules() {
		if r.Index != n {
			continue
		}
		all = append(all, r)
		if strings.HasSuffix(c.Path, r.Path) {
			at = append(at, r)
		}
	}
	if len(at) > 0 {
		return at
	}
	return all
}
