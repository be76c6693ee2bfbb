package report

import (
	"fmt"
	"sort"
	"strings"

	"github.com/llmpipeline/pipeline/index"
)

// ModelShare is the jobs of one funnel whose final answer came from one
// model (the primary, or a fallback that took the job on).
type ModelShare struct {
	Model        string `json:"model"`
	Jobs         int    `json:"jobs"`
	Succeeded    int    `json:"succeeded"`
	DeadLettered int    `json:"dead_lettered"`
	// HealedByFallback counts the succeeded jobs among Succeeded whose
	// first attempt was another model's.
	HealedByFallback int `json:"healed_by_fallback"`
	// CostUSD is the known cost of these jobs, every attempt whatever its
	// model; nil when no price was known.
	CostUSD *float64 `json:"cost_usd"`
}

// costs fills the funnels' cost and model figures from their rows:
//
//   - CostUSD: every attempt of every job whose model's price was known;
//   - CostPerSucceeded: CostUSD per succeeded job, the cost of the
//     failures included (what one valid result cost); nil when no cost is
//     known or nothing succeeded;
//   - HealCostShare: the share of CostUSD spent on attempts after the
//     first (fallback attempts included);
//   - HealedByFallback: succeeded jobs whose answer came from another
//     model than their first attempt's, which a schema author reads as
//     "only the fallback could satisfy this schema";
//   - Models: the jobs per model of their final answer.
func costs(out map[string]*Funnel, rows []index.FunnelRow, key func(index.FunnelRow) string) {
	type acc struct {
		cost, heal float64
		priced     int
		models     map[string]*ModelShare
	}
	accs := map[string]*acc{}
	for _, r := range rows {
		k := key(r)
		a := accs[k]
		if a == nil {
			a = &acc{models: map[string]*ModelShare{}}
			accs[k] = a
		}
		a.cost += r.CostUSD
		a.heal += r.HealCostUSD
		a.priced += r.Priced
		out[k].Batch.Attempts += r.BatchAttempts
		out[k].Batch.CostUSD += r.BatchCostUSD
		m := a.models[r.Model]
		if m == nil {
			m = &ModelShare{Model: r.Model}
			a.models[r.Model] = m
		}
		m.Jobs += r.Jobs
		if r.Priced > 0 {
			c := r.CostUSD
			if m.CostUSD != nil {
				c += *m.CostUSD
			}
			m.CostUSD = &c
		}
		if r.Dead {
			m.DeadLettered += r.Jobs
			continue
		}
		m.Succeeded += r.Jobs
		if r.FirstModel != "" && r.Model != r.FirstModel {
			m.HealedByFallback += r.Jobs
			out[k].HealedByFallback += r.Jobs
		}
	}
	for k, fu := range out {
		fu.Models = []ModelShare{}
		a := accs[k]
		if a == nil {
			continue
		}
		for _, m := range a.models {
			fu.Models = append(fu.Models, *m)
		}
		sort.Slice(fu.Models, func(i, j int) bool {
			if fu.Models[i].Jobs != fu.Models[j].Jobs {
				return fu.Models[i].Jobs > fu.Models[j].Jobs
			}
			return fu.Models[i].Model < fu.Models[j].Model
		})
		if a.priced == 0 {
			continue
		}
		c := a.cost
		fu.CostUSD = &c
		if fu.Succeeded > 0 {
			per := c / float64(fu.Succeeded)
			fu.CostPerSucceeded = &per
		}
		if c > 0 {
			fu.HealCostShare = a.heal / c
		}
	}
}

// costShown reports whether the report has cost or model figures worth a
// section: a known cost, a job healed by a fallback, or several models.
func (r *Report) costShown() bool {
	for _, f := range r.Funnel {
		if f.CostUSD != nil || f.HealedByFallback > 0 || len(f.Models) > 1 {
			return true
		}
	}
	return false
}

// dollars formats an optional amount, "-" when unknown.
func dollars(v *float64) string {
	if v == nil {
		return "-"
	}
	return "$" + strings.TrimRight(strings.TrimRight(fmt.Sprintf("%.6f", *v), "0"), ".")
}

// modelsLine is a funnel's models as one line: "openai:a 8 (6 ok), openai:b 2 (2 ok, 2 by fallback)".
func modelsLine(f *Funnel) string {
	parts := make([]string, 0, len(f.Models))
	for _, m := range f.Models {
		name := m.Model
		if name == "" {
			name = "(unrecorded)"
		}
		p := fmt.Sprintf("%s %d (%d ok", name, m.Jobs, m.Succeeded)
		if m.HealedByFallback > 0 {
			p += fmt.Sprintf(", %d by fallback", m.HealedByFallback)
		}
		parts = append(parts, p+")")
	}
	return strings.Join(parts, ", ")
}

// costRow is one funnel's cost figures, as the renderers print them:
// cost, cost per success, heal cost share, healed by fallback, models.
func costRow(f *Funnel) [5]string {
	share := "-"
	if f.CostUSD != nil {
		share = pct(f.HealCostShare)
	}
	return [5]string{dollars(f.CostUSD), dollars(f.CostPerSucceeded), share, fmt.Sprint(f.HealedByFallback), modelsLine(f)}
}
