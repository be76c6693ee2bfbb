package ui_test

import (
	"flag"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/index"
	"github.com/llmpipeline/pipeline/ui"
)

// bigStore is an index of n dead letters (and one success per four) over
// three schemas, written in large batches as the sink does.
func bigStore(b *testing.B, n int) *index.Store {
	b.Helper()
	st, err := index.Open(filepath.Join(b.TempDir(), "pipeline.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	schemas := []string{"invoice", "receipt", "contract"}
	const batch = 5000
	outs := make([]job.Outcome, 0, batch)
	start := time.Now()
	for i := 0; i < n+n/4; i++ {
		schema := schemas[i%3]
		o := job.Outcome{JobID: fmt.Sprintf("job-%08d", i), Schema: schema, SchemaVersion: "v-" + schema, Status: job.StatusDeadLettered,
			Class: "exhausted", Reason: "heal attempts used up", Attempts: 2, Model: "sim", FinishedAt: time.Unix(1_700_000_000+int64(i), 0),
			Trace: []job.Attempt{
				{N: 1, PromptTokens: 300, CompletionTokens: 80, Diagnostics: []job.Diagnostic{{Path: fmt.Sprintf("/f%d", i%7), Keyword: "type", Received: `"x"`}}},
				{N: 2, PromptTokens: 500, CompletionTokens: 80, Diagnostics: []job.Diagnostic{{Path: fmt.Sprintf("/f%d", i%7), Keyword: "type", Received: `"x"`}}},
			}}
		if i%5 == 4 {
			o.Status, o.Class, o.Reason = job.StatusSucceeded, "", ""
			o.Trace[1].Diagnostics = nil
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
	b.Logf("wrote %d dead letters in %v", n, time.Since(start).Round(time.Millisecond))
	return st
}

var overviewDead = flag.Int("overview-dead", 1_000_000, "dead letters in BenchmarkOverview's index")

// BenchmarkOverview serves the overview (JSON, the live fragment, the
// page) over 1M dead letters, as open tabs refreshing it do: from the
// figures the console keeps, read again in the background at most once a
// second. cold-ms is the first request, which reads the index itself. The
// 1M store takes about 5 minutes to write on 2 cores: select it alone with
// -bench Overview -benchtime 200x, or make it smaller with
// -overview-dead 100000.
func BenchmarkOverview(b *testing.B) {
	for _, n := range []int{*overviewDead} {
		b.Run(fmt.Sprintf("dead=%dk", n/1000), func(b *testing.B) {
			st := bigStore(b, n)
			srv, err := ui.New(ui.Config{Store: st})
			if err != nil {
				b.Fatal(err)
			}
			get := func(path string) {
				req := httptest.NewRequest(http.MethodGet, path, nil)
				req.Host = "127.0.0.1:8080"
				w := httptest.NewRecorder()
				srv.ServeHTTP(w, req)
				if w.Code != http.StatusOK {
					b.Fatalf("GET %s: %d %s", path, w.Code, w.Body)
				}
			}
			start := time.Now()
			get("/api/overview")
			cold := time.Since(start)
			for _, path := range []string{"/api/overview", "/overview/live", "/"} {
				b.Run(path, func(b *testing.B) {
					for b.Loop() {
						get(path)
					}
					b.ReportMetric(float64(cold.Milliseconds()), "cold-ms")
				})
			}
		})
	}
}
