package index

import (
	"strings"
	"testing"
	"time"
)

// TestDeadLetterQueriesUseTheirIndex: the index over dead letters by time
// holds only dead letters (a success costs one b-tree insert less), and
// the queries over dead letters still read it rather than scan outcomes.
func TestDeadLetterQueriesUseTheirIndex(t *testing.T) {
	t.Parallel()
	s := openTemp(t)
	where, args := Filter{}.where(true)
	for name, q := range map[string]string{
		"list":      `SELECT o.job_id FROM outcomes o` + where + ` ORDER BY o.finished_at DESC, o.id DESC`,
		"retention": `SELECT id, job_id, dead FROM outcomes WHERE dead = 1 ORDER BY finished_at DESC, id DESC LIMIT -1 OFFSET 10`,
		"count":     `SELECT COUNT(*) FROM outcomes WHERE dead = 1`,
	} {
		if got := queryPlan(t, s, q, args); !strings.Contains(got, "outcomes_dead_by_time") {
			t.Errorf("%s: plan %q does not use outcomes_dead_by_time", name, got)
		}
	}
}

// TestFunnelReadsItsCoveringIndex: the funnel of the report and stats
// reads one index, every column it groups and sums in it, in its GROUP BY
// order: no lookup of the table's rows, no sort.
func TestFunnelReadsItsCoveringIndex(t *testing.T) {
	t.Parallel()
	s := openTemp(t)
	for _, f := range []Filter{{}, {Schema: "invoice"}, {Schema: "invoice", Version: "v1hash"}} {
		q, args := funnelQuery(f)
		got := queryPlan(t, s, q, args)
		if !strings.Contains(got, "USING COVERING INDEX outcomes_funnel_v4") || strings.Contains(got, "TEMP B-TREE") {
			t.Errorf("filter %+v: plan %q, want the covering index outcomes_funnel_v4 and no temp b-tree", f, got)
		}
	}
}

// queryPlan is SQLite's plan of q, its lines joined.
func queryPlan(t *testing.T, s *Store, q string, args []any) string {
	t.Helper()
	rows, err := s.r.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+q, args...)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	var plan []string
	for rows.Next() {
		var id, parent, notused int
		var detail string
		if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
			t.Fatal(err)
		}
		plan = append(plan, detail)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(plan, "; ")
}

// TestFirstLastAreSeeks: the first and last times of a funnel group and of
// a cluster are read by seeking their index, not by a MIN and a MAX over
// every row of the pass; with a model in the filter, the cluster counts
// build their list of the model's outcomes once.
func TestFirstLastAreSeeks(t *testing.T) {
	t.Parallel()
	s := openTemp(t)
	for _, f := range []Filter{{}, {Schema: "invoice", Model: "sim"}, {Since: time.Unix(1_700_000_000, 0)}} {
		q, args := funnelQuery(f)
		if got := queryPlan(t, s, q, args); !strings.Contains(got, "SEARCH o USING COVERING INDEX outcomes_funnel_v4 (schema_id=? AND version=? AND dead=? AND attempts=? AND class=? AND model=? AND first_model=?") {
			t.Errorf("funnel, filter %+v: plan %q, want a search of outcomes_funnel_v4 by the grouped columns", f, got)
		}
		q, args = clusterCountsQuery(f)
		got := queryPlan(t, s, q, args)
		if f.Model != "" {
			if n := strings.Count(got, "SCAN outcomes"); n != 1 {
				t.Errorf("cluster counts, filter %+v: plan %q reads outcomes %d times, want once", f, got, n)
			}
			continue
		}
		if n := strings.Count(got, "SEARCH failures USING COVERING INDEX failures_by_cluster (cluster=?"); n != 2 {
			t.Errorf("cluster counts, filter %+v: plan %q has %d searches of failures_by_cluster by cluster, want 2", f, got, n)
		}
	}
}
