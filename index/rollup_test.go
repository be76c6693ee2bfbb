package index

import (
	"fmt"
	"math"
	"path/filepath"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/internal/jobtest"
	"github.com/llmpipeline/pipeline/job"
)

// TestRollupsMatchTheRows: the funnel and the cluster counts read from the
// rollup tables (no time range) equal those counted from the rows (a time
// range that covers every row), after writes of several schemas, classes,
// models and replays, after retention and after a purge; a group whose
// rows are all gone leaves the rollup.
func TestRollupsMatchTheRows(t *testing.T) {
	t.Parallel()
	s := openTemp(t)
	an := s.Analytics()
	var outs []job.Outcome
	for i := range 300 {
		o := jobtest.Realistic(i)
		o.Schema = []string{"invoice", "receipt", "contract"}[i%3]
		o.SchemaVersion = fmt.Sprintf("v%d", i%2)
		o.Model = []string{"sim", "openai:gpt-x"}[i%2]
		o.Attempts = 1 + i%3
		if i%4 == 0 {
			o.Status, o.Class, o.Trace = job.StatusSucceeded, "", o.Trace[:1]
		}
		cost := 0.001 * float64(i%7)
		o.CostUSD = &cost
		o.Run = 1 + i%2 // every second job's second run: its first is marked replayed
		outs = append(outs, o)
	}
	if err := s.Write(t.Context(), outs); err != nil {
		t.Fatal(err)
	}
	all := Filter{Since: time.Unix(0, 0)} // a time range: read from the rows
	check := func(stage string) {
		t.Helper()
		for _, f := range []Filter{{}, {Schema: "receipt"}, {Schema: "invoice", Version: "v1"}, {Model: "sim"}} {
			scan := f
			scan.Since = all.Since
			want, err := an.Funnel(t.Context(), scan)
			if err != nil {
				t.Fatal(err)
			}
			got, err := an.Funnel(t.Context(), f)
			if err != nil {
				t.Fatal(err)
			}
			if !sameFunnel(got, want) {
				t.Errorf("%s, %+v: funnel from the rollup\n%+v\nfrom the rows\n%+v", stage, f, got, want)
			}
			if f.Model != "" {
				continue // clusters by model read the rows either way
			}
			wantC, err := an.ClusterCounts(t.Context(), scan)
			if err != nil {
				t.Fatal(err)
			}
			gotC, err := an.ClusterCounts(t.Context(), f)
			if err != nil {
				t.Fatal(err)
			}
			if fmt.Sprint(gotC) != fmt.Sprint(wantC) {
				t.Errorf("%s, %+v: clusters from the rollup\n%v\nfrom the rows\n%v", stage, f, gotC, wantC)
			}
			if len(wantC) == 0 && stage == "written" {
				t.Fatalf("%s, %+v: no clusters to compare", stage, f)
			}
		}
	}
	check("written")

	plan, err := s.Retain(t.Context(), 0, 200)
	if err != nil {
		t.Fatal(err)
	}
	if n, err := s.Apply(t.Context(), plan); err != nil || n == 0 {
		t.Fatalf("retention deleted %d (%v), want some", n, err)
	}
	check("after retention")

	if _, err := s.Purge(t.Context(), Filter{Schema: "contract"}, false); err != nil {
		t.Fatal(err)
	}
	check("after a purge")
	var left int
	if err := s.r.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM funnel_rollup WHERE schema_id = 'contract' AND dead = 1`).Scan(&left); err != nil || left != 0 {
		t.Errorf("%d rollup groups of purged dead letters left (%v), want 0", left, err)
	}
}

// sameFunnel compares funnel rows, costs within rounding (the rollup adds
// and subtracts them one row at a time).
func sameFunnel(a, b []FunnelRow) bool {
	if len(a) != len(b) || len(a) == 0 {
		return false
	}
	near := func(x, y float64) bool { return math.Abs(x-y) < 1e-9 }
	for i := range a {
		x, y := a[i], b[i]
		if !near(x.CostUSD, y.CostUSD) || !near(x.HealCostUSD, y.HealCostUSD) || !near(x.BatchCostUSD, y.BatchCostUSD) {
			return false
		}
		x.CostUSD, x.HealCostUSD, x.BatchCostUSD = y.CostUSD, y.HealCostUSD, y.BatchCostUSD
		if fmt.Sprint(x) != fmt.Sprint(y) {
			return false
		}
	}
	return true
}

// TestRollupMigrationFillsFromTheRows: an index written before the rollups
// existed gets them filled from its rows when a newer binary opens it.
func TestRollupMigrationFillsFromTheRows(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "pipeline.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	outs := make([]job.Outcome, 50)
	for i := range outs {
		outs[i] = jobtest.Realistic(i)
	}
	if err := s.Write(t.Context(), outs); err != nil {
		t.Fatal(err)
	}
	// As the file was before migration 13.
	for _, q := range []string{`DROP TABLE funnel_rollup`, `DROP TABLE cluster_rollup`,
		`DROP TRIGGER funnel_rollup_in`, `DROP TRIGGER funnel_rollup_out`, `DROP TRIGGER funnel_rollup_change`,
		`DROP TRIGGER cluster_rollup_in`, `DROP TRIGGER cluster_rollup_out`, `DROP TRIGGER cluster_rollup_change`,
		`DELETE FROM schema_migrations WHERE version >= 13`} {
		if _, err := s.w.ExecContext(t.Context(), q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s, err = Open(path)
	if err != nil {
		t.Fatalf("reopening: %v", err)
	}
	defer s.Close()
	an := s.Analytics()
	got, err := an.Funnel(t.Context(), Filter{})
	if err != nil {
		t.Fatal(err)
	}
	want, err := an.Funnel(t.Context(), Filter{Since: time.Unix(0, 0)})
	if err != nil {
		t.Fatal(err)
	}
	if !sameFunnel(got, want) || got[0].Jobs != len(outs) {
		t.Errorf("funnel after the migration\n%+v\nfrom the rows\n%+v", got, want)
	}
	gotC, err := an.ClusterCounts(t.Context(), Filter{})
	if err != nil {
		t.Fatal(err)
	}
	wantC, err := an.ClusterCounts(t.Context(), Filter{Since: time.Unix(0, 0)})
	if err != nil {
		t.Fatal(err)
	}
	if len(wantC) == 0 || fmt.Sprint(gotC) != fmt.Sprint(wantC) {
		t.Errorf("clusters after the migration\n%v\nfrom the rows\n%v", gotC, wantC)
	}
}
