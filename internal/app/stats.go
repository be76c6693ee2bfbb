package app

import (
	"fmt"
	"io"
	"maps"
	"slices"
	"text/tabwriter"

	"github.com/llmpipeline/pipeline/index"
	"github.com/llmpipeline/pipeline/internal/escape"
	"github.com/llmpipeline/pipeline/job"
	"github.com/llmpipeline/pipeline/worker"
)

// WriteStats writes `pipeline stats`' table of s: the jobs, succeeded (by
// attempt) and dead-lettered (by class) with their shares, and the cost
// and batch figures when there are any.
func WriteStats(w io.Writer, s index.Stats) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintf(tw, "jobs\t%d\n", s.Jobs)
	fmt.Fprintf(tw, "succeeded\t%d\t%s\n", s.Succeeded, pct(s.Succeeded, s.Jobs))
	for _, k := range slices.Sorted(maps.Keys(s.ByAttempt)) {
		fmt.Fprintf(tw, "  at attempt %d\t%d\t%s\n", k, s.ByAttempt[k], pct(s.ByAttempt[k], s.Jobs))
	}
	fmt.Fprintf(tw, "dead_lettered\t%d\t%s\n", s.DeadLettered, pct(s.DeadLettered, s.Jobs))
	classes := make([]job.Class, 0, len(s.ByClass))
	for k := range s.ByClass {
		classes = append(classes, k)
	}
	slices.Sort(classes)
	for _, k := range classes {
		fmt.Fprintf(tw, "  %s\t%d\t%s\n", escape.Line(string(k)), s.ByClass[k], pct(s.ByClass[k], s.Jobs))
	}
	if s.PricedJobs > 0 {
		// Only when a price was known: a cost of 0 would say nothing.
		line := "$" + worker.Dollars(s.CostUSD)
		if s.PricedJobs < s.Jobs {
			line += fmt.Sprintf("\t(%d of %d jobs priced)", s.PricedJobs, s.Jobs)
		}
		fmt.Fprintf(tw, "cost_usd\t%s\n", line)
	}
	if s.Batch.Attempts > 0 {
		// Batch mode: the attempts answered through provider batches, at
		// the batch discount (part of cost_usd).
		fmt.Fprintf(tw, "batch_attempts\t%d\t$%s\n", s.Batch.Attempts, worker.Dollars(s.Batch.CostUSD))
	}
	return tw.Flush()
}

func pct(n, of int) string {
	if of == 0 {
		return ""
	}
	return fmt.Sprintf("%.1f%%", float64(n)*100/float64(of))
}
