package report

import (
	"sort"

	"github.com/llmpipeline/pipeline/index"
)

// The heal funnel: what became of each schema version's jobs, built from
// the index's funnel rows (see index.Store.Funnel).

// funnel keys each schema version's funnel by the schema id, or by
// "schema@version" (the version's first 8 characters) for a schema with
// several versions in the selection: versions are never mixed.
func funnel(rows []index.FunnelRow, healed []index.VersionCount) map[string]*Funnel {
	versions := map[string]map[string]bool{}
	for _, r := range rows {
		if versions[r.Schema] == nil {
			versions[r.Schema] = map[string]bool{}
		}
		versions[r.Schema][r.Version] = true
	}
	key := func(r index.FunnelRow) string {
		if len(versions[r.Schema]) == 1 {
			return r.Schema
		}
		return r.Schema + "@" + short(r.Version)
	}
	out := map[string]*Funnel{}
	okTokens := map[string]int{}
	heal := map[string]int{}
	for _, r := range rows {
		k := key(r)
		fu := out[k]
		if fu == nil {
			fu = &Funnel{Schema: r.Schema, Version: r.Version, SucceededAt: []Step{}, DeadByClass: []ClassShare{}}
			out[k] = fu
		}
		fu.Jobs += r.Jobs
		fu.Tokens += r.Tokens
		heal[k] += r.HealTokens
		if r.Dead {
			fu.DeadLettered += r.Jobs
			fu.DeadByClass = addClass(fu.DeadByClass, r.Class, r.Jobs)
		} else {
			fu.Succeeded += r.Jobs
			okTokens[k] += r.Tokens
			fu.SucceededAt = addStep(fu.SucceededAt, r.Attempts, r.Jobs)
		}
	}
	for k, fu := range out {
		sort.Slice(fu.SucceededAt, func(i, j int) bool { return fu.SucceededAt[i].Attempt < fu.SucceededAt[j].Attempt })
		sort.Slice(fu.DeadByClass, func(i, j int) bool {
			a, b := fu.DeadByClass[i], fu.DeadByClass[j]
			if a.Jobs != b.Jobs {
				return a.Jobs > b.Jobs
			}
			return a.Class < b.Class
		})
		for i := range fu.SucceededAt {
			fu.SucceededAt[i].Share = ratio(fu.SucceededAt[i].Jobs, fu.Jobs)
			if fu.SucceededAt[i].Attempt == 1 {
				fu.FirstPass = fu.SucceededAt[i].Share
			}
		}
		for i := range fu.DeadByClass {
			fu.DeadByClass[i].Share = ratio(fu.DeadByClass[i].Jobs, fu.Jobs)
		}
		if fu.Succeeded > 0 {
			t := ratio(okTokens[k], fu.Succeeded)
			fu.TokensPerSucceeded = &t
		}
		fu.HealTokenShare = ratio(heal[k], fu.Tokens)
	}
	for _, h := range healed {
		if fu := out[key(index.FunnelRow{Schema: h.Schema, Version: h.Version})]; fu != nil && fu.Version == h.Version {
			fu.ReplayedHealed += h.N
		}
	}
	costs(out, rows, key)
	return out
}

func addStep(s []Step, attempt, n int) []Step {
	for i := range s {
		if s[i].Attempt == attempt {
			s[i].Jobs += n
			return s
		}
	}
	return append(s, Step{Attempt: attempt, Jobs: n})
}

func addClass(s []ClassShare, class string, n int) []ClassShare {
	if class == "" {
		class = "unknown"
	}
	for i := range s {
		if s[i].Class == class {
			s[i].Jobs += n
			return s
		}
	}
	return append(s, ClassShare{Class: class, Jobs: n})
}
