package index

import (
	"context"
	"fmt"
)

// FilesOfRuns returns the digests of the files the jobs of runs named,
// each once.
func (s *Store) FilesOfRuns(ctx context.Context, runs []Run) ([]string, error) {
	seen := map[string]bool{}
	var out []string
	for _, r := range runs {
		rows, err := s.r.QueryContext(ctx, `SELECT f.sha256 FROM outcome_files f JOIN outcomes o ON o.id = f.outcome_id
			WHERE o.job_id = ? AND o.run = ?`, r.JobID, r.Run)
		if err != nil {
			return nil, fmt.Errorf("reading the files of job %s: %w", r.JobID, err)
		}
		for rows.Next() {
			var d string
			if err := rows.Scan(&d); err != nil {
				rows.Close()
				return nil, fmt.Errorf("reading the files of job %s: %w", r.JobID, err)
			}
			if !seen[d] {
				seen[d] = true
				out = append(out, d)
			}
		}
		if err := rows.Close(); err != nil {
			return nil, err
		}
		if err := rows.Err(); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// FileReferenced reports whether an indexed run (a result or a dead
// letter, of any run) names the file of digest.
func (s *Store) FileReferenced(ctx context.Context, digest string) (bool, error) {
	var n int
	err := s.r.QueryRowContext(ctx, `SELECT count(*) FROM (SELECT 1 FROM outcome_files WHERE sha256 = ? LIMIT 1)`, digest).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("looking up the runs that name file %s: %w", digest, err)
	}
	return n > 0, nil
}
