package index

import (
	"strings"
	"testing"
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
