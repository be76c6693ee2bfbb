package ledger

// Reconciling the job ledger with the streams. The ledger is the memory of
// what ended, but the streams hold the outcomes themselves: RESULTS and DLQ
// keep every outcome under its run's message id. A ledger can miss what
// the streams know: a data dir from a release that wrote no ledger (or one
// key per job, the format of the first ledger), a bucket deleted or purged
// by hand. Then a re-submitted job would be answered twice. So `run` and
// `submit` reconcile at start: every outcome on the streams past the last
// sequence reconciled (a marker kept in the ledger itself, so a deleted or
// emptied ledger loses it too and is rebuilt from the first message) gets
// its run's key if it has none. Without the marker, the ledger is rebuilt:
// the previous format's keys are rewritten as run keys, the streams read
// from their first message, and the outcomes only the index still holds
// (the streams' limits removed them) are added from it.

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/job"
	"github.com/nats-io/nats.go/jetstream"
)

// ledgerMarkPrefix starts the keys of the reconciliation markers, one per
// outcome stream: "=reconciled.RESULTS". Key writes '=' only before
// two upper-case hex digits, so no job's key starts so.
const ledgerMarkPrefix = "=reconciled."

// reconcileBatch is how many outcomes are checked against the ledger in
// one gathered read.
const reconcileBatch = ledgerBatch

// IndexedRun is an ended run as the analytics index holds it: what the
// ledger is rebuilt from when the streams no longer hold the outcome.
type IndexedRun struct {
	JobID string
	Run   int
	// Dead is true for a dead letter (stream DLQ), false for a result.
	Dead bool
	At   time.Time
}

// IndexRuns calls yield with every ended run the index holds, until yield
// returns false or an error; nil when there is no index.
type IndexRuns func(ctx context.Context, yield func(IndexedRun) bool) error

// ReconcileStats is what Reconcile did.
type ReconcileStats struct {
	// Rebuild is true when the ledger had no marker: it was missing or
	// emptied, or written by a release before reconciliation, and was
	// checked against every outcome the streams and the index hold.
	Rebuild bool
	// Scanned counts the outcome messages read from the streams.
	Scanned int
	// FromStreams and FromIndex count the ledger entries written because
	// the streams or the index proved the run ended; Migrated the entries
	// of the previous format (one key per job) rewritten as run keys.
	FromStreams, FromIndex, Migrated int
}

// Written is the number of entries the ledger missed.
func (r ReconcileStats) Written() int { return r.FromStreams + r.FromIndex + r.Migrated }

// Reconcile writes into the job ledger every ended run that the
// outcome streams (past the last sequence reconciled) or, when the ledger
// is rebuilt, the index (index, if not nil) prove, and moves the markers
// to the streams' last sequences. When the ledger is complete it costs one
// read of each marker and of the outcomes stored since the last start.
func (l *Ledger) Reconcile(ctx context.Context, index IndexRuns) (ReconcileStats, error) {
	var r ReconcileStats
	marks := map[string]uint64{}
	for _, stream := range []string{broker.StreamResults, broker.StreamDLQ} {
		seq, ok, err := l.ledgerMark(ctx, stream)
		if err != nil {
			return r, err
		}
		if !ok {
			r.Rebuild = true
		}
		marks[stream] = seq
	}
	if r.Rebuild {
		n, err := l.migrateLedger(ctx)
		if err != nil {
			return r, err
		}
		r.Migrated = n
		marks = map[string]uint64{}
	}
	for _, stream := range []string{broker.StreamResults, broker.StreamDLQ} {
		last, scanned, wrote, err := l.reconcileStream(ctx, stream, marks[stream])
		r.Scanned += scanned
		r.FromStreams += wrote
		if err != nil {
			return r, err
		}
		marks[stream] = last
	}
	if r.Rebuild && index != nil {
		n, err := l.reconcileIndex(ctx, index)
		r.FromIndex = n
		if err != nil {
			return r, err
		}
	}
	for stream, seq := range marks {
		if _, err := l.kv.Put(ctx, ledgerMarkPrefix+stream, []byte(strconv.FormatUint(seq, 10))); err != nil {
			return r, fmt.Errorf("writing the ledger's reconciliation marker of stream %s: %w", stream, err)
		}
	}
	return r, nil
}

// ledgerMark reads the last sequence of stream reconciled.
func (l *Ledger) ledgerMark(ctx context.Context, stream string) (uint64, bool, error) {
	kv, err := l.kv.Get(ctx, ledgerMarkPrefix+stream)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return 0, false, nil
	}
	if err != nil {
		return 0, false, fmt.Errorf("reading the ledger's reconciliation marker of stream %s: %w", stream, err)
	}
	seq, err := strconv.ParseUint(string(kv.Value()), 10, 64)
	if err != nil {
		// Not a marker this code wrote: read the stream again.
		return 0, false, nil
	}
	return seq, true, nil
}

// migrateLedger rewrites the entries of the first ledger format, one key
// per job (Key(job id), no dot) holding a Entry, as run keys.
// The old keys stay: nothing reads them, and a downgrade still finds them.
func (l *Ledger) migrateLedger(ctx context.Context) (int, error) {
	lister, err := l.kv.ListKeysFiltered(ctx, "*")
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return 0, nil
	}
	if err != nil {
		return 0, fmt.Errorf("listing the ledger's entries of the previous format: %w", err)
	}
	var keys []string
	for k := range lister.Keys() {
		keys = append(keys, k)
	}
	n := 0
	for _, k := range keys {
		kv, err := l.kv.Get(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return n, fmt.Errorf("reading ledger key %s of the previous format: %w", k, err)
		}
		var e Entry
		if err := jsonv2.Unmarshal(kv.Value(), &e); err != nil || e.JobID == "" || Key(e.JobID) != k {
			continue // not an entry of that format
		}
		for _, run := range e.Runs {
			wrote, err := l.restoreRun(ctx, e.JobID, run)
			if err != nil {
				return n, err
			}
			if wrote {
				n++
			}
		}
	}
	return n, nil
}

// restoreRun writes run if the ledger has no entry for it, and reports
// whether it did.
func (l *Ledger) restoreRun(ctx context.Context, jobID string, run Run) (bool, error) {
	have, err := l.Record(ctx, jobID, run)
	if err != nil {
		return false, err
	}
	return have.Stream == run.Stream && have.Seq == run.Seq && have.MsgID == run.MsgID && have.At.Equal(run.At), nil
}

// scanned is one outcome message as the reconciliation reads it.
type scanned struct {
	key   JobRun
	msgID string
	seq   uint64
	at    time.Time
	// exact: the key was read from the outcome's body, not guessed from
	// its message id.
	exact bool
	input string
}

// reconcileStream checks every outcome of stream after sequence from
// against the ledger, writing the runs it misses, and returns the last
// sequence read (from when nothing was), how many it read and wrote.
func (l *Ledger) reconcileStream(ctx context.Context, stream string, from uint64) (last uint64, read, wrote int, err error) {
	last = from
	s, err := l.conn.JetStream().Stream(ctx, stream)
	if err != nil {
		return last, 0, 0, fmt.Errorf("reconciling the ledger with stream %s: %w", stream, err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		return last, 0, 0, fmt.Errorf("reconciling the ledger with stream %s: reading its info: %w", stream, err)
	}
	end := info.State.LastSeq
	if end <= from || info.State.Msgs == 0 {
		return max(last, end), 0, 0, nil
	}
	start := max(from+1, info.State.FirstSeq)
	cons, err := s.OrderedConsumer(ctx, jetstream.OrderedConsumerConfig{
		DeliverPolicy: jetstream.DeliverByStartSequencePolicy,
		OptStartSeq:   start,
		HeadersOnly:   true,
	})
	if err != nil {
		return last, 0, 0, fmt.Errorf("reconciling the ledger with stream %s: %w", stream, err)
	}
	it, err := cons.Messages()
	if err != nil {
		return last, 0, 0, fmt.Errorf("reconciling the ledger with stream %s: %w", stream, err)
	}
	defer it.Stop()
	var batch []scanned
	flush := func() error {
		n, err := l.reconcileBatch(ctx, s, stream, batch)
		wrote += n
		batch = batch[:0]
		return err
	}
	for last < end {
		msg, err := it.Next(jetstream.NextContext(ctx))
		if err != nil {
			return last, read, wrote, fmt.Errorf("reconciling the ledger with stream %s: reading after seq %d: %w", stream, last, err)
		}
		meta, err := msg.Metadata()
		if err != nil {
			return last, read, wrote, fmt.Errorf("reconciling the ledger with stream %s: message metadata: %w", stream, err)
		}
		if meta.Sequence.Stream > end {
			break // stored after the reconciliation began: its worker records it
		}
		read++
		id := msg.Headers().Get(jetstream.MsgIDHeader)
		if id != "" {
			batch = append(batch, scanned{key: RunOfMsgID(id), msgID: id, seq: meta.Sequence.Stream, at: meta.Timestamp.UTC()})
		}
		last = meta.Sequence.Stream
		if len(batch) == reconcileBatch {
			if err := flush(); err != nil {
				return from, read, wrote, err
			}
		}
		if meta.NumPending == 0 {
			break
		}
	}
	if err := flush(); err != nil {
		return from, read, wrote, err
	}
	return max(last, end), read, wrote, nil
}

// reconcileBatch writes the runs of the outcomes in batch that the ledger
// misses. A message id that may name a rerun ("<id>~r<n>" is also a job id
// of its own) is read from the outcome's body first.
func (l *Ledger) reconcileBatch(ctx context.Context, s jetstream.Stream, stream string, batch []scanned) (int, error) {
	if len(batch) == 0 {
		return 0, nil
	}
	for i := range batch {
		if batch[i].key.Run > 0 {
			if err := l.readOutcomeKey(ctx, s, stream, &batch[i]); err != nil {
				return 0, err
			}
		}
	}
	keys := make([]JobRun, len(batch))
	for i, b := range batch {
		keys[i] = b.key
	}
	ended, err := l.endedRuns(ctx, keys)
	if err != nil {
		return 0, fmt.Errorf("reconciling the ledger with stream %s: %w", stream, err)
	}
	wrote := 0
	for i := range batch {
		if ended[i] {
			continue
		}
		b := &batch[i]
		if !b.exact {
			if err := l.readOutcomeKey(ctx, s, stream, b); err != nil {
				return wrote, err
			}
		}
		ok, err := l.restoreRun(ctx, b.key.JobID, Run{Run: b.key.Run, MsgID: b.msgID, Stream: stream, Seq: b.seq, At: b.at, Input: b.input})
		if err != nil {
			return wrote, fmt.Errorf("reconciling the ledger with stream %s: %w", stream, err)
		}
		if ok {
			wrote++
		}
	}
	return wrote, nil
}

// outcomeKey is what the reconciliation reads of an outcome's body.
type outcomeKey struct {
	JobID string         `json:"job_id"`
	Run   int            `json:"run"`
	Job   jsontext.Value `json:"job"`
}

var outcomeKeyOpts = jsonv2.JoinOptions(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))

// readOutcomeKey reads the job id, run and input digest of b from its
// outcome's body: the ledger key its worker wrote (the job's id, or for a
// message that was not a valid job its message id, run 0).
func (l *Ledger) readOutcomeKey(ctx context.Context, s jetstream.Stream, stream string, b *scanned) error {
	raw, err := s.GetMsg(ctx, b.seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		b.exact = true // gone since the scan: keep the guess
		return nil
	}
	if err != nil {
		return fmt.Errorf("reconciling the ledger: reading %s seq %d: %w", stream, b.seq, err)
	}
	body, err := l.conn.Payloads().Get(ctx, raw.Header, raw.Data)
	if err != nil {
		return fmt.Errorf("reconciling the ledger: message %s (%s seq %d): %w", b.msgID, stream, raw.Sequence, err)
	}
	b.exact = true
	var o outcomeKey
	if err := jsonv2.Unmarshal(body, &o, outcomeKeyOpts); err != nil {
		return nil // not an outcome: keep the guess from its message id
	}
	if o.JobID != "" && strings.HasPrefix(b.msgID, o.JobID) && RunMsgID(o.JobID, o.Run) == b.msgID {
		b.key = JobRun{o.JobID, o.Run}
	} else {
		b.key = JobRun{b.msgID, 0}
	}
	if len(o.Job) > 0 {
		if j, err := job.Parse(o.Job); err == nil {
			b.input = InputDigest(j)
		}
	}
	return nil
}

// reconcileIndex writes the runs the index holds and the ledger misses:
// outcomes the streams' limits removed before the ledger was lost.
func (l *Ledger) reconcileIndex(ctx context.Context, index IndexRuns) (int, error) {
	wrote := 0
	var batch []IndexedRun
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		keys := make([]JobRun, len(batch))
		for i, r := range batch {
			keys[i] = JobRun{r.JobID, r.Run}
		}
		ended, err := l.endedRuns(ctx, keys)
		if err != nil {
			return fmt.Errorf("reconciling the ledger with the index: %w", err)
		}
		for i, r := range batch {
			if ended[i] {
				continue
			}
			stream := broker.StreamResults
			if r.Dead {
				stream = broker.StreamDLQ
			}
			// The index keeps no sequence: 0 says the stream no longer
			// holds the outcome.
			ok, err := l.restoreRun(ctx, r.JobID, Run{Run: r.Run, MsgID: RunMsgID(r.JobID, r.Run), Stream: stream, At: r.At.UTC()})
			if err != nil {
				return fmt.Errorf("reconciling the ledger with the index: %w", err)
			}
			if ok {
				wrote++
			}
		}
		batch = batch[:0]
		return nil
	}
	var ferr error
	err := index(ctx, func(r IndexedRun) bool {
		batch = append(batch, r)
		if len(batch) == reconcileBatch {
			ferr = flush()
		}
		return ferr == nil
	})
	if ferr != nil {
		return wrote, ferr
	}
	if err != nil {
		return wrote, fmt.Errorf("reconciling the ledger with the index: %w", err)
	}
	return wrote, flush()
}

// AdvanceMarks moves the reconciliation markers to the outcome
// streams' last sequences, so the next start reads only what was stored
// after: for a process whose workers have stopped, every outcome they
// stored is in the ledger (written before each ack). An outcome another
// process stored and has not recorded yet is recorded by it, or, if it
// dies first, by the redelivery of its job, which finds the outcome. A
// ledger with no marker (deleted or emptied since the start) keeps none,
// so the next start rebuilds it.
func (l *Ledger) AdvanceMarks(ctx context.Context) error {
	for _, stream := range []string{broker.StreamResults, broker.StreamDLQ} {
		seq, ok, err := l.ledgerMark(ctx, stream)
		if err != nil || !ok {
			return err
		}
		s, err := l.conn.JetStream().Stream(ctx, stream)
		if err != nil {
			return fmt.Errorf("advancing the ledger's reconciliation marker of stream %s: %w", stream, err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			return fmt.Errorf("advancing the ledger's reconciliation marker of stream %s: %w", stream, err)
		}
		if info.State.LastSeq <= seq {
			continue
		}
		if _, err := l.kv.Put(ctx, ledgerMarkPrefix+stream, []byte(strconv.FormatUint(info.State.LastSeq, 10))); err != nil {
			return fmt.Errorf("advancing the ledger's reconciliation marker of stream %s: %w", stream, err)
		}
	}
	return nil
}
