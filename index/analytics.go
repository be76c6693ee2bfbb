package index

import (
	"context"
	"database/sql"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/llmpipeline/pipeline/job"
	"github.com/llmpipeline/pipeline/report/cluster"
)

// Analytics is the read side the report package (and the console's
// overview) builds on: aggregates computed by SQLite over covering indexes,
// so the report never scans payloads. Its methods honour Filter's Schema, Version, Since and Until,
// and Model (the model of a run's final answer) where they read failures
// or the funnel.
//
// A dead letter is "replayed, healed" when a later run of its job (a
// replay: same job id, higher run) succeeded. Such a run is evidence of
// the fix, not of the field: ClusterCounts counts these dead letters apart
// (Replayed) and the reads behind the report's flags (ClusterRecentEnds,
// ClusterBlockers, the dead letters of ClusterExamples) leave them out.
//
// An Analytics reads through its Store's read-only pool and is safe for
// concurrent use; it is valid until the Store is closed.
type Analytics struct {
	r *sql.DB // the Store's read-only pool
}

// Analytics returns the aggregate reads of the index.
func (s *Store) Analytics() *Analytics { return &Analytics{r: s.r} }

// replayHealed selects the ids of the replayed, healed dead letters: over
// the partial index of dead letters (replayed ones), then one lookup per
// such dead letter in the (job_id, run) index. SQLite evaluates it once
// per statement.
const replayHealed = `SELECT d.id FROM outcomes d WHERE d.dead = 1 AND d.replayed = 1
	AND EXISTS (SELECT 1 FROM outcomes n WHERE n.job_id = d.job_id AND n.run > d.run AND n.dead = 0)`

// notReplayHealed is a failures condition leaving out the rows of replayed,
// healed dead letters.
const notReplayHealed = ` AND NOT (dead = 1 AND outcome_id IN (` + replayHealed + `))`

// ClusterCount aggregates one fingerprint: in how many job runs it failed
// at some attempt, how many of those runs were dead-lettered, and in how
// many the model fixed it before the run ended.
type ClusterCount struct {
	ID                 string
	FingerprintVersion int
	cluster.Fingerprint
	Jobs        int
	DeadLetters int
	// Fixed counts the runs whose last validated attempt (one whose output
	// was parsed and validated, with every diagnostic kept) came after the
	// fingerprint's first failure and no longer failed on it: the succeeded
	// runs, and dead letters that died of other failures.
	Fixed int
	// DeadFixed counts the dead letters among Fixed: runs where the model
	// fixed this fingerprint but the job was dead-lettered for others.
	DeadFixed int
	// Replayed counts the dead letters among DeadLetters whose job
	// succeeded on a later run (replayed, healed); ReplayedFixed those of
	// them among DeadFixed.
	Replayed      int
	ReplayedFixed int
	FirstSeen     time.Time
	LastSeen      time.Time
}

// RunEnd is how one job run that failed on a fingerprint ended.
type RunEnd struct {
	Dead bool
	// Fixed: the fingerprint no longer failed at the run's last validated
	// attempt (see ClusterCount.Fixed).
	Fixed bool
}

// Blocker is a fingerprint that was still failing at the end of
// dead-lettered runs in which another fingerprint had been fixed.
type Blocker struct {
	ID string
	cluster.Fingerprint
	// Runs counts those dead-lettered runs.
	Runs int
}

// ValueCount is a received value and the number of job runs that sent it.
type ValueCount struct {
	Value string `json:"value"`
	Count int    `json:"count"`
}

// FunnelRow counts the outcomes of one (schema, version, status, attempts,
// class, model, first model).
type FunnelRow struct {
	Schema   string
	Version  string
	Dead     bool
	Attempts int
	Class    job.Class
	// Model is the model of the runs' last attempt (the final answer),
	// FirstModel the model of their first: they differ when a fallback
	// model answered last.
	Model      string
	FirstModel string
	Jobs       int
	Tokens     int
	HealTokens int
	// CostUSD and HealCostUSD are the known costs of every attempt and of
	// attempts 2..n; Priced counts the runs with a known cost.
	CostUSD     float64
	HealCostUSD float64
	Priced      int
	// BatchAttempts and BatchCostUSD are the attempts made through a
	// provider batch (batch mode) and their cost, part of CostUSD.
	BatchAttempts int
	BatchCostUSD  float64
	// First and Last are the earliest and latest finish times of these
	// outcomes.
	First, Last time.Time
}

func (f Filter) failureWhere(cluster string) (string, []any) {
	conds := []string{"lead = 1"}
	var args []any
	if cluster != "" {
		conds = append(conds, "cluster = ?")
		args = append(args, cluster)
	} else if f.Schema != "" || f.Version != "" {
		var sub []string
		if f.Schema != "" {
			sub = append(sub, "schema_id = ?")
			args = append(args, f.Schema)
		}
		if f.Version != "" {
			sub = append(sub, "version = ?")
			args = append(args, f.Version)
		}
		conds = append(conds, "cluster IN (SELECT id FROM clusters WHERE "+strings.Join(sub, " AND ")+")")
	}
	if f.Model != "" {
		conds = append(conds, "outcome_id IN (SELECT id FROM outcomes WHERE model = ?)")
		args = append(args, f.Model)
	}
	if !f.Since.IsZero() {
		conds = append(conds, "at >= ?")
		args = append(args, f.Since.UnixMilli())
	}
	if !f.Until.IsZero() {
		conds = append(conds, "at < ?")
		args = append(args, f.Until.UnixMilli())
	}
	return " WHERE " + strings.Join(conds, " AND "), args
}

// ClusterCounts returns every fingerprint with a failure in the selection.
// Counts are per job run: a replay is a new run.
func (a *Analytics) ClusterCounts(ctx context.Context, f Filter) ([]ClusterCount, error) {
	q, qargs := clusterCountsQuery(f)
	rows, err := a.r.QueryContext(ctx, q, qargs...)
	if err != nil {
		return nil, fmt.Errorf("counting clusters: %w", err)
	}
	defer rows.Close()
	var out []ClusterCount
	for rows.Next() {
		var c ClusterCount
		var first, last int64
		if err := rows.Scan(&c.ID, &c.FingerprintVersion, &c.Schema, &c.Version, &c.Path, &c.Keyword, &c.Jobs, &c.DeadLetters, &c.Fixed, &c.DeadFixed, &first, &last); err != nil {
			return nil, fmt.Errorf("counting clusters: %w", err)
		}
		c.FirstSeen, c.LastSeen = time.UnixMilli(first).UTC(), time.UnixMilli(last).UTC()
		out = append(out, c)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("counting clusters: %w", err)
	}
	where, args := f.failureWhere("")
	if err := a.countReplayHealed(ctx, where, args, out); err != nil {
		return nil, err
	}
	return out, nil
}

// clusterCountsQuery is ClusterCounts' query over the failures f selects
// (failureWhere). Selected by schema and version at most, the counts are
// cluster_rollup's, kept by the index's triggers: no pass over the
// failures at all. Otherwise one pass over failures_by_cluster, in its
// GROUP BY order. The first and last failure times are two seeks per
// cluster into that index (cluster, at, ...), not a MIN and a MAX over
// every row of the pass (which took 40 % of its time); with a model in the
// filter they stay in the pass, so that its list of the model's outcomes
// is built once.
func clusterCountsQuery(f Filter) (string, []any) {
	where, args := f.failureWhere("")
	if f.Model == "" && f.Since.IsZero() && f.Until.IsZero() {
		var conds []string
		var cargs []any
		if f.Schema != "" {
			conds, cargs = append(conds, "c.schema_id = ?"), append(cargs, f.Schema)
		}
		if f.Version != "" {
			conds, cargs = append(conds, "c.version = ?"), append(cargs, f.Version)
		}
		sel := ""
		if len(conds) > 0 {
			sel = " WHERE " + strings.Join(conds, " AND ")
		}
		return `SELECT c.id, c.fp_version, c.schema_id, c.version, c.path, c.keyword, g.jobs, g.dead, g.fixed, g.dead_fixed,
		       (SELECT MIN(at) FROM failures WHERE lead = 1 AND cluster = g.cluster),
		       (SELECT MAX(at) FROM failures WHERE lead = 1 AND cluster = g.cluster)
		FROM cluster_rollup g JOIN clusters c ON c.id = g.cluster` + sel + ` ORDER BY g.cluster`, cargs
	}
	pass, firstLast := `, MIN(at) AS first, MAX(at) AS last`, `g.first, g.last`
	if f.Model == "" {
		pass = ""
		firstLast = `(SELECT MIN(at) FROM failures` + where + ` AND cluster = g.cluster),
		       (SELECT MAX(at) FROM failures` + where + ` AND cluster = g.cluster)`
		args = slices.Concat(args, args, args)
	}
	return `SELECT c.id, c.fp_version, c.schema_id, c.version, c.path, c.keyword, g.jobs, g.dead, g.fixed, g.dead_fixed, ` + firstLast + `
		FROM (SELECT cluster, COUNT(*) AS jobs, SUM(dead) AS dead, SUM(fixed) AS fixed, SUM(dead * fixed) AS dead_fixed` + pass + `
		      FROM failures` + where + ` GROUP BY cluster) g
		JOIN clusters c ON c.id = g.cluster`, args
}

// countReplayHealed fills Replayed and ReplayedFixed: a second GROUP BY
// over the failures of the replayed, healed dead letters only, read by
// outcome id, so its cost follows the replays, not the index.
func (a *Analytics) countReplayHealed(ctx context.Context, where string, args []any, counts []ClusterCount) error {
	q := `SELECT cluster, COUNT(*), SUM(fixed) FROM failures` + where + ` AND dead = 1 AND outcome_id IN (` + replayHealed + `) GROUP BY cluster`
	rows, err := a.r.QueryContext(ctx, q, args...)
	if err != nil {
		return fmt.Errorf("counting replayed, healed dead letters per cluster: %w", err)
	}
	defer rows.Close()
	at := make(map[string]int, len(counts))
	for i := range counts {
		at[counts[i].ID] = i
	}
	for rows.Next() {
		var id string
		var n, fixed int
		if err := rows.Scan(&id, &n, &fixed); err != nil {
			return fmt.Errorf("counting replayed, healed dead letters per cluster: %w", err)
		}
		if i, ok := at[id]; ok {
			counts[i].Replayed, counts[i].ReplayedFixed = n, fixed
		}
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("counting replayed, healed dead letters per cluster: %w", err)
	}
	return nil
}

// ReceivedSample is how many of a cluster's latest job runs ClusterReceived
// counts values over, so its cost does not grow with the cluster.
const ReceivedSample = 1000

// ClusterReceived returns the n values most often received in a cluster,
// most frequent first: counted once per job run (the value at the first
// attempt that failed there), over the cluster's latest ReceivedSample job
// runs; absent values are left out.
func (a *Analytics) ClusterReceived(ctx context.Context, cluster string, f Filter, n int) ([]ValueCount, error) {
	where, args := f.failureWhere(cluster)
	q := `SELECT received, COUNT(*) AS n FROM (SELECT received FROM failures` + where + ` ORDER BY at DESC LIMIT ?)
		WHERE received <> '' GROUP BY received ORDER BY n DESC, received LIMIT ?`
	rows, err := a.r.QueryContext(ctx, q, append(args, ReceivedSample, n)...)
	if err != nil {
		return nil, fmt.Errorf("reading received values of cluster %s: %w", cluster, err)
	}
	defer rows.Close()
	var out []ValueCount
	for rows.Next() {
		var v ValueCount
		if err := rows.Scan(&v.Value, &v.Count); err != nil {
			return nil, fmt.Errorf("reading received values of cluster %s: %w", cluster, err)
		}
		out = append(out, v)
	}
	return out, rows.Err()
}

// ClusterRecentEnds returns, newest first, how each of the last n job runs
// that failed in a cluster ended: dead-lettered or not, the fingerprint
// fixed or not. Replayed, healed dead letters are left out.
func (a *Analytics) ClusterRecentEnds(ctx context.Context, cluster string, f Filter, n int) ([]RunEnd, error) {
	where, args := f.failureWhere(cluster)
	rows, err := a.r.QueryContext(ctx, `SELECT dead, fixed FROM failures`+where+notReplayHealed+` ORDER BY at DESC LIMIT ?`, append(args, n)...)
	if err != nil {
		return nil, fmt.Errorf("reading recent failures of cluster %s: %w", cluster, err)
	}
	defer rows.Close()
	var out []RunEnd
	for rows.Next() {
		var e RunEnd
		if err := rows.Scan(&e.Dead, &e.Fixed); err != nil {
			return nil, fmt.Errorf("reading recent failures of cluster %s: %w", cluster, err)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// BlockerSample is how many of a cluster's latest fixed dead letters
// ClusterBlockers looks at, so its cost does not grow with the cluster.
const BlockerSample = 200

// ClusterBlockers returns up to n fingerprints that killed the jobs in
// which a cluster was fixed: over the cluster's latest BlockerSample
// dead-lettered runs where it was fixed (replayed, healed ones left out),
// the other fingerprints still failing at their end, by the number of
// those runs, most first.
func (a *Analytics) ClusterBlockers(ctx context.Context, cluster string, f Filter, n int) ([]Blocker, error) {
	where, args := f.failureWhere(cluster)
	q := `SELECT c.id, c.schema_id, c.version, c.path, c.keyword, b.runs
		FROM (SELECT o.cluster, COUNT(*) AS runs
		      FROM (SELECT outcome_id FROM failures` + where + ` AND dead = 1 AND fixed = 1` + notReplayHealed + ` ORDER BY at DESC LIMIT ?) m
		      JOIN failures o ON o.outcome_id = m.outcome_id AND o.lead = 1 AND o.fixed = 0
		      GROUP BY o.cluster) b
		JOIN clusters c ON c.id = b.cluster
		ORDER BY b.runs DESC, c.path, c.keyword LIMIT ?`
	rows, err := a.r.QueryContext(ctx, q, append(args, BlockerSample, n)...)
	if err != nil {
		return nil, fmt.Errorf("reading what killed the jobs of cluster %s: %w", cluster, err)
	}
	defer rows.Close()
	var out []Blocker
	for rows.Next() {
		var b Blocker
		if err := rows.Scan(&b.ID, &b.Schema, &b.Version, &b.Path, &b.Keyword, &b.Runs); err != nil {
			return nil, fmt.Errorf("reading what killed the jobs of cluster %s: %w", cluster, err)
		}
		out = append(out, b)
	}
	return out, rows.Err()
}

// ClusterExamples returns up to n job ids that failed in a cluster: the
// newest dead letters first (replayed, healed ones left out), then the
// newest healed jobs.
func (a *Analytics) ClusterExamples(ctx context.Context, cluster string, f Filter, n int) ([]string, error) {
	var out []string
	for _, dead := range []int{1, 0} {
		if len(out) >= n {
			break
		}
		where, args := f.failureWhere(cluster)
		q := `SELECT o.job_id FROM failures f JOIN outcomes o ON o.id = f.outcome_id` +
			strings.ReplaceAll(where, "lead = 1", "f.lead = 1 AND f.dead = ?") +
			strings.ReplaceAll(notReplayHealed, "(dead = 1 AND outcome_id", "(f.dead = 1 AND f.outcome_id") + ` ORDER BY f.at DESC LIMIT ?`
		rows, err := a.r.QueryContext(ctx, q, append(append([]any{dead}, args...), n-len(out))...)
		if err != nil {
			return nil, fmt.Errorf("reading examples of cluster %s: %w", cluster, err)
		}
		for rows.Next() {
			var id string
			if err := rows.Scan(&id); err != nil {
				rows.Close()
				return nil, fmt.Errorf("reading examples of cluster %s: %w", cluster, err)
			}
			out = append(out, id)
		}
		err = rows.Err()
		rows.Close()
		if err != nil {
			return nil, fmt.Errorf("reading examples of cluster %s: %w", cluster, err)
		}
	}
	return out, nil
}

// Funnel counts outcomes (every run, replayed ones included) by schema,
// schema version, status, attempts, class and models, with their tokens
// and costs. It honours Filter's Schema, Version, Model (the model of the
// last attempt), Since and Until.
func (a *Analytics) Funnel(ctx context.Context, f Filter) ([]FunnelRow, error) {
	q, args := funnelQuery(f)
	rows, err := a.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("reading the funnel: %w", err)
	}
	defer rows.Close()
	var out []FunnelRow
	for rows.Next() {
		var r FunnelRow
		var first, last int64
		if err := rows.Scan(&r.Schema, &r.Version, &r.Dead, &r.Attempts, &r.Class, &r.Model, &r.FirstModel, &r.Jobs, &r.Tokens, &r.HealTokens,
			&r.CostUSD, &r.HealCostUSD, &r.Priced, &first, &last, &r.BatchAttempts, &r.BatchCostUSD); err != nil {
			return nil, fmt.Errorf("reading the funnel: %w", err)
		}
		r.First, r.Last = time.UnixMilli(first).UTC(), time.UnixMilli(last).UTC()
		out = append(out, r)
	}
	return out, rows.Err()
}

// funnelQuery is Funnel's query. Selected by schema, version and model at
// most, the groups are funnel_rollup's, kept by the index's triggers: no
// pass over the outcomes at all. Otherwise one pass over the covering
// index outcomes_funnel_v4, in its GROUP BY order. Either way the index
// holds finished_at right after the grouped columns, so each group's first
// and last finish times are two seeks into it, not a MIN and a MAX over
// every row of the pass (which took 30 % of its time).
func funnelQuery(f Filter) (string, []any) {
	f.IncludeReplayed = true
	f.Class, f.Path, f.Cluster, f.IDs = "", "", "", nil
	where, args := f.where(false)
	group := ` WHERE o.schema_id = g.schema_id AND o.version = g.version AND o.dead = g.dead AND o.attempts = g.attempts
		AND o.class = g.class AND o.model = g.model AND o.first_model = g.first_model`
	firstLast := `(SELECT MIN(o.finished_at) FROM outcomes o` + group + `),
		       (SELECT MAX(o.finished_at) FROM outcomes o` + group + `)`
	if f.Since.IsZero() && f.Until.IsZero() {
		// where has the schema, version and model only, as g's columns.
		return `SELECT g.schema_id, g.version, g.dead, g.attempts, g.class, g.model, g.first_model, g.jobs, g.tokens, g.heal_tokens,
		       g.cost_usd, g.heal_cost_usd, g.priced, ` + firstLast + `, g.batch_attempts, g.batch_cost_usd
		FROM funnel_rollup g` + strings.ReplaceAll(where, "o.", "g.") + `
		ORDER BY g.schema_id, g.version, g.dead, g.attempts, g.class, g.model, g.first_model`, args
	}
	if where != "" {
		group += " AND " + strings.TrimPrefix(where, " WHERE ")
	}
	firstLast = `(SELECT MIN(o.finished_at) FROM outcomes o` + group + `),
		       (SELECT MAX(o.finished_at) FROM outcomes o` + group + `)`
	return `SELECT g.schema_id, g.version, g.dead, g.attempts, g.class, g.model, g.first_model, g.jobs, g.tokens, g.heal_tokens,
		       g.cost_usd, g.heal_cost_usd, g.priced, ` + firstLast + `, g.batch_attempts, g.batch_cost_usd
		FROM (SELECT o.schema_id, o.version, o.dead, o.attempts, o.class, o.model, o.first_model, COUNT(*) AS jobs,
		             SUM(o.tokens) AS tokens, SUM(o.heal_tokens) AS heal_tokens, SUM(o.cost_usd) AS cost_usd,
		             SUM(o.heal_cost_usd) AS heal_cost_usd, SUM(o.priced) AS priced,
		             SUM(o.batch_attempts) AS batch_attempts, SUM(o.batch_cost_usd) AS batch_cost_usd
		      FROM outcomes o` + where + ` GROUP BY o.schema_id, o.version, o.dead, o.attempts, o.class, o.model, o.first_model) g`,
		slices.Concat(args, args, args)
}

// VersionCount is a count for one schema version.
type VersionCount struct {
	Schema  string
	Version string
	N       int
}

// ReplayHealed counts, per schema version, the replayed, healed dead
// letters in the selection (Schema, Version, Since, Until): dead letters
// whose job succeeded on a later run.
func (a *Analytics) ReplayHealed(ctx context.Context, f Filter) ([]VersionCount, error) {
	// over the partial index of dead letters, replayed ones only
	q := `SELECT d.schema_id, d.version, COUNT(*) FROM outcomes d WHERE d.dead = 1 AND d.replayed = 1
		AND EXISTS (SELECT 1 FROM outcomes n WHERE n.job_id = d.job_id AND n.run > d.run AND n.dead = 0)`
	var args []any
	if f.Schema != "" {
		q += ` AND d.schema_id = ?`
		args = append(args, f.Schema)
	}
	if f.Version != "" {
		q += ` AND d.version = ?`
		args = append(args, f.Version)
	}
	if !f.Since.IsZero() {
		q += ` AND d.finished_at >= ?`
		args = append(args, f.Since.UnixMilli())
	}
	if !f.Until.IsZero() {
		q += ` AND d.finished_at < ?`
		args = append(args, f.Until.UnixMilli())
	}
	q += ` GROUP BY d.schema_id, d.version`
	rows, err := a.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, fmt.Errorf("counting replayed, healed dead letters: %w", err)
	}
	defer rows.Close()
	var out []VersionCount
	for rows.Next() {
		var v VersionCount
		if err := rows.Scan(&v.Schema, &v.Version, &v.N); err != nil {
			return nil, fmt.Errorf("counting replayed, healed dead letters: %w", err)
		}
		out = append(out, v)
	}
	return out, rows.Err()
}
