package ledger

// The job ledger: a KV bucket on JetStream that remembers, per job id,
// which runs ended and where each outcome is stored. Each ended run is one
// key, <Key(job id)>.<run>, written once with Create: a worker checks
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
	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/job"
	"github.com/nats-io/nats.go/jetstream"
)

// Ledger reads and writes the job ledger, the KV bucket
// broker.BucketLedger: which run of each job id ended, and where its
// outcome is stored. Reads of concurrent callers (Ask, RunEnded) are
// gathered into one request each (see ledger_batch.go). Make one Ledger
// per process part (the workers, a submit) and share it.
type Ledger struct {
	conn  *broker.Conn
	kv    jetstream.KeyValue
	reads reads
}

// New is the Ledger of conn's ledger bucket.
func New(conn *broker.Conn) *Ledger {
	l := &Ledger{conn: conn, kv: conn.LedgerBucket()}
	l.reads.led = l
	return l
}

// Ask starts a gathered read of whether run of jobID ended; its answer
// comes with Query.Wait. A worker asks before it parses a job, so that the
// read overlaps with the rest of its preparation.
func (l *Ledger) Ask(jobID string, run int) *Query { return l.reads.start(jobID, run) }

// Run is one ended run of a job.
type Run struct {
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
func InputDigest(j job.Job) string {
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
	// A job's files count by their digests (a job without files hashes
	// as it always has).
	for _, f := range j.Files {
		h.Write([]byte(f.SHA256))
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

var digestBufs = sync.Pool{New: func() any { b := make([]byte, 4096); return &b }}

// Entry is the ledger's value for one job id.
type Entry struct {
	JobID string `json:"job_id"`
	Runs  []Run  `json:"runs"`
}

// Ended returns the entry of run, if it ended.
func (e Entry) Ended(run int) (Run, bool) {
	for _, r := range e.Runs {
		if r.Run == run {
			return r, true
		}
	}
	return Run{}, false
}

// LastRun is the highest run that ended (-1 for none).
func (e Entry) LastRun() int {
	last := -1
	for _, r := range e.Runs {
		last = max(last, r.Run)
	}
	return last
}

// Key is the ledger's key for a job id. KV keys allow only
// A-Z a-z 0-9 - _ / = . and a job id is any printable UTF-8, so every byte outside
// A-Z a-z 0-9 - _ is written as =XX (hex), '=' included: the mapping is
// injective and leaves the usual ids readable ("inv-0001" stays itself).
func Key(jobID string) string {
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
	return Key(jobID) + "." + strconv.Itoa(run)
}

// ledgerValue is what a run's key holds.
type ledgerValue struct {
	JobID string `json:"job_id"`
	Run
}

// RunEnded reads the ledger's record of one run of a job.
func (l *Ledger) RunEnded(ctx context.Context, jobID string, run int) (Run, bool, error) {
	kv, err := l.kv.Get(ctx, ledgerRunKey(jobID, run))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Run{}, false, nil
	}
	if err != nil {
		return Run{}, false, fmt.Errorf("reading the ledger entry of job %s run %d: %w", jobID, run, err)
	}
	var v ledgerValue
	if err := json.Unmarshal(kv.Value(), &v); err != nil {
		return Run{}, false, fmt.Errorf("reading the ledger entry of job %s run %d: %w", jobID, run, err)
	}
	return v.Run, true, nil
}

// Ledger returns the ledger entry of a job id, its ended runs in order;
// found is false when no run of it ended.
func (l *Ledger) Get(ctx context.Context, jobID string) (Entry, bool, error) {
	e := Entry{JobID: jobID}
	lister, err := l.kv.ListKeysFiltered(ctx, Key(jobID)+".*")
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
		r, ok, err := l.RunEnded(ctx, jobID, n)
		if err != nil {
			return e, false, err
		}
		if ok {
			e.Runs = append(e.Runs, r)
		}
	}
	return e, len(e.Runs) > 0, nil
}

// Record writes run into the ledger unless that run ended already: one
// Create, which fails when another worker wrote the run first. It returns
// the ledger's record of the run: ours, or the one another worker wrote
// first (then the caller's outcome is a second one and must go).
func (l *Ledger) Record(ctx context.Context, jobID string, run Run) (Run, error) {
	value, err := jsonv2.Marshal(ledgerValue{JobID: jobID, Run: run})
	if err != nil {
		return Run{}, fmt.Errorf("encoding the ledger entry of job %s: %w", jobID, err)
	}
	key := ledgerRunKey(jobID, run.Run)
	for attempt := 0; ; attempt++ {
		if attempt == 0 {
			err = l.createRun(ctx, key, value)
		} else {
			// A delete marker on the key: Create writes over it.
			_, err = l.kv.Create(ctx, key, value)
		}
		if err == nil {
			return run, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) || attempt >= 10 {
			return Run{}, fmt.Errorf("writing the ledger entry of job %s run %d: %w", jobID, run.Run, err)
		}
		// Another writer of this run came first: theirs stands.
		have, ok, err := l.RunEnded(ctx, jobID, run.Run)
		if err != nil {
			return Run{}, err
		}
		if ok {
			return have, nil
		}
		// Deleted in between (a purge): try to write ours again.
	}
}

// Ended returns the ledger entries of the job ids that have an ended run.
func (l *Ledger) Ended(ctx context.Context, jobIDs []string) (map[string]Entry, error) {
	out := make(map[string]Entry)
	for _, id := range jobIDs {
		e, found, err := l.Get(ctx, id)
		if err != nil {
			return nil, err
		}
		if found {
			out[id] = e
		}
	}
	return out, nil
}

// LastRuns finds the last ended run of each key's job, and the input it
// ran, from the key's run (ended, with input in[k]) on: it reads run+1 of
// every job at once, then run+2 of those that had one, and so on (a job's
// runs are numbered on from its last ended one, so the first missing number
// ends the search). One gathered read per round, whatever the number of
// jobs: a file of reruns costs what its first check did.
func (l *Ledger) LastRuns(ctx context.Context, keys []JobRun, in []string) (last []int, inputs []string, err error) {
	last, inputs = make([]int, len(keys)), slices.Clone(in)
	open := make([]int, len(keys)) // the keys whose next run is not read yet
	for k, key := range keys {
		last[k], open[k] = key.Run, k
	}
	for len(open) > 0 {
		next := make([]JobRun, len(open))
		for j, k := range open {
			next[j] = JobRun{keys[k].JobID, last[k] + 1}
		}
		got := make([]string, len(next))
		ended, err := l.EndedRunsInputs(ctx, next, got)
		if err != nil {
			return nil, nil, err
		}
		still := open[:0]
		for j, k := range open {
			if ended[j] {
				last[k], inputs[k] = next[j].Run, got[j]
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
func (l *Ledger) Superseded(ctx context.Context, runs []JobRun) ([]bool, error) {
	keys := make([]JobRun, len(runs))
	for i, r := range runs {
		keys[i] = JobRun{r.JobID, r.Run}
	}
	last, _, err := l.LastRuns(ctx, keys, make([]string, len(keys)))
	if err != nil {
		return nil, fmt.Errorf("checking the job ledger: %w", err)
	}
	out := make([]bool, len(runs))
	for i, r := range runs {
		out[i] = last[i] > r.Run
	}
	return out, nil
}
