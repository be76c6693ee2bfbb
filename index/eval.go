package index

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
)

// LatestRun is a job's latest indexed run, as `pipeline eval` joins it with
// labelled values: the run with the highest run number the index holds (the
// ledger's latest ended run, once the sink has indexed it). When that run is
// marked replayed, a later run superseded it and is gone from the index (a
// rerun's dead letter purged, say): the run is Superseded, with no Data.
type LatestRun struct {
	JobID   string
	Schema  string
	Version string
	// Model is the model of the run's final answer (of its last attempt).
	Model string
	Dead  bool
	// Superseded is set when the latest run the index holds was marked
	// replayed: a later run ended (or a dlq replay was published) and is not
	// in the index. Its data is not the job's latest: it counts as no result.
	Superseded bool
	// Data is a succeeded run's validated data, as JSON; nil for a dead
	// letter, and for a result indexed before migration 9 kept the data
	// (NoData).
	Data []byte
	// NoData is set for a succeeded run whose data the index does not hold
	// (indexed by an older binary: `pipeline dlq rebuild` indexes it again).
	NoData bool
}

// LatestRuns calls fn, in no particular order, with the latest indexed run
// of each of ids that has one; an id with no run in the index is not
// passed. The lookups go in one statement (one (job_id, run) index probe per
// id), so a caller streaming a large file hands it a few hundred ids at a
// time.
func (s *Store) LatestRuns(ctx context.Context, ids []string, fn func(LatestRun) error) error {
	if len(ids) == 0 {
		return nil
	}
	list, err := json.Marshal(ids)
	if err != nil {
		return fmt.Errorf("reading latest runs: %w", err)
	}
	rows, err := s.r.QueryContext(ctx, `SELECT o.job_id, o.schema_id, o.version, o.model, o.dead, o.replayed, d.data
		FROM outcomes o LEFT JOIN result_data d ON d.outcome_id = o.id
		WHERE o.id IN (SELECT (SELECT l.id FROM outcomes l WHERE l.job_id = j.value ORDER BY l.run DESC LIMIT 1)
			FROM json_each(?) j)`, string(list))
	if err != nil {
		return fmt.Errorf("reading latest runs: %w", err)
	}
	defer rows.Close()
	for rows.Next() {
		var r LatestRun
		var dead, replayed int
		var data sql.RawBytes
		if err := rows.Scan(&r.JobID, &r.Schema, &r.Version, &r.Model, &dead, &replayed, &data); err != nil {
			return fmt.Errorf("reading latest runs: %w", err)
		}
		r.Dead = dead == 1
		r.Superseded = replayed == 1
		switch {
		case r.Dead, r.Superseded:
		case data == nil:
			r.NoData = true
		default:
			r.Data = data // valid until the next rows.Next: fn must not keep it
		}
		if err := fn(r); err != nil {
			return err
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("reading latest runs: %w", err)
	}
	return nil
}

// EvalCounts are the counts of one field path (or of a whole group).
type EvalCounts struct {
	Correct int `json:"correct"`
	Wrong   int `json:"wrong"`
	Missing int `json:"missing"`
	Extra   int `json:"extra"`
}

// Figures computes c's precision = correct / (correct + wrong + extra),
// recall = correct / (correct + wrong + missing), and f1, their harmonic
// mean, each 0 when its denominator is. f1 is computed in one division,
// 2c / (2c + 2w + m + e), as v_evals does, so that a gate compares the
// figure the table prints (6 correct, 1 missing, 2 extra is exactly 0.8;
// 2PR/(P+R) rounds twice and gives 0.79999999999999993).
func (c EvalCounts) Figures() (precision, recall, f1 float64) {
	if d := c.Correct + c.Wrong + c.Extra; d > 0 {
		precision = float64(c.Correct) / float64(d)
	}
	if d := c.Correct + c.Wrong + c.Missing; d > 0 {
		recall = float64(c.Correct) / float64(d)
	}
	if c.Correct > 0 {
		f1 = float64(2*c.Correct) / float64(2*c.Correct+2*c.Wrong+c.Missing+c.Extra)
	}
	return precision, recall, f1
}

// EvalGroup is the figures of one eval for one (schema, version, model):
// one row of the evals table.
type EvalGroup struct {
	Schema, Version, Model string
	Records                int
	WithResult             int
	NoResult               int
	Exact                  int
	EvalCounts
	Fields map[string]EvalCounts
}

// Eval is one stored `pipeline eval`: when, over which labelled file, and
// its figures per group.
type Eval struct {
	// ID is set by SaveEval (and by the reads): the eval's number, growing.
	ID     int64
	At     time.Time
	File   string
	Digest string
	Groups []EvalGroup
}

// SaveEval stores e, one row per group, in one transaction, and returns its
// id. Evals are kept by dlq rebuild and retention.
func (s *Store) SaveEval(ctx context.Context, e Eval) (int64, error) {
	if len(e.Groups) == 0 {
		return 0, errors.New("storing an eval: no groups")
	}
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("storing an eval: %w", err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	var id int64
	for i, g := range e.Groups {
		fields, err := json.Marshal(g.Fields)
		if err != nil {
			return 0, fmt.Errorf("storing an eval: %w", err)
		}
		res, err := tx.ExecContext(ctx, `INSERT INTO evals (eval_id, at, file, digest, schema_id, version, model,
			records, with_result, no_result, exact, correct, wrong, missing, extra, fields)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			id, millis(e.At), e.File, e.Digest, g.Schema, g.Version, g.Model,
			g.Records, g.WithResult, g.NoResult, g.Exact, g.Correct, g.Wrong, g.Missing, g.Extra, string(fields))
		if err != nil {
			return 0, fmt.Errorf("storing an eval: %w", err)
		}
		if i == 0 {
			if id, err = res.LastInsertId(); err != nil {
				return 0, fmt.Errorf("storing an eval: %w", err)
			}
			if _, err := tx.ExecContext(ctx, `UPDATE evals SET eval_id = ? WHERE id = ?`, id, id); err != nil {
				return 0, fmt.Errorf("storing an eval: %w", err)
			}
		}
	}
	if err := tx.Commit(); err != nil {
		return 0, fmt.Errorf("storing an eval: committing: %w", err)
	}
	return id, nil
}

// Evals returns the stored evals, oldest first, each with the groups of
// schema (every group when schema is empty). An eval with no group of
// schema is left out.
func (s *Store) Evals(ctx context.Context, schema string) ([]Eval, error) {
	q := `SELECT eval_id, at, file, digest, schema_id, version, model, records, with_result, no_result, exact,
		correct, wrong, missing, extra, fields FROM evals`
	var args []any
	if schema != "" {
		q += ` WHERE schema_id = ?`
		args = append(args, schema)
	}
	q += ` ORDER BY eval_id, id`
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("reading evals: %w", err)
	}
	defer rows.Close()
	var out []Eval
	for rows.Next() {
		var e Eval
		var g EvalGroup
		var at int64
		var fields string
		if err := rows.Scan(&e.ID, &at, &e.File, &e.Digest, &g.Schema, &g.Version, &g.Model, &g.Records, &g.WithResult,
			&g.NoResult, &g.Exact, &g.Correct, &g.Wrong, &g.Missing, &g.Extra, &fields); err != nil {
			return nil, fmt.Errorf("reading evals: %w", err)
		}
		if err := json.Unmarshal([]byte(fields), &g.Fields); err != nil {
			return nil, fmt.Errorf("reading eval %d: fields: %w", e.ID, err)
		}
		if n := len(out); n > 0 && out[n-1].ID == e.ID {
			out[n-1].Groups = append(out[n-1].Groups, g)
			continue
		}
		e.At = time.UnixMilli(at).UTC()
		e.Groups = []EvalGroup{g}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading evals: %w", err)
	}
	return out, nil
}

// VersionEval is the latest eval of one schema version: the groups of that
// eval at that version, summed over models.
type VersionEval struct {
	Schema, Version string
	EvalID          int64
	At              time.Time
	File            string
	Digest          string
	Records         int
	Exact           int
	EvalCounts
	// Models are the models whose answers the eval scored at this version.
	Models []string
}

// LatestEvals returns, per schema version with a stored eval, its latest
// eval (the one with the highest id that scored a run of that version), in
// schema then first-eval order. schema, when set, restricts it.
func (s *Store) LatestEvals(ctx context.Context, schema string) ([]VersionEval, error) {
	q := `SELECT e.schema_id, e.version, e.eval_id, MAX(e.at), MAX(e.file), MAX(e.digest), SUM(e.records), SUM(e.exact),
		SUM(e.correct), SUM(e.wrong), SUM(e.missing), SUM(e.extra), group_concat(e.model, char(10))
		FROM evals e
		JOIN (SELECT schema_id, version, MAX(eval_id) AS eval_id, MIN(eval_id) AS first FROM evals
			WHERE version <> '' GROUP BY schema_id, version) l
		  ON l.schema_id = e.schema_id AND l.version = e.version AND l.eval_id = e.eval_id`
	var args []any
	if schema != "" {
		q += ` WHERE e.schema_id = ?`
		args = append(args, schema)
	}
	q += ` GROUP BY e.schema_id, e.version, e.eval_id ORDER BY e.schema_id, MIN(l.first)`
	rows, err := s.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("reading the latest evals: %w", err)
	}
	defer rows.Close()
	var out []VersionEval
	for rows.Next() {
		var v VersionEval
		var at int64
		var models string
		if err := rows.Scan(&v.Schema, &v.Version, &v.EvalID, &at, &v.File, &v.Digest, &v.Records, &v.Exact,
			&v.Correct, &v.Wrong, &v.Missing, &v.Extra, &models); err != nil {
			return nil, fmt.Errorf("reading the latest evals: %w", err)
		}
		v.At = time.UnixMilli(at).UTC()
		v.Models = strings.Split(models, "\n")
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading the latest evals: %w", err)
	}
	return out, nil
}
