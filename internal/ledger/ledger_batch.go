package ledger

// Reading and writing the job ledger at the rate of the workers. A worker
// asks the ledger about every job before calling the model, so the reads
// of all the jobs in flight are gathered into one JetStream direct get of
// many subjects (multi_last), which the server answers with the keys it
// holds: for jobs that are new, one small "no results" reply for up to
// ledgerBatch jobs instead of a request and a reply each. A run is
// recorded with an asynchronous publish that expects the key to be new,
// the same compare-and-set as KeyValue.Create without its synchronous
// request.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const (
	// ledgerStream is the stream behind the ledger bucket, ledgerSubject
	// the prefix of its keys' subjects.
	ledgerStream  = "KV_" + broker.BucketLedger
	ledgerSubject = "$KV." + broker.BucketLedger + "."
	// ledgerBatch is the most keys read in one request (the server
	// answers at most 1024 subjects in one multi_last read).
	ledgerBatch = 256
	// ledgerReadsInFlight is how many gathered reads run at once.
	ledgerReadsInFlight = 2
	// The headers of a status reply (nats.go reads the status line
	// into them).
	statusHeader = "Status"
	descrHeader  = "Description"
	// ledgerReadTimeout bounds one gathered read.
	ledgerReadTimeout = 10 * time.Second
)

func (k JobRun) subject() string { return ledgerSubject + ledgerRunKey(k.JobID, k.Run) }

// endedRuns reports, for each key, whether the ledger holds its run: one
// direct get per ledgerBatch keys. A key that was deleted or purged (its
// last message a delete marker) did not end.
func (l *Ledger) endedRuns(ctx context.Context, keys []JobRun) ([]bool, error) {
	return l.EndedRunsInputs(ctx, keys, nil)
}

// EndedRunsInputs is endedRuns that also sets inputs[i], when inputs is not
// nil, to the input digest the ended run of keys[i] recorded.
func (l *Ledger) EndedRunsInputs(ctx context.Context, keys []JobRun, inputs []string) ([]bool, error) {
	ended := make([]bool, len(keys))
	for lo := 0; lo < len(keys); lo += ledgerBatch {
		hi := min(lo+ledgerBatch, len(keys))
		var in []string
		if inputs != nil {
			in = inputs[lo:hi]
		}
		if err := l.endedChunk(ctx, keys[lo:hi], ended[lo:hi], in); err != nil {
			return nil, fmt.Errorf("reading the job ledger: %w", err)
		}
	}
	return ended, nil
}

func (l *Ledger) endedChunk(ctx context.Context, keys []JobRun, ended []bool, inputs []string) error {
	at := make(map[string][]int, len(keys))
	req := multiLastRequest{Subjects: make([]string, 0, len(keys))}
	for i, k := range keys {
		s := k.subject()
		if _, ok := at[s]; !ok {
			req.Subjects = append(req.Subjects, s)
		}
		at[s] = append(at[s], i)
	}
	body, err := json.Marshal(req)
	if err != nil {
		return fmt.Errorf("encoding a multi-key read: %w", err)
	}
	replies, done, err := l.conn.RequestMany("$JS.API.DIRECT.GET."+ledgerStream, body, len(req.Subjects)+1)
	if err != nil {
		return err
	}
	defer done()
	for {
		var m *nats.Msg
		select {
		case m = <-replies:
		case <-ctx.Done():
			return ctx.Err()
		}
		if status := m.Header.Get(statusHeader); status != "" || len(m.Header) == 0 {
			switch status {
			case "404": // none of the keys is in the ledger
				return nil
			case "204": // end of the batch
				return nil
			case "503":
				return fmt.Errorf("no responders for direct gets on stream %s", ledgerStream)
			}
			return fmt.Errorf("multi-key read of stream %s: status %q %s", ledgerStream, status, m.Header.Get(descrHeader))
		}
		switch m.Header.Get("KV-Operation") {
		case "DEL", "PURGE":
			continue
		}
		var v struct {
			Input string `json:"input"`
		}
		if inputs != nil {
			// A value that does not decode names no input: the run counts
			// as ended, whatever it ran.
			_ = json.Unmarshal(m.Data, &v)
		}
		for _, i := range at[m.Header.Get(jetstream.SubjectHeader)] {
			ended[i] = true
			if inputs != nil {
				inputs[i] = v.Input
			}
		}
	}
}

// multiLastRequest is a direct get of the last message of each subject.
type multiLastRequest struct {
	Subjects []string `json:"multi_last"`
}

// Query is one worker's question to the ledger, answered by a
// gathered read.
type Query struct {
	key   JobRun
	ended bool
	err   error
	done  chan struct{}
}

// reads gathers the ledger reads of concurrent callers: a caller
// queues its key and, unless ledgerReadsInFlight reads are already going,
// starts one; a read takes every queued key (up to ledgerBatch) and reads
// again while keys are queued, so the reads grow with the load.
type reads struct {
	led      *Ledger
	mu       sync.Mutex
	pending  []*Query
	inFlight int
}

// ended reports whether run of jobID ended, through a gathered read.
func (l *reads) ended(ctx context.Context, jobID string, run int) (bool, error) {
	return l.start(jobID, run).Wait(ctx)
}

// start queues the question whether run of jobID ended; its answer comes
// with wait.
func (l *reads) start(jobID string, run int) *Query {
	q := &Query{key: JobRun{jobID, run}, done: make(chan struct{})}
	l.mu.Lock()
	l.pending = append(l.pending, q)
	start := l.inFlight < ledgerReadsInFlight
	if start {
		l.inFlight++
	}
	l.mu.Unlock()
	if start {
		go l.read()
	}
	return q
}

// Key is the run the query asks about.
func (q *Query) Key() JobRun { return q.key }

// Wait returns the query's answer.
func (q *Query) Wait(ctx context.Context) (bool, error) {
	select {
	case <-q.done:
		return q.ended, q.err
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// RunOfMsgID guesses, from a job message's id alone, the ledger key its
// delivery will be checked under: "<job id>~r<n>" is run n of the job, any
// other id run 0 of the job of that id. prepare checks the guess against
// the parsed job.
func RunOfMsgID(msgID string) JobRun {
	if i := strings.LastIndex(msgID, "~r"); i > 0 {
		if n := RunOf(msgID, msgID[:i]); n > 0 {
			return JobRun{msgID[:i], n}
		}
	}
	return JobRun{msgID, 0}
}

// read answers queued queries until none is left. It runs on its own
// context: the queries it answers come from many callers, and one of them
// leaving does not end the others' read.
func (l *reads) read() {
	for {
		l.mu.Lock()
		if len(l.pending) == 0 {
			l.inFlight--
			l.mu.Unlock()
			return
		}
		n := min(len(l.pending), ledgerBatch)
		batch := make([]*Query, n)
		copy(batch, l.pending)
		l.pending = append(l.pending[:0], l.pending[n:]...)
		l.mu.Unlock()

		keys := make([]JobRun, n)
		for i, q := range batch {
			keys[i] = q.key
		}
		ctx, cancel := context.WithTimeout(context.Background(), ledgerReadTimeout)
		ended, err := l.led.endedRuns(ctx, keys)
		cancel()
		for i, q := range batch {
			if err != nil {
				q.err = fmt.Errorf("reading the ledger entry of job %s run %d: %w", q.key.JobID, q.key.Run, err)
			} else {
				q.ended = ended[i]
			}
			close(q.done)
		}
	}
}

// createRun writes a run's ledger key if it does not exist yet: an
// asynchronous publish that expects no message on the key's subject. It
// returns jetstream.ErrKeyExists when the subject has one (the run was
// recorded, or recorded and deleted: the caller tells which).
func (l *Ledger) createRun(ctx context.Context, key string, value []byte) error {
	msg := nats.NewMsg(ledgerSubject + key)
	msg.Data = value
	msg.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "0")
	fut, err := l.conn.PublishAsync(ctx, msg)
	if err != nil {
		return err
	}
	select {
	case <-fut.Ok():
		return nil
	case err := <-fut.Err():
		var apiErr *jetstream.APIError
		if errors.As(err, &apiErr) && (apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence ||
			apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequenceConstant) {
			return jetstream.ErrKeyExists
		}
		// Not acknowledged (a timeout, a lost connection): the request
		// form says which.
		_, err = l.kv.Create(ctx, key, value)
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
