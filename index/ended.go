package index

import (
	"context"
	"fmt"
	"time"
)

// EndedRun is one run the index holds an outcome of.
type EndedRun struct {
	JobID string
	Run   int
	Dead  bool
	At    time.Time
}

// EndedRuns calls yield with every run the index holds an outcome of, in
// the order they were indexed, until yield returns false: what the job
// ledger is rebuilt from when the streams no longer hold an outcome.
func (s *Store) EndedRuns(ctx context.Context, yield func(EndedRun) bool) error {
	rows, err := s.r.QueryContext(ctx, `SELECT job_id, run, dead, finished_at FROM outcomes ORDER BY id`)
	if err != nil {
		return fmt.Errorf("listing the ended runs of %s: %w", s.path, err)
	}
	defer rows.Close()
	for rows.Next() {
		var r EndedRun
		var at int64
		if err := rows.Scan(&r.JobID, &r.Run, &r.Dead, &at); err != nil {
			return fmt.Errorf("listing the ended runs of %s: %w", s.path, err)
		}
		r.At = time.UnixMilli(at).UTC()
		if !yield(r) {
			return nil
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("listing the ended runs of %s: %w", s.path, err)
	}
	return nil
}
