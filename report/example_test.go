package report_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"time"

	"github.com/llmpipeline/pipeline/dlq"
	"github.com/llmpipeline/pipeline/report"
)

func Example() {
	dir, err := os.MkdirTemp("", "report-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	st, err := dlq.Open(filepath.Join(dir, "pipeline.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()

	// Four jobs fail on /total; none is healed.
	var outs []dlq.Outcome
	for i := 1; i <= 4; i++ {
		outs = append(outs, dlq.Outcome{
			JobID: fmt.Sprintf("inv-%d", i), Schema: "invoice", SchemaVersion: "3f9a", Status: dlq.StatusDeadLettered,
			Class: "exhausted", Attempts: 1, FinishedAt: time.Date(2025, 3, 1, 12, i, 0, 0, time.UTC),
			Trace: []dlq.Attempt{{N: 1, Diagnostics: []dlq.Diagnostic{{Path: "/total", Keyword: "type", Received: `"12,50"`}}}},
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
		fmt.Println(c.Schema, c.Path, c.Keyword, c.Jobs, c.DeadLetters, c.HealRate, c.Impossible)
		fmt.Println(c.Reason)
		fmt.Println(c.Suggestion)
	}
	fmt.Printf("first pass %.0f%%\n", r.Funnel["invoice"].FirstPass*100)
	// Output:
	// invoice /total type 4 4 0 true
	// failed in 4 jobs, healed in 0 (0%), at or below 10%
	// models send "12,50" at /total: accept that type (or coerce it before validation), or state the type in the field's description
	// first pass 0%
}
