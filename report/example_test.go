package report_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/llmpipeline/pipeline/index"
	"github.com/llmpipeline/pipeline/report"
)

func Example() {
	dir, err := os.MkdirTemp("", "report-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	st, err := index.Open(filepath.Join(dir, "pipeline.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()

	// Four jobs fail on /total and /currency. The heal turn fixes /currency
	// but never /total, so every job is dead-lettered: /total is impossible,
	// /currency only masked by it.
	var outs []job.Outcome
	for i := 1; i <= 4; i++ {
		total := job.Diagnostic{Path: "/total", Keyword: "type", Received: `"12,50"`}
		outs = append(outs, job.Outcome{
			JobID: fmt.Sprintf("inv-%d", i), Schema: "invoice", SchemaVersion: "3f9a", Status: job.StatusDeadLettered,
			Class: "exhausted", Attempts: 2, FinishedAt: time.Date(2025, 3, 1, 12, i, 0, 0, time.UTC),
			Trace: []job.Attempt{
				{N: 1, Class: "schema", Diagnostics: []job.Diagnostic{total, {Path: "/currency", Keyword: "enum", Received: `"eur"`}}},
				{N: 2, Class: "schema", Diagnostics: []job.Diagnostic{total}},
			},
		})
	}
	if err := st.Write(ctx, outs); err != nil {
		log.Fatal(err)
	}

	r, err := report.Build(ctx, st, report.Options{})
	if err != nil {
		log.Fatal(err)
	}
	for _, c := range r.Clusters {
		fmt.Println(c.Path, c.Keyword, "jobs", c.Jobs, "dead", c.DeadLetters, "heal", c.HealRate, "fix", c.FixRate, "impossible", c.Impossible, "masked", c.Masked)
		fmt.Println(" ", c.Reason)
		fmt.Println(" ", c.Suggestion)
	}
	fmt.Printf("first pass %.0f%%\n", r.Funnel["invoice"].FirstPass*100)
	// What the report covers: each schema's latest version by default.
	fmt.Println("versions", r.Filter.Version, r.Versions, "jobs", r.Totals.Jobs, "dead", r.Totals.DeadLettered, "clusters", r.ClustersTotal)
	// Output:
	// /total type jobs 4 dead 4 heal 0 fix 0 impossible true masked false
	//   failed in 4 jobs, healed in 0 (0%), fixed in 0 (0%), at or below 10%
	//   models send "12,50" at /total: accept that type (or coerce it before validation), or state the type in the field's description
	// /currency enum jobs 4 dead 4 heal 0 fix 1 impossible false masked true
	//   masked: fixed in 100% of its jobs (4 of 4), which were dead-lettered for other fields, most often /total (type) in 4
	//   not this field: /total (type) kills these jobs, fix it first
	// first pass 0%
	// versions latest map[invoice:[3f9a]] jobs 4 dead 4 clusters 2
}
