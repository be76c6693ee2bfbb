package index

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/llmpipeline/pipeline/job"
	"github.com/llmpipeline/pipeline/report/cluster"
)

// Filter selects outcomes. Zero fields select everything. List, Purge and
// Export select dead letters only; Stats selects both statuses.
type Filter struct {
	Schema  string
	Version string
	// Class is a failure class (dead letters only).
	Class job.Class
	// Path selects outcomes with a diagnostic on this path at any attempt;
	// a concrete pointer or a pattern ("/items/*/price").
	Path string
	// Cluster selects outcomes with a diagnostic of this cluster (ClusterID)
	// at any attempt.
	Cluster string
	Model   string
	// Since and Until bound the finish time: Since <= t < Until.
	Since, Until time.Time
	// IDs selects these job ids.
	IDs []string
	// Limit caps the rows returned (List, Purge, Export); 0 means no cap.
	Limit int
	// Offset skips that many rows first (List's pages).
	Offset int
	// IncludeReplayed also selects runs superseded by a replay.
	IncludeReplayed bool
}

// where builds the WHERE clause over outcomes aliased o.
func (f Filter) where(deadOnly bool) (string, []any) {
	var conds []string
	var args []any
	if deadOnly {
		conds = append(conds, "o.dead = 1")
	}
	if !f.IncludeReplayed {
		conds = append(conds, "o.replayed = 0")
	}
	eq := func(col, v string) {
		if v != "" {
			conds = append(conds, col+" = ?")
			args = append(args, v)
		}
	}
	eq("o.schema_id", f.Schema)
	eq("o.version", f.Version)
	eq("o.class", string(f.Class))
	eq("o.model", f.Model)
	if !f.Since.IsZero() {
		conds = append(conds, "o.finished_at >= ?")
		args = append(args, f.Since.UnixMilli())
	}
	if !f.Until.IsZero() {
		conds = append(conds, "o.finished_at < ?")
		args = append(args, f.Until.UnixMilli())
	}
	if len(f.IDs) > 0 {
		conds = append(conds, "o.job_id IN ("+strings.TrimSuffix(strings.Repeat("?,", len(f.IDs)), ",")+")")
		for _, id := range f.IDs {
			args = append(args, id)
		}
	}
	if f.Path != "" {
		conds = append(conds, "EXISTS (SELECT 1 FROM failures f JOIN clusters c ON c.id = f.cluster WHERE f.outcome_id = o.id AND c.path = ?)")
		args = append(args, cluster.PathPattern(f.Path))
	}
	if f.Cluster != "" {
		conds = append(conds, "EXISTS (SELECT 1 FROM failures f WHERE f.outcome_id = o.id AND f.cluster = ?)")
		args = append(args, f.Cluster)
	}
	if len(conds) == 0 {
		return "", nil
	}
	return " WHERE " + strings.Join(conds, " AND "), args
}

func (f Filter) limit() string {
	var l string
	if f.Limit > 0 {
		l = fmt.Sprintf(" LIMIT %d", f.Limit)
	}
	if f.Offset > 0 {
		if l == "" {
			l = " LIMIT -1"
		}
		l += fmt.Sprintf(" OFFSET %d", f.Offset)
	}
	return l
}

// Stats are the counts `pipeline stats` prints.
type Stats struct {
	Jobs         int `json:"jobs"`
	Succeeded    int `json:"succeeded"`
	DeadLettered int `json:"dead_lettered"`
	// ByAttempt counts succeeded jobs by the number of model calls they took.
	ByAttempt map[int]int `json:"by_attempt"`
	// ByClass counts dead letters by failure class.
	ByClass  map[job.Class]int      `json:"by_class"`
	BySchema map[string]SchemaStats `json:"by_schema"`
	Tokens   Tokens                 `json:"tokens"`
	// CostUSD is the cost in US dollars of every attempt whose model's
	// price was known; PricedJobs counts the jobs with such an attempt
	// (0: no cost is known, CostUSD says nothing).
	CostUSD    float64 `json:"cost_usd"`
	PricedJobs int     `json:"priced_jobs"`
	// Batch counts the attempts that went through a provider batch and
	// their cost (part of CostUSD).
	Batch BatchStats `json:"batch"`
}

// BatchStats are the attempts made through provider batches.
type BatchStats struct {
	Attempts int     `json:"attempts"`
	CostUSD  float64 `json:"cost_usd"`
}

// SchemaStats are the counts of one schema.
type SchemaStats struct {
	Jobs         int     `json:"jobs"`
	Succeeded    int     `json:"succeeded"`
	DeadLettered int     `json:"dead_lettered"`
	CostUSD      float64 `json:"cost_usd"`
}

// Tokens sums model tokens over the selected jobs.
type Tokens struct {
	Prompt     int `json:"prompt"`
	Completion int `json:"completion"`
	// Healing is the prompt and completion tokens of attempts after the first.
	Healing int `json:"healing"`
}

// Stats counts the selected outcomes (both statuses; runs superseded by a
// replay only with IncludeReplayed).
func (s *Store) Stats(ctx context.Context, f Filter) (Stats, error) {
	st := Stats{ByAttempt: map[int]int{}, ByClass: map[job.Class]int{}, BySchema: map[string]SchemaStats{}}
	where, args := f.where(false)
	q := `SELECT o.schema_id, o.dead, o.attempts, o.class, COUNT(*), SUM(o.prompt_tokens), SUM(o.completion_tokens), SUM(o.heal_tokens),
		       SUM(o.cost_usd), SUM(o.priced), SUM(o.batch_attempts), SUM(o.batch_cost_usd)
		FROM outcomes o` + where + ` GROUP BY o.schema_id, o.dead, o.attempts, o.class`
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return Stats{}, fmt.Errorf("reading stats: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var schema string
		var class job.Class
		var dead, attempts, n, p, c, h, priced, batchN int
		var cost, batchCost float64
		if err := rows.Scan(&schema, &dead, &attempts, &class, &n, &p, &c, &h, &cost, &priced, &batchN, &batchCost); err != nil {
			return Stats{}, fmt.Errorf("reading stats: %w", err)
		}
		ss := st.BySchema[schema]
		st.Jobs += n
		ss.Jobs += n
		if dead == 1 {
			st.DeadLettered += n
			ss.DeadLettered += n
			st.ByClass[class] += n
		} else {
			st.Succeeded += n
			ss.Succeeded += n
			st.ByAttempt[attempts] += n
		}
		ss.CostUSD += cost
		st.BySchema[schema] = ss
		st.CostUSD += cost
		st.PricedJobs += priced
		st.Batch.Attempts += batchN
		st.Batch.CostUSD += batchCost
		st.Tokens.Prompt += p
		st.Tokens.Completion += c
		st.Tokens.Healing += h
	}
	if err := rows.Err(); err != nil {
		return Stats{}, fmt.Errorf("reading stats: %w", err)
	}
	return st, nil
}

// Entry is one dead letter as `pipeline dlq list` shows it.
type Entry struct {
	JobID    string    `json:"job_id"`
	Run      int       `json:"run"`
	Schema   string    `json:"schema"`
	Version  string    `json:"version"`
	Class    job.Class `json:"class"`
	Reason   string    `json:"reason"`
	Model    string    `json:"model"`
	Attempts int       `json:"attempts"`
	// FirstPath is the first failing path of the last attempt.
	FirstPath string    `json:"first_path"`
	FailedAt  time.Time `json:"failed_at"`
	Replayed  bool      `json:"replayed"`
}

// List returns the selected dead letters, newest first.
func (s *Store) List(ctx context.Context, f Filter) ([]Entry, error) {
	where, args := f.where(true)
	q := `SELECT o.job_id, o.run, o.schema_id, o.version, o.class, o.reason, o.model, o.attempts, o.first_path, o.finished_at, o.replayed
		FROM outcomes o` + where + ` ORDER BY o.finished_at DESC, o.id DESC` + f.limit()
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("listing dead letters: %w", err)
	}
	defer rows.Close()
	var out []Entry
	for rows.Next() {
		var e Entry
		var at int64
		if err := rows.Scan(&e.JobID, &e.Run, &e.Schema, &e.Version, &e.Class, &e.Reason, &e.Model, &e.Attempts, &e.FirstPath, &at, &e.Replayed); err != nil {
			return nil, fmt.Errorf("listing dead letters: %w", err)
		}
		e.FailedAt = time.UnixMilli(at).UTC()
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("listing dead letters: %w", err)
	}
	return out, nil
}

// Get returns the latest run of a job (either status) with its whole
// transcript: the job, every raw output, the diagnostics per attempt. Data
// is not kept. It returns ErrNotFound for an unknown job.
func (s *Store) Get(ctx context.Context, jobID string) (job.Outcome, error) {
	var body []byte
	err := s.r.QueryRowContext(ctx, `SELECT p.body FROM outcomes o JOIN payloads p ON p.outcome_id = o.id
		WHERE o.job_id = ? ORDER BY o.run DESC LIMIT 1`, jobID).Scan(&body)
	if errors.Is(err, sql.ErrNoRows) {
		return job.Outcome{}, fmt.Errorf("getting job %s: %w", jobID, ErrNotFound)
	}
	if err != nil {
		return job.Outcome{}, fmt.Errorf("getting job %s: %w", jobID, err)
	}
	o, err := readPayload(body)
	if err != nil {
		return job.Outcome{}, fmt.Errorf("getting job %s: %w", jobID, err)
	}
	return o, nil
}

// MarkReplayed marks one run of a job as replayed (its job was republished),
// so List leaves it out unless asked. ErrNotFound if there is no such run.
func (s *Store) MarkReplayed(ctx context.Context, jobID string, run int) error {
	res, err := s.w.ExecContext(ctx, `UPDATE outcomes SET replayed = 1 WHERE job_id = ? AND run = ?`, jobID, run)
	if err != nil {
		return fmt.Errorf("marking job %s run %d replayed: %w", jobID, run, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return fmt.Errorf("marking job %s run %d replayed: %w", jobID, run, err)
	}
	if n == 0 {
		return fmt.Errorf("marking job %s run %d replayed: %w", jobID, run, ErrNotFound)
	}
	return nil
}

// Purge deletes the selected dead letters (with their trace) and returns
// their job ids; with dryRun it only returns the ids.
func (s *Store) Purge(ctx context.Context, f Filter, dryRun bool) ([]string, error) {
	runs, err := s.PurgeRuns(ctx, f, dryRun)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(runs))
	for i, r := range runs {
		ids[i] = r.JobID
	}
	return ids, nil
}

// Run names one run of a job.
type Run struct {
	JobID string
	Run   int
}

// PurgeRuns is Purge returning the runs it deleted (or, with dryRun, would
// delete): a caller that deletes their messages from the streams too needs
// the run to name the message.
func (s *Store) PurgeRuns(ctx context.Context, f Filter, dryRun bool) ([]Run, error) {
	where, args := f.where(true)
	q := `SELECT o.id, o.job_id, o.run FROM outcomes o` + where + ` ORDER BY o.finished_at DESC, o.id DESC` + f.limit()
	if dryRun {
		runs, _, err := s.runs(ctx, s.r, q, args)
		if err != nil {
			return nil, fmt.Errorf("purging dead letters (dry run): %w", err)
		}
		return runs, nil
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return nil, fmt.Errorf("purging dead letters: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	runs, rowIDs, err := s.runs(ctx, tx, q, args)
	if err != nil {
		return nil, fmt.Errorf("purging dead letters: %w", err)
	}
	if err := deleteOutcomes(ctx, tx, rowIDs); err != nil {
		return nil, fmt.Errorf("purging dead letters: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return nil, fmt.Errorf("purging dead letters: committing: %w", err)
	}
	return runs, nil
}

func (s *Store) runs(ctx context.Context, db querier, q string, args []any) ([]Run, []int64, error) {
	rows, err := db.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, nil, err
	}
	defer rows.Close()
	var runs []Run
	var rowIDs []int64
	for rows.Next() {
		var id int64
		var r Run
		if err := rows.Scan(&id, &r.JobID, &r.Run); err != nil {
			return nil, nil, err
		}
		runs = append(runs, r)
		rowIDs = append(rowIDs, id)
	}
	return runs, rowIDs, rows.Err()
}

type querier interface {
	QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error)
}

// deleteOutcomes deletes outcome rows by id; ON DELETE CASCADE removes
// their payloads, attempts and failures.
func deleteOutcomes(ctx context.Context, tx *sql.Tx, rowIDs []int64) error {
	st, err := tx.PrepareContext(ctx, `DELETE FROM outcomes WHERE id = ?`)
	if err != nil {
		return err
	}
	defer st.Close()
	for _, id := range rowIDs {
		if _, err := st.ExecContext(ctx, id); err != nil {
			return err
		}
	}
	return nil
}

// Export writes the selected dead letters as JSON Lines of Outcome (newest
// first) and returns how many it wrote.
func (s *Store) Export(ctx context.Context, f Filter, w io.Writer) (int, error) {
	where, args := f.where(true)
	q := `SELECT p.body FROM outcomes o JOIN payloads p ON p.outcome_id = o.id` + where +
		` ORDER BY o.finished_at DESC, o.id DESC` + f.limit()
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return 0, fmt.Errorf("exporting dead letters: %w", err)
	}
	defer rows.Close()
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	n := 0
	for rows.Next() {
		var body []byte
		if err := rows.Scan(&body); err != nil {
			return n, fmt.Errorf("exporting dead letters: %w", err)
		}
		o, err := readPayload(body)
		if err != nil {
			return n, fmt.Errorf("exporting dead letters: %w", err)
		}
		if err := enc.Encode(&o); err != nil {
			return n, fmt.Errorf("exporting dead letters: writing: %w", err)
		}
		n++
	}
	if err := rows.Err(); err != nil {
		return n, fmt.Errorf("exporting dead letters: %w", err)
	}
	return n, nil
}

// RetainPlan is what a retention pass would delete. Retain computes it and
// deletes nothing; the caller warns, meters, then calls Apply.
type RetainPlan struct {
	// Cutoff is now - maxAge (zero when no age limit).
	Cutoff time.Time `json:"cutoff"`
	// ByAge counts outcomes (dead letters and succeeded traces) older than Cutoff.
	ByAge int `json:"by_age"`
	// ByRows counts the oldest dead letters beyond maxRows (not already by age).
	ByRows int `json:"by_rows"`
	// DeadLetters are the job ids of the dead letters that would go.
	DeadLetters []string `json:"dead_letters"`
	// Succeeded counts the succeeded traces that would go.
	Succeeded int `json:"succeeded"`

	rowIDs []int64
}

// Empty reports whether the plan deletes nothing.
func (p RetainPlan) Empty() bool { return len(p.rowIDs) == 0 }

// Retain plans retention: every outcome finished before now-maxAge
// (maxAge > 0), and the oldest dead letters beyond the newest maxRows
// (maxRows > 0). It never deletes: pass the plan to Apply.
func (s *Store) Retain(ctx context.Context, maxAge time.Duration, maxRows int) (RetainPlan, error) {
	var p RetainPlan
	taken := map[int64]bool{}
	add := func(q string, args []any, byAge bool) error {
		rows, err := s.r.QueryContext(ctx, q, args...)
		if err != nil {
			return err
		}
		defer rows.Close()
		for rows.Next() {
			var id int64
			var job string
			var dead bool
			if err := rows.Scan(&id, &job, &dead); err != nil {
				return err
			}
			if taken[id] {
				continue
			}
			taken[id] = true
			p.rowIDs = append(p.rowIDs, id)
			if byAge {
				p.ByAge++
			} else {
				p.ByRows++
			}
			if dead {
				p.DeadLetters = append(p.DeadLetters, job)
			} else {
				p.Succeeded++
			}
		}
		return rows.Err()
	}
	if maxAge > 0 {
		p.Cutoff = time.Now().Add(-maxAge).UTC()
		if err := add(`SELECT id, job_id, dead FROM outcomes WHERE finished_at < ? ORDER BY finished_at, id`, []any{p.Cutoff.UnixMilli()}, true); err != nil {
			return RetainPlan{}, fmt.Errorf("planning retention by age: %w", err)
		}
	}
	if maxRows > 0 {
		if err := add(`SELECT id, job_id, dead FROM outcomes WHERE dead = 1 ORDER BY finished_at DESC, id DESC LIMIT -1 OFFSET ?`, []any{maxRows}, false); err != nil {
			return RetainPlan{}, fmt.Errorf("planning retention by rows: %w", err)
		}
	}
	return p, nil
}

// Apply deletes exactly the outcomes of a plan from Retain and returns how
// many it deleted (fewer if some went meanwhile).
func (s *Store) Apply(ctx context.Context, p RetainPlan) (int, error) {
	if p.Empty() {
		return 0, nil
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("applying retention: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	st, err := tx.PrepareContext(ctx, `DELETE FROM outcomes WHERE id = ?`)
	if err != nil {
		return 0, fmt.Errorf("applying retention: %w", err)
	}
	defer st.Close()
	n := 0
	for _, id := range p.rowIDs {
		res, err := st.ExecContext(ctx, id)
		if err != nil {
			return 0, fmt.Errorf("applying retention: %w", err)
		}
		k, _ := res.RowsAffected()
		n += int(k)
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("applying retention: committing: %w", err)
	}
	return n, nil
}

// Reset empties the index and forgets the stream cursors (for `pipeline
// dlq rebuild`, which then writes the streams back into it). The
// migrations stay applied, and so do the stored evals (table evals), which
// are the user's and not the streams'.
func (s *Store) Reset(ctx context.Context) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("resetting the index: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	for _, t := range []string{"failures", "attempts", "payloads", "result_data", "outcomes", "clusters", "stream_cursors"} {
		if _, err := tx.ExecContext(ctx, "DELETE FROM "+t); err != nil {
			return fmt.Errorf("resetting the index: emptying %s: %w", t, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("resetting the index: committing: %w", err)
	}
	return nil
}
