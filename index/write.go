package index

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/go-json-experiment/json"
	"github.com/llmpipeline/pipeline/job"
	"github.com/llmpipeline/pipeline/report/cluster"
)

// receivedCut is how much of a received value the failures table keeps.
const receivedCut = 64

// row is an outcome turned into what the tables need, computed before the
// transaction (in parallel for large batches).
type row struct {
	o          *job.Outcome
	dead       int
	prompt     int
	completion int
	heal       int
	cost       float64
	healCost   float64
	priced     int
	batchN     int
	batchCost  float64
	firstModel string
	firstPath  string
	// body is the payload: the Outcome as JSON text without its data,
	// stored as TEXT so that sqlite3 and the v_* views read it
	body  string
	fails []cluster.Failure // Received not yet cut to receivedCut
	// set by insert: the new row id (0 when the run is already indexed)
	// and whether a later run of the job exists
	id       int64
	replayed int
}

// Write indexes a batch of outcomes in one transaction. It is idempotent:
// an outcome already indexed under its (job id, run) is skipped, so writing
// the same batch twice changes nothing. A later run of a job (a replay) is a
// new row, and the earlier runs are marked replayed. If Write returns an
// error nothing of the batch is stored and the caller must not ack it.
func (s *Store) Write(ctx context.Context, outs []job.Outcome) error {
	return s.WriteWithCursors(ctx, outs, nil)
}

// WriteWithCursors is Write that also records, in the same transaction,
// where the sink stands in each stream (see Cursors): the rows and the
// cursors are stored together or not at all.
func (s *Store) WriteWithCursors(ctx context.Context, outs []job.Outcome, cursors map[string]uint64) error {
	if len(outs) == 0 && len(cursors) == 0 {
		return nil
	}
	for i := range outs {
		if err := outs[i].Check(); err != nil {
			return fmt.Errorf("writing outcomes: %w", err)
		}
	}
	rows := make([]row, len(outs))
	for i := range outs {
		rows[i].o = &outs[i]
	}
	pr := startPrepare(outs, rows)
	defer pr.stop()
	if err := s.insert(ctx, rows, pr, cursors); err != nil {
		return fmt.Errorf("writing %d outcomes: %w", len(outs), err)
	}
	return nil
}

// prepChunk is how many outcomes are prepared (encoded, fingerprinted) at a
// time; the transaction inserts a chunk while the next one is prepared.
const prepChunk = 128

// prepared hands the chunks of a batch from the goroutine that prepares
// them to the transaction that inserts them, so the encoding of payloads
// overlaps the SQLite work.
type prepared struct {
	done []chan error // one per chunk, buffered
	quit chan struct{}
	wg   sync.WaitGroup
}

func startPrepare(outs []job.Outcome, rows []row) *prepared {
	n := (len(outs) + prepChunk - 1) / prepChunk
	p := &prepared{done: make([]chan error, n), quit: make(chan struct{})}
	for c := range p.done {
		p.done[c] = make(chan error, 1)
	}
	if n == 1 {
		p.done[0] <- prepareRange(outs, rows, 0, len(outs))
		return p
	}
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for c := range p.done {
			select {
			case <-p.quit:
				return
			default:
			}
			p.done[c] <- prepareRange(outs, rows, c*prepChunk, min((c+1)*prepChunk, len(outs)))
		}
	}()
	return p
}

// wait returns once chunk c is prepared.
func (p *prepared) wait(c int) error {
	err := <-p.done[c]
	p.done[c] <- err // later waits see it too
	return err
}

// stop makes the preparing goroutine give up and waits for it: the caller's
// outcomes are not touched after Write returns.
func (p *prepared) stop() {
	close(p.quit)
	p.wg.Wait()
}

// preparer holds what one goroutine of prepare reuses across outcomes.
type preparer struct {
	buf bytes.Buffer
	cut memberCutter
	g   cluster.Grouper
}

func prepareRange(outs []job.Outcome, rows []row, lo, hi int) error {
	p := &preparer{}
	for i := lo; i < hi; i++ {
		if err := p.row(&outs[i], &rows[i]); err != nil {
			return err
		}
	}
	return nil
}

// attemptN is an attempt's number, counted from 1 when the trace has none.
func attemptN(a *job.Attempt, k int) int {
	if a.N == 0 {
		return k + 1
	}
	return a.N
}

// row fills r (whose o is already o) from o.
func (p *preparer) row(o *job.Outcome, r *row) error {
	if o.Status == job.StatusDeadLettered {
		r.dead = 1
	}
	var priced bool
	r.cost, r.healCost, priced = job.Cost(o.Trace)
	if priced {
		r.priced = 1
	}
	r.batchN, r.batchCost = job.BatchCost(o.Trace)
	r.firstModel = o.Model
	if len(o.Trace) > 0 && o.Trace[0].Model != "" {
		r.firstModel = o.Trace[0].Model
	}
	for k := range o.Trace {
		a := &o.Trace[k]
		r.prompt += a.PromptTokens
		r.completion += a.CompletionTokens
		if k > 0 {
			r.heal += a.PromptTokens + a.CompletionTokens
		}
	}
	if r.dead == 1 {
		for k := len(o.Trace) - 1; k >= 0; k-- {
			if d := o.Trace[k].Diagnostics; len(d) > 0 {
				r.firstPath = d[0].Path
				break
			}
		}
	}
	// failures: one row per cluster (the report's rule), at its first
	// failing attempt, fixed or not by the run's end
	r.fails = p.g.Failures(r.fails[:0], o)
	return p.payload(o, r)
}

// payload encodes the whole outcome but the data, compact (see
// job.EncodeOutcome): the transcript Get and Export read back.
func (p *preparer) payload(o *job.Outcome, r *row) error {
	if o.Encoded != nil {
		if body, ok := p.cut.without(o.Encoded, "data"); ok {
			r.body = body
			return nil
		}
	}
	c := *o
	c.Data = nil
	p.buf.Reset()
	if err := json.MarshalWrite(&p.buf, &c, job.EncodeOptions()); err != nil {
		return fmt.Errorf("encoding job %s: %w", o.JobID, err)
	}
	r.body = p.buf.String()
	return nil
}

// boolInt is b as SQLite's 0 or 1.
func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// cut shortens s to at most n bytes without splitting a UTF-8 sequence.
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n]
}

// chunk sizes of the multi-row INSERT statements (rows per statement);
// prepChunk is a multiple of them
const (
	chunkOutcomes = 64
	chunkRows     = 64
	chunkIDs      = 256
)

func (s *Store) insert(ctx context.Context, rows []row, pr *prepared, cursors map[string]uint64) (err error) {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("beginning: %w", err)
	}
	defer func() {
		if err != nil {
			tx.Rollback() //nolint:errcheck // the error that got us here matters more
		}
	}()
	// The statements below run without ctx's cancellation: go-sqlite3 starts
	// a watcher goroutine per statement for a cancellable context, which
	// costs more than the statement. ctx is checked between chunks and the
	// transaction is rolled back when it is done.
	live := ctx
	ctx = context.WithoutCancel(ctx)

	if err := setCursors(ctx, tx, cursors); err != nil {
		return err
	}
	if len(rows) == 0 {
		return tx.Commit()
	}
	n, err := plan(ctx, tx, rows)
	if err != nil {
		return fmt.Errorf("finding indexed runs: %w", err)
	}
	if n == 0 {
		return tx.Commit() // all indexed already: idempotent
	}

	cl := newBulk(tx, `INSERT OR IGNORE INTO clusters (id, fp_version, schema_id, version, path, keyword) VALUES `, 6, chunkRows)
	out := newBulk(tx, `INSERT INTO outcomes (id, job_id, run, schema_id, version, dead, class, reason, model,
		attempts, deliveries, prompt_tokens, completion_tokens, tokens, heal_tokens, first_path,
		started_at, finished_at, replayed, cost_usd, heal_cost_usd, priced, first_model, batch_attempts, batch_cost_usd) VALUES `, 25, chunkOutcomes)
	pay := newBulk(tx, `INSERT INTO payloads (outcome_id, body) VALUES `, 2, chunkRows)
	att := newBulk(tx, `INSERT INTO attempts (outcome_id, n, temperature, class, finish_reason, repairs, diagnostics,
		prompt_tokens, completion_tokens, cached_tokens, reasoning_tokens, latency_ms, transport_retries, model, cost_usd) VALUES `, 15, chunkRows)
	fai := newBulk(tx, `INSERT INTO failures (outcome_id, attempt, seq, cluster, lead, dead, at, received, fixed) VALUES `, 9, chunkRows)
	dat := newBulk(tx, `INSERT INTO result_data (outcome_id, data) VALUES `, 2, chunkRows)
	fil := newBulk(tx, `INSERT INTO outcome_files (outcome_id, seq, sha256, name, media_type, bytes) VALUES `, 6, chunkRows)
	con := newBulk(tx, `INSERT OR IGNORE INTO conflicts (outcome_id, path, chunks) VALUES `, 3, chunkRows)
	all := []*bulk{cl, out, pay, att, fai, dat, fil, con}
	for _, b := range all {
		defer b.close()
	}
	var mark *sql.Stmt
	defer func() {
		if mark != nil {
			mark.Close()
		}
	}()
	done := make(map[string]struct{}) // clusters inserted by this batch

	for c := range pr.done {
		if err := pr.wait(c); err != nil {
			return err
		}
		if err := live.Err(); err != nil {
			return err
		}
		chunk := rows[c*prepChunk : min((c+1)*prepChunk, len(rows))]
		// clusters and outcomes first: the other tables reference them
		for i := range chunk {
			r := &chunk[i]
			if r.id == 0 {
				continue
			}
			for k := range r.fails {
				f := &r.fails[k]
				if _, ok := done[f.ID]; ok {
					continue
				}
				done[f.ID] = struct{}{}
				if err := cl.add(ctx, f.ID, cluster.FingerprintVersion, r.o.Schema, r.o.SchemaVersion, f.Path, f.Keyword); err != nil {
					return fmt.Errorf("inserting clusters: %w", err)
				}
			}
			o := r.o
			if err := out.add(ctx, r.id, o.JobID, o.Run, o.Schema, o.SchemaVersion, r.dead, o.Class, o.Reason, o.Model,
				ownAttempts(o), o.Deliveries, int64(r.prompt), int64(r.completion), int64(r.prompt+r.completion), int64(r.heal), r.firstPath,
				millis(o.StartedAt), millis(o.FinishedAt), r.replayed, r.cost, r.healCost, r.priced, r.firstModel, r.batchN, r.batchCost); err != nil {
				return fmt.Errorf("inserting outcomes: %w", err)
			}
		}
		if err := cl.flush(ctx); err != nil {
			return fmt.Errorf("inserting clusters: %w", err)
		}
		if err := out.flush(ctx); err != nil {
			return fmt.Errorf("inserting outcomes: %w", err)
		}
		for i := range chunk {
			r := &chunk[i]
			if r.id == 0 {
				continue
			}
			o := r.o
			if o.Run > 0 { // a replay: its earlier runs are superseded
				if mark == nil {
					if mark, err = tx.PrepareContext(ctx, `UPDATE outcomes SET replayed = 1 WHERE job_id = ? AND run < ? AND replayed = 0`); err != nil {
						return fmt.Errorf("preparing replay marks: %w", err)
					}
				}
				if _, err := mark.ExecContext(ctx, o.JobID, o.Run); err != nil {
					return fmt.Errorf("marking earlier runs of job %s replayed: %w", o.JobID, err)
				}
			}
			if err := pay.add(ctx, r.id, r.body); err != nil {
				return fmt.Errorf("inserting payloads: %w", err)
			}
			if r.dead == 0 && len(o.Data) > 0 { // what pipeline eval scores
				if err := dat.add(ctx, r.id, string(o.Data)); err != nil {
					return fmt.Errorf("inserting result data: %w", err)
				}
			}
			for k, f := range o.Files {
				if f.SHA256 == "" {
					continue // a file an invalid job named but never stored
				}
				if err := fil.add(ctx, r.id, k, f.SHA256, f.Name, f.MediaType, f.Bytes); err != nil {
					return fmt.Errorf("inserting outcome files: %w", err)
				}
			}
			// A first-pass success's one call is its outcome row (attempts 1,
			// tokens) and its payload (the rest): no attempts row.
			for k := range o.Trace {
				if r.dead == 0 && len(o.Trace) == 1 {
					break
				}
				a := &o.Trace[k]
				if err := att.add(ctx, r.id, attemptN(a, k), a.Temperature, a.Class, a.FinishReason, strings.Join(a.Repairs, ","),
					len(a.Diagnostics)+a.DiagnosticsOmitted, int64(a.PromptTokens), int64(a.CompletionTokens), int64(a.CachedTokens),
					int64(a.ReasoningTokens), a.LatencyMS, a.TransportRetries, attemptModel(a, o), a.CostUSD); err != nil {
					return fmt.Errorf("inserting attempts: %w", err)
				}
			}
			for k := range o.Conflicts {
				if err := con.add(ctx, r.id, o.Conflicts[k].Path, len(o.Conflicts[k].Values)); err != nil {
					return fmt.Errorf("inserting conflicts: %w", err)
				}
			}
			at := millis(o.FinishedAt)
			for k := range r.fails {
				f := &r.fails[k]
				if err := fai.add(ctx, r.id, f.Attempt, f.Seq, f.ID, 1, r.dead, at, cut(f.Received, receivedCut), boolInt(f.Fixed)); err != nil {
					return fmt.Errorf("inserting failures: %w", err)
				}
			}
		}
	}
	for _, b := range all {
		if err := b.flush(ctx); err != nil {
			return fmt.Errorf("inserting %s: %w", b.table(), err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("committing: %w", err)
	}
	return nil
}

type jobRun struct {
	job string
	run int
}

// plan gives every run of the batch that is not indexed yet (in the file
// or earlier in the batch) a new row id, and marks the runs that a later
// run of their job supersedes. It returns how many runs are new. It runs
// inside the write transaction, so the ids cannot be taken meanwhile.
func plan(ctx context.Context, tx *sql.Tx, rows []row) (int, error) {
	latest := make(map[string]int, len(rows)) // job id -> highest run, file and batch
	jobs := make([]any, 0, len(rows))
	for i := range rows {
		j := rows[i].o.JobID
		if _, ok := latest[j]; !ok {
			latest[j] = -1
			jobs = append(jobs, j)
		}
	}
	have := make(map[jobRun]struct{}, len(rows))
	for lo := 0; lo < len(jobs); lo += chunkIDs {
		chunk := jobs[lo:min(lo+chunkIDs, len(jobs))]
		q := `SELECT job_id, run FROM outcomes WHERE job_id IN (` + strings.TrimSuffix(strings.Repeat("?,", len(chunk)), ",") + `)`
		res, err := tx.QueryContext(ctx, q, chunk...)
		if err != nil {
			return 0, err
		}
		for res.Next() {
			var k jobRun
			if err := res.Scan(&k.job, &k.run); err != nil {
				res.Close()
				return 0, err
			}
			have[k] = struct{}{}
			latest[k.job] = max(latest[k.job], k.run)
		}
		err = res.Err()
		res.Close()
		if err != nil {
			return 0, err
		}
	}
	var next int64
	if err := tx.QueryRowContext(ctx, `SELECT COALESCE(MAX(id), 0) FROM outcomes`).Scan(&next); err != nil {
		return 0, err
	}
	n := 0
	for i := range rows {
		r := &rows[i]
		k := jobRun{r.o.JobID, r.o.Run}
		if _, ok := have[k]; ok {
			continue
		}
		have[k] = struct{}{}
		next++
		r.id = next
		n++
		latest[k.job] = max(latest[k.job], k.run)
	}
	for i := range rows {
		r := &rows[i]
		if r.id != 0 && latest[r.o.JobID] > r.o.Run {
			r.replayed = 1
		}
	}
	return n, nil
}

// attemptModel is the model of an attempt, the outcome's when the trace
// has none (written before attempts recorded their model).
func attemptModel(a *job.Attempt, o *job.Outcome) string {
	if a.Model != "" {
		return a.Model
	}
	return o.Model
}

func millis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// setCursors records the sink's position in each stream.
func setCursors(ctx context.Context, tx *sql.Tx, cursors map[string]uint64) error {
	for stream, seq := range cursors {
		if _, err := tx.ExecContext(ctx, `INSERT INTO stream_cursors (stream, seq) VALUES (?, ?)
			ON CONFLICT (stream) DO UPDATE SET seq = excluded.seq`, stream, int64(seq)); err != nil {
			return fmt.Errorf("recording the cursor of stream %s: %w", stream, err)
		}
	}
	return nil
}

// Cursors returns, per stream, the sequence up to which the sink indexed
// every message (as WriteWithCursors recorded it; none after Reset).
func (s *Store) Cursors(ctx context.Context) (map[string]uint64, error) {
	rows, err := s.r.QueryContext(ctx, `SELECT stream, seq FROM stream_cursors`)
	if err != nil {
		return nil, fmt.Errorf("reading stream cursors: %w", err)
	}
	defer rows.Close()
	out := make(map[string]uint64)
	for rows.Next() {
		var name string
		var seq int64
		if err := rows.Scan(&name, &seq); err != nil {
			return nil, fmt.Errorf("reading stream cursors: %w", err)
		}
		out[name] = uint64(seq)
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("reading stream cursors: %w", err)
	}
	return out, nil
}

// ownAttempts is the model calls an outcome's row counts: a long
// document's outcome sums its chunks' (Attempts), whose own rows count
// them, so its row counts none, as its tokens and cost (from its empty
// trace) are none: stats and the funnel count every call once.
func ownAttempts(o *job.Outcome) int {
	if o.Chunks != nil {
		return 0
	}
	return o.Attempts
}
