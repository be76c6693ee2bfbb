package report

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/index"
)

// synthetic fills a store with n dead letters (plus one success per four)
// over 3 schemas and 60 fingerprints, written in large batches.
func synthetic(b *testing.B, n int) *index.Store {
	b.Helper()
	st, err := index.Open(filepath.Join(b.TempDir(), "pipeline.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	schemas := []string{"invoice", "receipt", "contract"}
	keywords := []string{"type", "enum", "required", "minimum"}
	const batch = 5000
	outs := make([]job.Outcome, 0, batch)
	start := time.Now()
	for i := 0; i < n+n/4; i++ {
		dead := i%5 != 4
		schema := schemas[i%3]
		p1 := fmt.Sprintf("/items/%d/f%d", i%7, (i/3)%5)
		p2 := fmt.Sprintf("/field%d", (i/7)%5)
		o := job.Outcome{JobID: fmt.Sprintf("job-%08d", i), Schema: schema, SchemaVersion: "v-" + schema, Status: job.StatusSucceeded,
			Attempts: 2, Model: "sim", FinishedAt: time.Unix(1_700_000_000+int64(i), 0)}
		if dead {
			o.Status, o.Class = job.StatusDeadLettered, "exhausted"
		}
		o.Trace = []job.Attempt{
			{N: 1, PromptTokens: 300, CompletionTokens: 80, Diagnostics: []job.Diagnostic{
				{Path: p1, Keyword: keywords[i%4], Received: fmt.Sprintf(`"v%d"`, i%11)},
				{Path: p2, Keyword: keywords[(i/4)%4], Received: fmt.Sprintf("%d", i%13)}}},
			{N: 2, PromptTokens: 500, CompletionTokens: 80},
		}
		if dead {
			o.Trace[1].Diagnostics = o.Trace[0].Diagnostics[:1]
		}
		outs = append(outs, o)
		if len(outs) == batch {
			if err := st.Write(b.Context(), outs); err != nil {
				b.Fatal(err)
			}
			outs = outs[:0]
		}
	}
	if err := st.Write(b.Context(), outs); err != nil {
		b.Fatal(err)
	}
	b.Logf("generated %d dead letters in %v", n, time.Since(start).Round(time.Millisecond))
	return st
}

// BenchmarkBuild times the full report (clusters with evidence and the
// funnel) over 100k and 1M synthetic dead letters; the 1M store takes a
// while to generate, select it with -bench 'Build/dead=1M'.
func BenchmarkBuild(b *testing.B) {
	for _, n := range []int{100_000, 1_000_000} {
		name := fmt.Sprintf("dead=%dk", n/1000)
		if n >= 1_000_000 {
			name = fmt.Sprintf("dead=%dM", n/1_000_000)
		}
		b.Run(name, func(b *testing.B) {
			st := synthetic(b, n)
			b.ReportAllocs()
			var r *Report
			for b.Loop() {
				var err error
				if r, err = Build(b.Context(), st, Options{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(r.Clusters)), "clusters")
		})
	}
}
