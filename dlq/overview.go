package dlq

import (
	"context"
	"fmt"
)

// AwaitingReplay counts the jobs whose latest run is a dead letter marked
// replayed (its job was published again) and that have no later run in the
// index yet: a worker has still to run them. With Stats (which leaves
// superseded runs out) it makes the count of jobs: Stats.Jobs +
// AwaitingReplay is the number of distinct job ids in the index.
func (s *Store) AwaitingReplay(ctx context.Context) (int, error) {
	var n int
	// over the partial index of dead letters, replayed ones only
	err := s.r.QueryRowContext(ctx, `SELECT COUNT(DISTINCT d.job_id) FROM outcomes d WHERE d.dead = 1 AND d.replayed = 1
		AND NOT EXISTS (SELECT 1 FROM outcomes n WHERE n.job_id = d.job_id AND n.replayed = 0)`).Scan(&n)
	if err != nil {
		return 0, fmt.Errorf("counting replayed jobs awaiting their new run: %w", err)
	}
	return n, nil
}
