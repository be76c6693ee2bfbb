package dlq

import (
	"bytes"
	"compress/flate"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// ErrInvalidOutcome is wrapped by the errors of DecodeOutcome and Write for
// an outcome that cannot be indexed (no job id, unknown status). A sink
// should dead-end such a message (term it) rather than retry it.
var ErrInvalidOutcome = errors.New("invalid outcome")

// payload encodings
const (
	encJSON    = 0
	encDeflate = 1
)

// compressAbove is the body size from which a payload is DEFLATE-compressed.
const compressAbove = 4096

// receivedCut is how much of a received value the failures table keeps.
const receivedCut = 64

// DecodeOutcome decodes one RESULTS or DLQ message and checks that it can be
// indexed. Its errors wrap ErrInvalidOutcome.
func DecodeOutcome(data []byte) (Outcome, error) {
	var o Outcome
	if err := json.Unmarshal(data, &o); err != nil {
		return Outcome{}, fmt.Errorf("%w: decoding: %v", ErrInvalidOutcome, err)
	}
	if err := check(&o); err != nil {
		return Outcome{}, err
	}
	return o, nil
}

func check(o *Outcome) error {
	switch {
	case o.JobID == "":
		return fmt.Errorf("%w: no job_id", ErrInvalidOutcome)
	case o.Status != StatusSucceeded && o.Status != StatusDeadLettered:
		return fmt.Errorf("%w: job %s: status %q is neither %q nor %q", ErrInvalidOutcome, o.JobID, o.Status, StatusSucceeded, StatusDeadLettered)
	case o.Run < 0:
		return fmt.Errorf("%w: job %s: negative run %d", ErrInvalidOutcome, o.JobID, o.Run)
	}
	return nil
}

// row is an outcome turned into what the tables need, computed before the
// transaction (in parallel for large batches).
type row struct {
	o          *Outcome
	dead       int
	prompt     int
	completion int
	heal       int
	firstPath  string
	enc        int
	body       []byte
	fails      []failRow
}

type failRow struct {
	attempt, seq int
	cluster      string
	lead         int
	received     string
}

// Write indexes a batch of outcomes in one transaction. It is idempotent:
// an outcome already indexed under its (job id, run) is skipped, so writing
// the same batch twice changes nothing. A later run of a job (a replay) is a
// new row, and the earlier runs are marked replayed. If Write returns an
// error nothing of the batch is stored and the caller must not ack it.
func (s *Store) Write(ctx context.Context, outs []Outcome) error {
	if len(outs) == 0 {
		return nil
	}
	for i := range outs {
		if err := check(&outs[i]); err != nil {
			return fmt.Errorf("writing outcomes: %w", err)
		}
	}
	rows, err := s.prepare(outs)
	if err != nil {
		return fmt.Errorf("writing outcomes: %w", err)
	}
	if err := s.insert(ctx, rows); err != nil {
		return fmt.Errorf("writing %d outcomes: %w", len(outs), err)
	}
	return nil
}

// prepare encodes payloads and fingerprints failures, spreading large
// batches over the available cores.
func (s *Store) prepare(outs []Outcome) ([]row, error) {
	rows := make([]row, len(outs))
	workers := runtime.GOMAXPROCS(0)
	if len(outs) < 64 || workers < 2 {
		return rows, s.prepareRange(outs, rows, 0, len(outs))
	}
	var wg sync.WaitGroup
	errs := make([]error, workers)
	step := (len(outs) + workers - 1) / workers
	for w := 0; w < workers; w++ {
		lo, hi := w*step, min((w+1)*step, len(outs))
		if lo >= hi {
			break
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[w] = s.prepareRange(outs, rows, lo, hi)
		}()
	}
	wg.Wait()
	return rows, errors.Join(errs...)
}

func (s *Store) prepareRange(outs []Outcome, rows []row, lo, hi int) error {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	var zw *flate.Writer
	var seen []string
	for i := lo; i < hi; i++ {
		o := &outs[i]
		r := &rows[i]
		r.o = o
		if o.Status == StatusDeadLettered {
			r.dead = 1
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
		// failures: one row per diagnostic per attempt
		seen = seen[:0]
		for k := range o.Trace {
			a := &o.Trace[k]
			n := a.N
			if n == 0 {
				n = k + 1
			}
			for j := range a.Diagnostics {
				d := &a.Diagnostics[j]
				id := ClusterID(Fingerprint{Schema: o.Schema, Version: o.SchemaVersion, Path: d.Path, Keyword: d.Keyword})
				lead := 1
				for _, c := range seen {
					if c == id {
						lead = 0
						break
					}
				}
				if lead == 1 {
					seen = append(seen, id)
				}
				r.fails = append(r.fails, failRow{attempt: n, seq: j, cluster: id, lead: lead, received: cut(d.Received, receivedCut)})
			}
		}
		// payload: the whole outcome but the data
		c := *o
		c.Data = nil
		buf.Reset()
		if err := enc.Encode(&c); err != nil {
			return fmt.Errorf("encoding job %s: %w", o.JobID, err)
		}
		body := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
		if len(body) <= compressAbove {
			r.enc, r.body = encJSON, bytes.Clone(body)
			continue
		}
		var out bytes.Buffer
		out.Grow(len(body) / 2)
		if zw == nil {
			var err error
			if zw, err = flate.NewWriter(&out, flate.BestSpeed); err != nil {
				return fmt.Errorf("compressing job %s: %w", o.JobID, err)
			}
		} else {
			zw.Reset(&out)
		}
		if _, err := zw.Write(body); err != nil {
			return fmt.Errorf("compressing job %s: %w", o.JobID, err)
		}
		if err := zw.Close(); err != nil {
			return fmt.Errorf("compressing job %s: %w", o.JobID, err)
		}
		r.enc, r.body = encDeflate, out.Bytes()
	}
	return nil
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

func decodePayload(enc int, body []byte) (Outcome, error) {
	var data []byte
	switch enc {
	case encJSON:
		data = body
	case encDeflate:
		zr := flate.NewReader(bytes.NewReader(body))
		var err error
		if data, err = io.ReadAll(zr); err != nil {
			return Outcome{}, fmt.Errorf("decompressing payload: %w", err)
		}
	default:
		return Outcome{}, fmt.Errorf("payload encoding %d unknown", enc)
	}
	var o Outcome
	if err := json.Unmarshal(data, &o); err != nil {
		return Outcome{}, fmt.Errorf("decoding payload: %w", err)
	}
	return o, nil
}

const insertOutcome = `INSERT INTO outcomes (job_id, run, schema_id, version, dead, class, reason, model,
	attempts, deliveries, prompt_tokens, completion_tokens, tokens, heal_tokens, first_path,
	started_at, finished_at, replayed)
VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17,
	EXISTS (SELECT 1 FROM outcomes WHERE job_id = ?1 AND run > ?2))
ON CONFLICT (job_id, run) DO NOTHING`

func (s *Store) insert(ctx context.Context, rows []row) (err error) {
	tx, err := s.w.BeginTx(ctx, nil)
	// The statements below run without ctx's cancellation: go-sqlite3 starts
	// a watcher goroutine per statement for a cancellable context, which
	// costs more than the statement. ctx is checked between outcomes and the
	// transaction is rolled back when it is done.
	live := ctx
	ctx = context.WithoutCancel(ctx)
	if err != nil {
		return fmt.Errorf("beginning: %w", err)
	}
	defer func() {
		if err != nil {
			tx.Rollback() //nolint:errcheck // the error that got us here matters more
		}
	}()

	// clusters: one INSERT OR IGNORE per distinct fingerprint of the batch
	done := make(map[string]struct{})
	cl, err := tx.PrepareContext(ctx, `INSERT OR IGNORE INTO clusters (id, fp_version, schema_id, version, path, keyword) VALUES (?, ?, ?, ?, ?, ?)`)
	if err != nil {
		return fmt.Errorf("preparing clusters: %w", err)
	}
	defer cl.Close()
	for i := range rows {
		r := &rows[i]
		for _, f := range r.fails {
			if f.lead == 0 {
				continue
			}
			if _, ok := done[f.cluster]; ok {
				continue
			}
			done[f.cluster] = struct{}{}
			d := r.o.Trace[attemptIndex(r.o, f.attempt)].Diagnostics[f.seq]
			if _, err := cl.ExecContext(ctx, f.cluster, FingerprintVersion, r.o.Schema, r.o.SchemaVersion, PathPattern(d.Path), d.Keyword); err != nil {
				return fmt.Errorf("inserting cluster: %w", err)
			}
		}
	}

	ins, err := tx.PrepareContext(ctx, insertOutcome)
	if err != nil {
		return fmt.Errorf("preparing outcomes: %w", err)
	}
	defer ins.Close()
	mark, err := tx.PrepareContext(ctx, `UPDATE outcomes SET replayed = 1 WHERE job_id = ? AND run < ? AND replayed = 0`)
	if err != nil {
		return fmt.Errorf("preparing replay marks: %w", err)
	}
	defer mark.Close()

	pay := newBulk(tx, `INSERT INTO payloads (outcome_id, encoding, body) VALUES `, 3, 64)
	att := newBulk(tx, `INSERT INTO attempts (outcome_id, n, temperature, class, finish_reason, repairs, diagnostics,
		prompt_tokens, completion_tokens, cached_tokens, reasoning_tokens, latency_ms, transport_retries) VALUES `, 13, 64)
	fai := newBulk(tx, `INSERT INTO failures (outcome_id, attempt, seq, cluster, lead, dead, at, received) VALUES `, 8, 128)
	defer pay.close()
	defer att.close()
	defer fai.close()

	for i := range rows {
		if i%64 == 0 {
			if err := live.Err(); err != nil {
				return err
			}
		}
		r := &rows[i]
		o := r.o
		at := millis(o.FinishedAt)
		res, err := ins.ExecContext(ctx, o.JobID, o.Run, o.Schema, o.SchemaVersion, r.dead, o.Class, o.Reason, o.Model,
			o.Attempts, o.Deliveries, r.prompt, r.completion, r.prompt+r.completion, r.heal, r.firstPath,
			millis(o.StartedAt), at)
		if err != nil {
			return fmt.Errorf("inserting job %s: %w", o.JobID, err)
		}
		if n, err := res.RowsAffected(); err != nil {
			return fmt.Errorf("inserting job %s: %w", o.JobID, err)
		} else if n == 0 {
			continue // already indexed: idempotent
		}
		id, err := res.LastInsertId()
		if err != nil {
			return fmt.Errorf("inserting job %s: %w", o.JobID, err)
		}
		if o.Run > 0 {
			if _, err := mark.ExecContext(ctx, o.JobID, o.Run); err != nil {
				return fmt.Errorf("marking earlier runs of job %s replayed: %w", o.JobID, err)
			}
		}
		if err := pay.add(ctx, id, r.enc, r.body); err != nil {
			return fmt.Errorf("inserting payloads: %w", err)
		}
		for k := range o.Trace {
			a := &o.Trace[k]
			n := a.N
			if n == 0 {
				n = k + 1
			}
			if err := att.add(ctx, id, n, a.Temperature, a.Class, a.FinishReason, strings.Join(a.Repairs, ","),
				len(a.Diagnostics)+a.DiagnosticsOmitted, a.PromptTokens, a.CompletionTokens, a.CachedTokens,
				a.ReasoningTokens, a.LatencyMS, a.TransportRetries); err != nil {
				return fmt.Errorf("inserting attempts: %w", err)
			}
		}
		for _, f := range r.fails {
			if err := fai.add(ctx, id, f.attempt, f.seq, f.cluster, f.lead, r.dead, at, f.received); err != nil {
				return fmt.Errorf("inserting failures: %w", err)
			}
		}
	}
	for _, b := range []*bulk{pay, att, fai} {
		if err := b.flush(ctx); err != nil {
			return fmt.Errorf("inserting %s: %w", b.table(), err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("committing: %w", err)
	}
	return nil
}

func attemptIndex(o *Outcome, n int) int {
	for k := range o.Trace {
		if o.Trace[k].N == n || (o.Trace[k].N == 0 && k+1 == n) {
			return k
		}
	}
	return 0
}

func millis(t time.Time) int64 {
	if t.IsZero() {
		return 0
	}
	return t.UnixMilli()
}

// bulk batches rows into multi-row INSERT statements: fewer statement
// executions per row is most of what makes the sink fast.
type bulk struct {
	tx    *sql.Tx
	head  string
	cols  int
	chunk int
	full  *sql.Stmt
	args  []any
	n     int
}

func newBulk(tx *sql.Tx, head string, cols, chunk int) *bulk {
	return &bulk{tx: tx, head: head, cols: cols, chunk: chunk, args: make([]any, 0, cols*chunk)}
}

func (b *bulk) table() string {
	f := strings.Fields(b.head)
	if len(f) > 2 {
		return f[2]
	}
	return b.head
}

func (b *bulk) query(n int) string {
	var q strings.Builder
	q.Grow(len(b.head) + n*(b.cols*2+3))
	q.WriteString(b.head)
	for i := 0; i < n; i++ {
		if i > 0 {
			q.WriteByte(',')
		}
		q.WriteByte('(')
		for c := 0; c < b.cols; c++ {
			if c > 0 {
				q.WriteByte(',')
			}
			q.WriteByte('?')
		}
		q.WriteByte(')')
	}
	return q.String()
}

func (b *bulk) add(ctx context.Context, vals ...any) error {
	b.args = append(b.args, vals...)
	b.n++
	if b.n < b.chunk {
		return nil
	}
	return b.flush(ctx)
}

func (b *bulk) flush(ctx context.Context) error {
	if b.n == 0 {
		return nil
	}
	var err error
	if b.n == b.chunk {
		if b.full == nil {
			if b.full, err = b.tx.PrepareContext(ctx, b.query(b.chunk)); err != nil {
				return err
			}
		}
		_, err = b.full.ExecContext(ctx, b.args...)
	} else {
		_, err = b.tx.ExecContext(ctx, b.query(b.n), b.args...)
	}
	clear(b.args)
	b.args = b.args[:0]
	b.n = 0
	return err
}

func (b *bulk) close() {
	if b.full != nil {
		b.full.Close()
	}
}
