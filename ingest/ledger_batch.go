package ingest

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
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

const (
	// ledgerStream is the stream behind the ledger bucket, ledgerSubject
	// the prefix of its keys' subjects.
	ledgerStream  = "KV_" + BucketLedger
	ledgerSubject = "$KV." + BucketLedger + "."
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

// runKey names one run of a job in the ledger.
type runKey struct {
	jobID string
	run   int
}

func (k runKey) subject() string { return ledgerSubject + ledgerRunKey(k.jobID, k.run) }

// endedRuns reports, for each key, whether the ledger holds its run: one
// direct get per ledgerBatch keys. A key that was deleted or purged (its
// last message a delete marker) did not end.
func (c *Conn) endedRuns(ctx context.Context, keys []runKey) ([]bool, error) {
	return c.endedRunsInputs(ctx, keys, nil)
}

// endedRunsInputs is endedRuns that also sets inputs[i], when inputs is not
// nil, to the input digest the ended run of keys[i] recorded.
func (c *Conn) endedRunsInputs(ctx context.Context, keys []runKey, inputs []string) ([]bool, error) {
	ended := make([]bool, len(keys))
	for lo := 0; lo < len(keys); lo += ledgerBatch {
		hi := min(lo+ledgerBatch, len(keys))
		var in []string
		if inputs != nil {
			in = inputs[lo:hi]
		}
		if err := c.endedChunk(ctx, keys[lo:hi], ended[lo:hi], in); err != nil {
			return nil, fmt.Errorf("reading the job ledger: %w", err)
		}
	}
	return ended, nil
}

func (c *Conn) endedChunk(ctx context.Context, keys []runKey, ended []bool, inputs []string) error {
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
	replies, done, err := c.ledgerInbox.request(c.nc, "$JS.API.DIRECT.GET."+ledgerStream, body, len(req.Subjects)+1)
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

// replyMux receives the replies of many-message requests on one
// subscription, a wildcard inbox, each request under its own last token.
type replyMux struct {
	once   sync.Once
	err    error
	prefix string
	mu     sync.Mutex
	next   uint64
	wait   map[string]chan *nats.Msg
}

// request publishes body on subject with a reply subject of its own and
// returns the channel its replies arrive on (room for want of them; more
// are dropped) and the function that stops them.
func (x *replyMux) request(nc *nats.Conn, subject string, body []byte, want int) (<-chan *nats.Msg, func(), error) {
	x.once.Do(func() {
		x.prefix = nc.NewRespInbox() + "."
		x.wait = make(map[string]chan *nats.Msg)
		_, x.err = nc.Subscribe(x.prefix+"*", x.deliver)
	})
	if x.err != nil {
		return nil, nil, fmt.Errorf("subscribing to the replies of direct gets: %w", x.err)
	}
	ch := make(chan *nats.Msg, want)
	x.mu.Lock()
	x.next++
	token := strconv.FormatUint(x.next, 36)
	x.wait[token] = ch
	x.mu.Unlock()
	done := func() {
		x.mu.Lock()
		delete(x.wait, token)
		x.mu.Unlock()
	}
	if err := nc.PublishRequest(subject, x.prefix+token, body); err != nil {
		done()
		return nil, nil, fmt.Errorf("requesting %s: %w", subject, err)
	}
	return ch, done, nil
}

func (x *replyMux) deliver(m *nats.Msg) {
	token := m.Subject[len(x.prefix):]
	x.mu.Lock()
	ch := x.wait[token]
	x.mu.Unlock()
	if ch == nil {
		return // a request that gave up
	}
	select {
	case ch <- m:
	default: // more replies than asked for: not ours to block on
	}
}

// ledgerQuery is one worker's question to the ledger, answered by a
// gathered read.
type ledgerQuery struct {
	key   runKey
	ended bool
	err   error
	done  chan struct{}
}

// ledgerReads gathers the ledger reads of concurrent callers: a caller
// queues its key and, unless ledgerReadsInFlight reads are already going,
// starts one; a read takes every queued key (up to ledgerBatch) and reads
// again while keys are queued, so the reads grow with the load.
type ledgerReads struct {
	c        *Conn
	mu       sync.Mutex
	pending  []*ledgerQuery
	inFlight int
}

// ended reports whether run of jobID ended, through a gathered read.
func (l *ledgerReads) ended(ctx context.Context, jobID string, run int) (bool, error) {
	return l.start(jobID, run).wait(ctx)
}

// start queues the question whether run of jobID ended; its answer comes
// with wait.
func (l *ledgerReads) start(jobID string, run int) *ledgerQuery {
	q := &ledgerQuery{key: runKey{jobID, run}, done: make(chan struct{})}
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

// wait returns the query's answer.
func (q *ledgerQuery) wait(ctx context.Context) (bool, error) {
	select {
	case <-q.done:
		return q.ended, q.err
	case <-ctx.Done():
		return false, ctx.Err()
	}
}

// runOfMsgID guesses, from a job message's id alone, the ledger key its
// delivery will be checked under: "<job id>~r<n>" is run n of the job, any
// other id run 0 of the job of that id. prepare checks the guess against
// the parsed job.
func runOfMsgID(msgID string) runKey {
	if i := strings.LastIndex(msgID, "~r"); i > 0 {
		if n := RunOf(msgID, msgID[:i]); n > 0 {
			return runKey{msgID[:i], n}
		}
	}
	return runKey{msgID, 0}
}

// read answers queued queries until none is left. It runs on its own
// context: the queries it answers come from many callers, and one of them
// leaving does not end the others' read.
func (l *ledgerReads) read() {
	for {
		l.mu.Lock()
		if len(l.pending) == 0 {
			l.inFlight--
			l.mu.Unlock()
			return
		}
		n := min(len(l.pending), ledgerBatch)
		batch := make([]*ledgerQuery, n)
		copy(batch, l.pending)
		l.pending = append(l.pending[:0], l.pending[n:]...)
		l.mu.Unlock()

		keys := make([]runKey, n)
		for i, q := range batch {
			keys[i] = q.key
		}
		ctx, cancel := context.WithTimeout(context.Background(), ledgerReadTimeout)
		ended, err := l.c.endedRuns(ctx, keys)
		cancel()
		for i, q := range batch {
			if err != nil {
				q.err = fmt.Errorf("reading the ledger entry of job %s run %d: %w", q.key.jobID, q.key.run, err)
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
func (c *Conn) createRun(ctx context.Context, key string, value []byte) error {
	msg := nats.NewMsg(ledgerSubject + key)
	msg.Data = value
	msg.Header.Set(jetstream.ExpectedLastSubjSeqHeader, "0")
	fut, err := c.publishAsync(ctx, msg)
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
		_, err = c.buckets.ledger.Create(ctx, key, value)
		return err
	case <-ctx.Done():
		return ctx.Err()
	}
}
