package index

import (
	"context"
	"fmt"

	"github.com/llmpipeline/pipeline/job"
)

// JobCounts are the counts of jobs (not runs) that the funnel rows, which
// count every run, cannot give. Each is read over an index: the job ids
// over the (job_id, run) key, the replayed dead letters over the partial
// index of dead letters.
type JobCounts struct {
	// Jobs counts the distinct job ids in the index.
	Jobs int
	// AwaitingReplay counts the jobs whose latest run is a dead letter
	// marked replayed (its job was published again) with no later run in
	// the index yet: a worker has still to run them.
	AwaitingReplay int
	// ReplayedDead counts, by failure class, the dead-letter runs marked
	// replayed: superseded by a later run, or awaiting it. The dead
	// letters of the funnel minus these are the jobs whose latest run is a
	// dead letter.
	ReplayedDead map[job.Class]int
}

// JobCounts reads the counts of jobs.
func (a *Analytics) JobCounts(ctx context.Context) (JobCounts, error) {
	c := JobCounts{ReplayedDead: map[job.Class]int{}}
	if err := a.r.QueryRowContext(ctx, `SELECT COUNT(DISTINCT job_id) FROM outcomes`).Scan(&c.Jobs); err != nil {
		return JobCounts{}, fmt.Errorf("counting jobs: %w", err)
	}
	err := a.r.QueryRowContext(ctx, `SELECT COUNT(DISTINCT d.job_id) FROM outcomes d WHERE d.dead = 1 AND d.replayed = 1
		AND NOT EXISTS (SELECT 1 FROM outcomes n WHERE n.job_id = d.job_id AND n.replayed = 0)`).Scan(&c.AwaitingReplay)
	if err != nil {
		return JobCounts{}, fmt.Errorf("counting replayed jobs awaiting their new run: %w", err)
	}
	rows, err := a.r.QueryContext(ctx, `SELECT class, COUNT(*) FROM outcomes WHERE dead = 1 AND replayed = 1 GROUP BY class`)
	if err != nil {
		return JobCounts{}, fmt.Errorf("counting replayed dead letters: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var class job.Class
		var n int
		if err := rows.Scan(&class, &n); err != nil {
			return JobCounts{}, fmt.Errorf("counting replayed dead letters: %w", err)
		}
		c.ReplayedDead[class] += n
	}
	if err := rows.Err(); err != nil {
		return JobCounts{}, fmt.Errorf("counting replayed dead letters: %w", err)
	}
	return c, nil
}
