package index

import (
	"database/sql"
	"math"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/job"
)

func usd(v float64) *float64 { return &v }

// costData: a first-pass success priced, a run healed by a fallback model
// (two attempts of the primary, one of the fallback, all priced), and a
// dead letter of a model priced nowhere.
func costData(t *testing.T, s *Store) []job.Outcome {
	t.Helper()
	ok := outcome("ok", false, 1, t0)
	ok.Model = "openai:p"
	ok.Trace[0].Model, ok.Trace[0].CostUSD = "openai:p", usd(0.25)
	ok.CostUSD = usd(0.25)

	fb := outcome("fb", false, 3, t0.Add(time.Second), job.Diagnostic{Path: "/total", Keyword: "type", Received: `"1"`})
	fb.Model = "openai:f"
	for k, m := range []string{"openai:p", "openai:p", "openai:f"} {
		fb.Trace[k].Model, fb.Trace[k].CostUSD = m, usd(float64(k+1))
	}
	fb.CostUSD = usd(6)

	dead := outcome("dead", true, 2, t0.Add(2*time.Second), job.Diagnostic{Path: "/total", Keyword: "type", Received: `"1"`})
	dead.Model = "openai:unpriced"
	dead.Schema = "receipt"
	for k := range dead.Trace {
		dead.Trace[k].Model = "openai:unpriced"
	}
	outs := []job.Outcome{ok, fb, dead}
	write(t, s, outs...)
	return outs
}

func TestCostInStatsAndFunnel(t *testing.T) {
	t.Parallel()
	s := openTemp(t)
	costData(t, s)
	st, err := s.Stats(t.Context(), Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if math.Abs(st.CostUSD-6.25) > 1e-9 || st.PricedJobs != 2 {
		t.Errorf("stats cost %v over %d priced jobs, want 6.25 over 2", st.CostUSD, st.PricedJobs)
	}
	if c := st.BySchema["invoice"].CostUSD; math.Abs(c-6.25) > 1e-9 {
		t.Errorf("by_schema invoice cost %v, want 6.25", c)
	}
	if c := st.BySchema["receipt"].CostUSD; c != 0 {
		t.Errorf("by_schema receipt cost %v, want 0 (unpriced)", c)
	}

	rows, err := s.Analytics().Funnel(t.Context(), Filter{})
	if err != nil {
		t.Fatal(err)
	}
	var healedByFallback, cost, healCost float64
	for _, r := range rows {
		if !r.Dead && r.Model != r.FirstModel {
			healedByFallback += float64(r.Jobs)
		}
		cost += r.CostUSD
		healCost += r.HealCostUSD
	}
	if healedByFallback != 1 || math.Abs(cost-6.25) > 1e-9 || math.Abs(healCost-5) > 1e-9 {
		t.Errorf("funnel: %v healed by a fallback, cost %v, heal cost %v; want 1, 6.25, 5", healedByFallback, cost, healCost)
	}
	only, err := s.Analytics().Funnel(t.Context(), Filter{Model: "openai:f"})
	if err != nil {
		t.Fatal(err)
	}
	if len(only) != 1 || only[0].Jobs != 1 || only[0].Model != "openai:f" || only[0].FirstModel != "openai:p" {
		t.Errorf("funnel of model openai:f: %+v, want the one run it answered last", only)
	}
}

func TestCostAndModelInViews(t *testing.T) {
	t.Parallel()
	s := openTemp(t)
	costData(t, s)
	db := plainDB(t, s.Path())
	got := map[string]sql.NullFloat64{}
	firsts := map[string]string{}
	rows, err := db.Query(`SELECT job_id, cost_usd, first_model FROM v_outcomes`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var job, first string
		var c sql.NullFloat64
		if err := rows.Scan(&job, &c, &first); err != nil {
			t.Fatal(err)
		}
		got[job], firsts[job] = c, first
	}
	rows.Close()
	if !got["ok"].Valid || got["ok"].Float64 != 0.25 || !got["fb"].Valid || got["fb"].Float64 != 6 || got["dead"].Valid {
		t.Errorf("v_outcomes cost_usd %v; want ok 0.25, fb 6, dead NULL (priced nowhere)", got)
	}
	if firsts["fb"] != "openai:p" {
		t.Errorf("v_outcomes first_model of fb %q, want openai:p", firsts["fb"])
	}
	var model string
	var c float64
	if err := db.QueryRow(`SELECT model, cost_usd FROM v_attempts WHERE job_id = 'fb' AND n = 3`).Scan(&model, &c); err != nil {
		t.Fatal(err)
	}
	if model != "openai:f" || c != 3 {
		t.Errorf("v_attempts fb/3: %s %v, want openai:f 3", model, c)
	}
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM attempts WHERE model = 'openai:p' AND cost_usd IS NOT NULL`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != 2 {
		t.Errorf("attempts table: %d priced attempts of openai:p, want 2 (fb's first two)", n)
	}
}
