package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"time"

	"github.com/llmpipeline/pipeline/dlq"
	"github.com/llmpipeline/pipeline/report"
)

// Overview is the overview page's figures; /api/overview serves it as JSON.
type Overview struct {
	Jobs         int            `json:"jobs"`
	Succeeded    int            `json:"succeeded"`
	DeadLettered int            `json:"dead_lettered"`
	ByClass      map[string]int `json:"by_class"`
	Tokens       int            `json:"tokens"`
	// Pending and InFlight come from the JOBS stream; nil when the console
	// has no NATS connection or the stream could not be read.
	Pending  *uint64 `json:"pending"`
	InFlight *int    `json:"in_flight"`
	// PerMinute is the outcomes indexed in the last minute.
	PerMinute int `json:"per_minute"`
	// Cost is the model spend of the jobs in US dollars (the report's
	// totals); nil, and not shown, when no model's price is known.
	Cost *float64 `json:"cost"`
	// Breaker is the state of this process's model circuit breaker, ""
	// when no workers run in this process.
	Breaker string `json:"breaker"`
	// Funnel has one row per schema version, sorted by schema then version.
	Funnel []*report.Funnel `json:"funnel"`
	// Error names what could not be read (the NATS connection's counts).
	Error string    `json:"error,omitempty"`
	At    time.Time `json:"at"`
}

func (s *Server) buildOverview(ctx context.Context) (Overview, error) {
	now := s.cfg.Now()
	st, err := s.cfg.Store.Stats(ctx, dlq.Filter{})
	if err != nil {
		return Overview{}, err
	}
	o := Overview{
		Jobs: st.Jobs, Succeeded: st.Succeeded, DeadLettered: st.DeadLettered, ByClass: st.ByClass,
		Tokens: st.Tokens.Prompt + st.Tokens.Completion, At: now.UTC(),
	}
	recent, err := s.cfg.Store.Stats(ctx, dlq.Filter{Since: now.Add(-time.Minute), IncludeReplayed: true})
	if err != nil {
		return Overview{}, err
	}
	o.PerMinute = recent.Jobs
	if s.cfg.Conn != nil {
		if p, err := s.cfg.Conn.Pending(ctx); err != nil {
			o.Error = "pending jobs unknown: " + err.Error()
		} else {
			o.Pending, o.InFlight = &p.Pending, &p.AckPending
		}
	}
	if s.cfg.Breaker != nil {
		o.Breaker = s.cfg.Breaker()
	}
	r, err := report.Build(ctx, s.cfg.Store, report.Options{Version: report.VersionAll, Top: 1, Source: s.cfg.Source, Now: s.cfg.Now})
	if err != nil {
		return Overview{}, err
	}
	o.Cost = r.Totals.CostUSD
	for _, f := range r.Funnel {
		o.Funnel = append(o.Funnel, f)
	}
	sort.Slice(o.Funnel, func(i, j int) bool {
		if o.Funnel[i].Schema != o.Funnel[j].Schema {
			return o.Funnel[i].Schema < o.Funnel[j].Schema
		}
		return o.Funnel[i].Version < o.Funnel[j].Version
	})
	return o, nil
}

func (s *Server) overview(w http.ResponseWriter, r *http.Request) {
	o, err := s.buildOverview(r.Context())
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	s.render(w, r, http.StatusOK, "overview", page{Title: "Overview", Nav: "overview", Refresh: true, Data: o})
}

func (s *Server) overviewJSON(w http.ResponseWriter, r *http.Request) {
	o, err := s.buildOverview(r.Context())
	if err != nil {
		http.Error(w, s.cfg.Secrets.String(err.Error()), http.StatusInternalServerError)
		return
	}
	b, err := json.Marshal(o)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(s.cfg.Secrets.Bytes(b)) // a client gone away is no error of ours
}

// segments stacks a funnel row for its bar: successes by attempt, then dead
// letters by class, each as a share of the row's jobs.
func segments(f *report.Funnel) []segment {
	var out []segment
	x := 0.0
	add := func(class, label string, n int) {
		if f.Jobs == 0 || n == 0 {
			return
		}
		w := float64(n) * 100 / float64(f.Jobs)
		out = append(out, segment{Class: class, Label: label, X: x, W: w})
		x += w
	}
	for _, s := range f.SucceededAt {
		class := "att1"
		if s.Attempt > 1 {
			class = "att2"
		}
		add(class, fmt.Sprintf("succeeded at attempt %d: %d", s.Attempt, s.Jobs), s.Jobs)
	}
	for _, c := range f.DeadByClass {
		add("dead", fmt.Sprintf("dead-lettered %s: %d", c.Class, c.Jobs), c.Jobs)
	}
	return out
}
