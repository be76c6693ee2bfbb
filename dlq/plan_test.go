package dlq

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
		rows, err := s.r.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+q, args...)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		var plan []string
		for rows.Next() {
			var id, parent, notused int
			var detail string
			if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
				t.Fatal(err)
			}
			plan = append(plan, detail)
		}
		rows.Close()
		if got := strings.Join(plan, "; "); !strings.Contains(got, "outcomes_dead_by_time") {
			t.Errorf("%s: plan %q does not use outcomes_dead_by_time", name, got)
		}
	}
}
