package ingest

// The job ledger: a KV bucket on JetStream that remembers, per job id,
// which runs ended and where each outcome is stored. Each ended run is one
// key, <LedgerKey(job id)>.<run>, written once with Create: a worker checks
// one key before calling the model and writes one when the run ended, the
// least a ledger can cost (a read and a write per job). It outlives the
// streams' duplicate window, and every submitter and worker of a cluster
// reads the same one: submit skips ended jobs, and a worker acks, without
// calling the model, a delivery whose run already ended.

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/nats-io/nats.go/jetstream"
)

// BucketLedger is the KV bucket of the job ledger.
const BucketLedger = "PIPELINE_LEDGER"

// LedgerRun is one ended run of a job.
type LedgerRun struct {
	// Run is 0 for the job as submitted, n for its n-th rerun or replay.
	Run   int    `json:"run"`
	MsgID string `json:"msg_id"`
	// Stream (RESULTS or DLQ) and Seq say where the outcome is stored.
	Stream string    `json:"stream"`
	Seq    uint64    `json:"seq"`
	At     time.Time `json:"at"`
	// Input is the InputDigest of the job that ran ("" for a run recorded
	// without it, or of a message that was not a valid job): submit tells
	// a job whose id ended with another input from one that is done.
	Input string `json:"input,omitempty"`
}

// InputDigest names what a job asks for: its schema, input and
// instructions (not its id or metadata), as the first 16 bytes of their
// SHA-256 in hex. Two jobs with one digest extract the same thing.
func InputDigest(j Job) string {
	h := sha256.New()
	// The hash takes bytes: the strings go through a pooled buffer, so an
	// input of 64 MiB is not copied whole (io.WriteString would).
	bp := digestBufs.Get().(*[]byte)
	buf := *bp
	for _, s := range [...]string{j.Schema, j.Input, j.Instructions} {
		binary.BigEndian.PutUint64(buf[:8], uint64(len(s)))
		h.Write(buf[:8])
		for len(s) > 0 {
			n := copy(buf, s)
			h.Write(buf[:n])
			s = s[n:]
		}
	}
	digestBufs.Put(bp)
	return hex.EncodeToString(h.Sum(nil)[:16])
}

var digestBufs = sync.Pool{New: func() any { b := make([]byte, 4096); return &b }}

// LedgerEntry is the ledger's value for one job id.
type LedgerEntry struct {
	JobID string      `json:"job_id"`
	Runs  []LedgerRun `json:"runs"`
}

// Ended returns the entry of run, if it ended.
func (e LedgerEntry) Ended(run int) (LedgerRun, bool) {
	for _, r := range e.Runs {
		if r.Run == run {
			return r, true
		}
	}
	return LedgerRun{}, false
}

// LastRun is the highest run that ended (-1 for none).
func (e LedgerEntry) LastRun() int {
	last := -1
	for _, r := range e.Runs {
		last = max(last, r.Run)
	}
	return last
}

// LedgerKey is the ledger's key for a job id. KV keys allow only
// A-Z a-z 0-9 - _ / = . and a job id is any printable UTF-8, so every byte outside
// A-Z a-z 0-9 - _ is written as =XX (hex), '=' included: the mapping is
// injective and leaves the usual ids readable ("inv-0001" stays itself).
func LedgerKey(jobID string) string {
	var b strings.Builder
	b.Grow(len(jobID))
	for i := 0; i < len(jobID); i++ {
		ch := jobID[i]
		switch {
		case 'a' <= ch && ch <= 'z', 'A' <= ch && ch <= 'Z', '0' <= ch && ch <= '9', ch == '-', ch == '_':
			b.WriteByte(ch)
		default:
			fmt.Fprintf(&b, "=%02X", ch)
		}
	}
	return b.String()
}

// RunOf returns the run number encoded in a message id: "<job id>~r<n>" is
// the n-th rerun or replay of the job; anything else is run 0.
func RunOf(msgID, jobID string) int {
	rest, ok := strings.CutPrefix(msgID, jobID+"~r")
	if !ok || rest == "" {
		return 0
	}
	n := 0
	for _, c := range rest {
		if c < '0' || c > '9' {
			return 0
		}
		n = n*10 + int(c-'0')
	}
	return n
}

// RunMsgID is the message id of run n of a job (the job id itself for 0).
func RunMsgID(jobID string, n int) string {
	if n == 0 {
		return jobID
	}
	return jobID + "~r" + strconv.Itoa(n)
}

// ledgerRunKey is the key of one run of a job.
func ledgerRunKey(jobID string, run int) string {
	return LedgerKey(jobID) + "." + strconv.Itoa(run)
}

// ledgerValue is what a run's key holds.
type ledgerValue struct {
	JobID string `json:"job_id"`
	LedgerRun
}

// runEnded reads the ledger's record of one run of a job.
func (c *Conn) runEnded(ctx context.Context, jobID string, run int) (LedgerRun, bool, error) {
	kv, err := c.buckets.ledger.Get(ctx, ledgerRunKey(jobID, run))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return LedgerRun{}, false, nil
	}
	if err != nil {
		return LedgerRun{}, false, fmt.Errorf("reading the ledger entry of job %s run %d: %w", jobID, run, err)
	}
	var v ledgerValue
	if err := json.Unmarshal(kv.Value(), &v); err != nil {
		return LedgerRun{}, false, fmt.Errorf("reading the ledger entry of job %s run %d: %w", jobID, run, err)
	}
	return v.LedgerRun, true, nil
}

// Ledger returns the ledger entry of a job id, its ended runs in order;
// found is false when no run of it ended.
func (c *Conn) Ledger(ctx context.Context, jobID string) (LedgerEntry, bool, error) {
	e := LedgerEntry{JobID: jobID}
	lister, err := c.buckets.ledger.ListKeysFiltered(ctx, LedgerKey(jobID)+".*")
	if errors.Is(err, jetstream.ErrNoKeysFound) {
		return e, false, nil
	}
	if err != nil {
		return e, false, fmt.Errorf("listing the ledger entries of job %s: %w", jobID, err)
	}
	var runs []int
	for k := range lister.Keys() { // closed once every key was listed

		_, num, _ := strings.Cut(k, ".")
		if n, err := strconv.Atoi(num); err == nil {
			runs = append(runs, n)
		}
	}
	slices.Sort(runs)
	for _, n := range runs {
		r, ok, err := c.runEnded(ctx, jobID, n)
		if err != nil {
			return e, false, err
		}
		if ok {
			e.Runs = append(e.Runs, r)
		}
	}
	return e, len(e.Runs) > 0, nil
}

// recordRun writes run into the ledger unless that run ended already: one
// Create, which fails when another worker wrote the run first. It returns
// the ledger's record of the run: ours, or the one another worker wrote
// first (then the caller's outcome is a second one and must go).
func (c *Conn) recordRun(ctx context.Context, jobID string, run LedgerRun) (LedgerRun, error) {
	value, err := jsonv2.Marshal(ledgerValue{JobID: jobID, LedgerRun: run})
	if err != nil {
		return LedgerRun{}, fmt.Errorf("encoding the ledger entry of job %s: %w", jobID, err)
	}
	key := ledgerRunKey(jobID, run.Run)
	for attempt := 0; ; attempt++ {
		if attempt == 0 {
			err = c.createRun(ctx, key, value)
		} else {
			// A delete marker on the key: Create writes over it.
			_, err = c.buckets.ledger.Create(ctx, key, value)
		}
		if err == nil {
			return run, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) || attempt >= 10 {
			return LedgerRun{}, fmt.Errorf("writing the ledger entry of job %s run %d: %w", jobID, run.Run, err)
		}
		// Another writer of this run came first: theirs stands.
		have, ok, err := c.runEnded(ctx, jobID, run.Run)
		if err != nil {
			return LedgerRun{}, err
		}
		if ok {
			return have, nil
		}
		// Deleted in between (a purge): try to write ours again.
	}
}

// Ended returns the ledger entries of the job ids that have an ended run.
func (c *Conn) Ended(ctx context.Context, jobIDs []string) (map[string]LedgerEntry, error) {
	out := make(map[string]LedgerEntry)
	for _, id := range jobIDs {
		e, found, err := c.Ledger(ctx, id)
		if err != nil {
			return nil, err
		}
		if found {
			out[id] = e
		}
	}
	return out, nil
}

// runsEnded reports, for each item that carries a job id, whether the run
// its message id names ended.
func (c *Conn) runsEnded(ctx context.Context, items []SubmitItem) (ended []bool, inputs []string, err error) {
	keys := make([]runKey, 0, len(items))
	at := make([]int, 0, len(items))
	for i, it := range items {
		if it.JobID != "" {
			keys = append(keys, runKey{it.JobID, RunOf(it.MsgID, it.JobID)})
			at = append(at, i)
		}
	}
	in := make([]string, len(keys))
	got, err := c.endedRunsInputs(ctx, keys, in)
	if err != nil {
		return nil, nil, err
	}
	ended, inputs = make([]bool, len(items)), make([]string, len(items))
	for k, i := range at {
		ended[i], inputs[i] = got[k], in[k]
	}
	return ended, inputs, nil
}

// lastRuns finds the last ended run of each key's job, and the input it
// ran, from the key's run (ended, with input in[k]) on: it reads run+1 of
// every job at once, then run+2 of those that had one, and so on (a job's
// runs are numbered on from its last ended one, so the first missing number
// ends the search). One gathered read per round, whatever the number of
// jobs: a file of reruns costs what its first check did.
func (c *Conn) lastRuns(ctx context.Context, keys []runKey, in []string) (last []int, inputs []string, err error) {
	last, inputs = make([]int, len(keys)), slices.Clone(in)
	open := make([]int, len(keys)) // the keys whose next run is not read yet
	for k, key := range keys {
		last[k], open[k] = key.run, k
	}
	for len(open) > 0 {
		next := make([]runKey, len(open))
		for j, k := range open {
			next[j] = runKey{keys[k].jobID, last[k] + 1}
		}
		got := make([]string, len(next))
		ended, err := c.endedRunsInputs(ctx, next, got)
		if err != nil {
			return nil, nil, err
		}
		still := open[:0]
		for j, k := range open {
			if ended[j] {
				last[k], inputs[k] = next[j].run, got[j]
				still = append(still, k)
			}
		}
		open = still
	}
	return last, inputs, nil
}

// JobRun names one run of a job.
type JobRun struct {
	JobID string
	Run   int
}

// Superseded reports, for each run, whether a later run of its job ended
// (a rerun, a replay), in gathered reads of the ledger: what `results
// --latest` leaves out.
func (c *Conn) Superseded(ctx context.Context, runs []JobRun) ([]bool, error) {
	keys := make([]runKey, len(runs))
	for i, r := range runs {
		keys[i] = runKey{r.JobID, r.Run}
	}
	last, _, err := c.lastRuns(ctx, keys, make([]string, len(keys)))
	if err != nil {
		return nil, fmt.Errorf("checking the job ledger: %w", err)
	}
	out := make([]bool, len(runs))
	for i, r := range runs {
		out[i] = last[i] > r.Run
	}
	return out, nil
}

// pick is xs at the indices at.
func pick[T any](xs []T, at []int) []T {
	out := make([]T, len(at))
	for k, i := range at {
		out[k] = xs[i]
	}
	return out
}

// maxChangedIDs bounds SubmitStats.ChangedIDs.
const maxChangedIDs = 1000

// filterEnded applies the ledger to the items that carry a job id: an
// item whose run already ended is dropped (counted in stats.AlreadyDone,
// or in stats.Changed when both that run and the job's last run ran
// another input) or, with Rerun (RerunChanged for a changed one), given
// the message id of the run after the last one that ended. Only reruns and
// items that look changed cost more reads (see lastRuns), gathered too.
func (c *Conn) filterEnded(ctx context.Context, items []SubmitItem, stats *SubmitStats) ([]SubmitItem, error) {
	ended, inputs, err := c.runsEnded(ctx, items)
	if err != nil {
		return nil, fmt.Errorf("checking the job ledger: %w", err)
	}
	kept := make([]SubmitItem, 0, len(items))
	var look []int // ended items that need the job's last run
	for i, it := range items {
		if !ended[i] {
			kept = append(kept, it)
			continue
		}
		maybeChanged := it.Input != "" && inputs[i] != "" && inputs[i] != it.Input
		if !it.Rerun && !maybeChanged {
			stats.AlreadyDone++
			continue
		}
		look = append(look, i)
	}
	// The items that need the job's last run: reruns (numbered after it)
	// and the ones that look changed (a rerun may have run their input).
	keys := make([]runKey, len(look))
	for k, i := range look {
		keys[k] = runKey{items[i].JobID, RunOf(items[i].MsgID, items[i].JobID)}
	}
	last, lastIn, err := c.lastRuns(ctx, keys, pick(inputs, look))
	if err != nil {
		return nil, fmt.Errorf("checking the job ledger: %w", err)
	}
	for k, i := range look {
		it := items[i]
		changed := it.Input != "" && inputs[i] != it.Input && lastIn[k] != "" && lastIn[k] != it.Input
		switch {
		case it.Rerun || changed && it.RerunChanged:
			it.MsgID = RunMsgID(it.JobID, last[k]+1)
			stats.Reruns++
			kept = append(kept, it)
		case changed:
			stats.Changed++
			if len(stats.ChangedIDs) < maxChangedIDs {
				stats.ChangedIDs = append(stats.ChangedIDs, it.JobID)
			}
		default:
			stats.AlreadyDone++
		}
	}
	return kept, nil
}
