package ingest

// The job ledger: a KV bucket on JetStream that remembers, per job id,
// which runs ended and where each outcome is stored. It outlives the
// streams' duplicate window, and every submitter and worker of a cluster
// reads the same one: submit skips ended jobs, and a worker acks, without
// calling the model, a delivery whose run already ended.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// BucketLedger is the KV bucket of the job ledger.
const BucketLedger = "PIPELINE_LEDGER"

// ledgerLookups is how many ledger reads Ended keeps in flight.
const ledgerLookups = 64

// LedgerRun is one ended run of a job.
type LedgerRun struct {
	// Run is 0 for the job as submitted, n for its n-th rerun or replay.
	Run   int    `json:"run"`
	MsgID string `json:"msg_id"`
	// Stream (RESULTS or DLQ) and Seq say where the outcome is stored.
	Stream string    `json:"stream"`
	Seq    uint64    `json:"seq"`
	At     time.Time `json:"at"`
}

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
// A-Z a-z 0-9 - _ / = . and job ids may hold : ~ @ +, so every byte outside
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

// Ledger returns the ledger entry of a job id; found is false when no run
// of it ended.
func (c *Conn) Ledger(ctx context.Context, jobID string) (LedgerEntry, bool, error) {
	e, _, found, err := c.ledgerGet(ctx, jobID)
	return e, found, err
}

func (c *Conn) ledgerGet(ctx context.Context, jobID string) (LedgerEntry, uint64, bool, error) {
	kv, err := c.buckets.ledger.Get(ctx, LedgerKey(jobID))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return LedgerEntry{JobID: jobID}, 0, false, nil
	}
	if err != nil {
		return LedgerEntry{}, 0, false, fmt.Errorf("reading the ledger entry of job %s: %w", jobID, err)
	}
	var e LedgerEntry
	if err := json.Unmarshal(kv.Value(), &e); err != nil {
		return LedgerEntry{}, 0, false, fmt.Errorf("reading the ledger entry of job %s: %w", jobID, err)
	}
	return e, kv.Revision(), true, nil
}

// recordRun writes run into the ledger entry of jobID unless that run
// ended already, with compare-and-set so that concurrent writers of one
// job never overwrite each other. It returns the ledger's record of the
// run: ours, or the one another worker wrote first (then the caller's
// outcome is a second one and must go).
func (c *Conn) recordRun(ctx context.Context, jobID string, run LedgerRun) (LedgerRun, error) {
	key := LedgerKey(jobID)
	for attempt := 0; ; attempt++ {
		e, rev, found, err := c.ledgerGet(ctx, jobID)
		if err != nil {
			return LedgerRun{}, err
		}
		if have, ok := e.Ended(run.Run); ok {
			return have, nil
		}
		e.JobID = jobID
		e.Runs = append(e.Runs, run)
		value, err := json.Marshal(e)
		if err != nil {
			return LedgerRun{}, fmt.Errorf("encoding the ledger entry of job %s: %w", jobID, err)
		}
		if found {
			_, err = c.buckets.ledger.Update(ctx, key, value, rev)
		} else {
			_, err = c.buckets.ledger.Create(ctx, key, value)
		}
		if err == nil {
			return run, nil
		}
		conflict := errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch)
		if !conflict || attempt >= 10 {
			return LedgerRun{}, fmt.Errorf("writing the ledger entry of job %s run %d: %w", jobID, run.Run, err)
		}
		// Another writer of this job came first: read again and decide.
	}
}

// Ended looks the job ids up in the ledger (ledgerLookups reads in
// flight) and returns the entries of those that have an ended run.
func (c *Conn) Ended(ctx context.Context, jobIDs []string) (map[string]LedgerEntry, error) {
	entries := make([]LedgerEntry, len(jobIDs))
	found := make([]bool, len(jobIDs))
	errs := make([]error, len(jobIDs))
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	sem := make(chan struct{}, ledgerLookups)
	var wg sync.WaitGroup
	for i, id := range jobIDs {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			entries[i], _, found[i], errs[i] = c.ledgerGet(ctx, id)
			if errs[i] != nil {
				cancel()
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil && !errors.Is(err, context.Canceled) {
			return nil, err // the first real failure, not the reads it cancelled
		}
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("reading the job ledger: %w", err)
	}
	out := make(map[string]LedgerEntry)
	for i, id := range jobIDs {
		if found[i] {
			out[id] = entries[i]
		}
	}
	return out, nil
}

// filterEnded applies the ledger to the items that carry a job id: an
// item whose run already ended is dropped (counted in done) or, with
// Rerun, given the message id of the run after the last one that ended.
func (c *Conn) filterEnded(ctx context.Context, items []SubmitItem) (kept []SubmitItem, done, reruns int, err error) {
	var ids []string
	for _, it := range items {
		if it.JobID != "" {
			ids = append(ids, it.JobID)
		}
	}
	if len(ids) == 0 {
		return items, 0, 0, nil
	}
	ended, err := c.Ended(ctx, ids)
	if err != nil {
		return nil, 0, 0, fmt.Errorf("checking the job ledger: %w", err)
	}
	if len(ended) == 0 {
		return items, 0, 0, nil
	}
	kept = make([]SubmitItem, 0, len(items))
	for _, it := range items {
		e, ok := ended[it.JobID]
		if it.JobID == "" || !ok {
			kept = append(kept, it)
			continue
		}
		if _, runEnded := e.Ended(RunOf(it.MsgID, it.JobID)); !runEnded {
			kept = append(kept, it)
			continue
		}
		if !it.Rerun {
			done++
			continue
		}
		it.MsgID = RunMsgID(it.JobID, e.LastRun()+1)
		reruns++
		kept = append(kept, it)
	}
	return kept, done, reruns, nil
}
