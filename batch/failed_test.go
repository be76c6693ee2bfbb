package batch_test

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/batch"
	"github.com/llmpipeline/pipeline/internal/ledger"
	"github.com/llmpipeline/pipeline/internal/poll"
	"github.com/llmpipeline/pipeline/job"
	"github.com/llmpipeline/pipeline/llm/batchtest"
	"github.com/llmpipeline/pipeline/model"
)

// syncBuffer is a log sink safe for the runner's goroutines.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// record is the record of the batch the provider knows as id.
func (r *rig) record(id string) batch.Record {
	r.t.Helper()
	rec, ok := r.findRecord(id)
	if !ok {
		r.t.Fatalf("no record of batch %s", id)
	}
	return rec
}

// findRecord looks for the record of the batch the provider knows as id
// (none until the record names it).
func (r *rig) findRecord(id string) (batch.Record, bool) {
	r.t.Helper()
	recs, err := batch.Records(r.t.Context(), r.kv)
	if err != nil {
		r.t.Fatal(err)
	}
	for _, rec := range recs {
		if rec.ProviderID == id {
			return rec, true
		}
	}
	return batch.Record{}, false
}

// waitPolls waits until the runner has read the bucket whole n more times.
func (r *rig) waitPolls(n int) {
	r.t.Helper()
	last := r.run.Census().At
	poll.UntilOK(r.t, 20*time.Second, "the runner to poll", func() error {
		if at := r.run.Census().At; at.After(last) {
			last = at
			n--
		}
		if n > 0 {
			return fmt.Errorf("the runner stopped polling: %d polls to go", n)
		}
		return nil
	})
}

// waitStatus waits until the provider's batch id has status.
func (r *rig) waitStatus(id, status string) {
	r.t.Helper()
	poll.UntilOK(r.t, 20*time.Second, fmt.Sprintf("batch %s to be %q", id, status), func() error {
		if got := r.srv.Status(id); got != status {
			return fmt.Errorf("batch %s is %q, never %q", id, got, status)
		}
		return nil
	})
}

// waitRecordEnded waits until the record of the provider's batch id is
// ended, and returns it.
func (r *rig) waitRecordEnded(id string) batch.Record {
	r.t.Helper()
	var rec batch.Record
	poll.UntilOK(r.t, 20*time.Second, fmt.Sprintf("the record of batch %s to end", id), func() error {
		var ok bool
		switch rec, ok = r.findRecord(id); {
		case !ok:
			return fmt.Errorf("the record of batch %s never ended: no record names it", id)
		case rec.State != batch.StateEnded:
			return fmt.Errorf("the record of batch %s never ended: it is %s", id, rec.State)
		}
		return nil
	})
	return rec
}

func (r *rig) allSucceeded(ids ...string) {
	r.t.Helper()
	got := r.outcomes()
	for _, id := range ids {
		if o := got[id]; len(o) != 1 || o[0].Status != job.StatusSucceeded {
			r.t.Errorf("%s: %+v, want one result", id, o)
		}
	}
}

// A batch failed with token_limit_exceeded while another batch is in
// flight: its requests wait, without spending attempts, until the batch in
// flight has finished; no batch is submitted meanwhile; then every job
// ends as a result. Before: re-sent at once as if expired, up to six
// times, then transport dead letters.
func TestBatchTokenLimitWaitsForBatchesInFlight(t *testing.T) {
	t.Parallel()
	r := newRig(t, true)
	r.size, r.wait = 3, 2*time.Second // three jobs a batch, whatever the scheduling
	first := []string{"ok-1", "ok-2", "ok-3"}
	r.submit(first...)
	stop := r.start(batch.HealBatch)
	defer stop()
	b1 := r.waitBatch(1)
	r.waitAcked()
	r.waitStatus(b1, "in_progress")
	// One batch of three fits the organisation's limit, two do not.
	r.srv.SetEnqueuedTokenLimit(r.srv.Tokens(b1) * 3 / 2)
	second := []string{"ok-4", "ok-5", "ok-6"}
	r.submit(second...)
	b2 := r.waitBatch(2)
	rec := r.waitRecordEnded(b2)
	if r.srv.Status(b2) != "failed" || !strings.Contains(rec.Reason(), "token_limit_exceeded: Enqueued token limit reached") ||
		!strings.Contains(rec.Reason(), "3 requests re-sent once the batches in flight (1) have finished") {
		t.Fatalf("batch %s: status %q, reason %q", b2, r.srv.Status(b2), rec.Reason())
	}
	r.waitPolls(5)
	// A job arriving meanwhile is acked into the queue, and waits too.
	r.submit("ok-7")
	second = append(second, "ok-7")
	r.waitAcked()
	r.waitPolls(2)
	if n := r.srv.Creates(); n != 2 {
		t.Fatalf("%d batches created while the first is in flight, want 2 (the failed one's requests wait)", n)
	}
	if e, _ := ledger.New(r.conn).Ended(t.Context(), second); len(e) != 0 {
		t.Fatalf("jobs ended while waiting for the enqueued-token limit: %v", e)
	}
	r.srv.SetHold(false)
	r.srv.Release(b1)
	r.waitEnded(append(first, second...)...)
	stop()
	r.allSucceeded(append(first, second...)...)
	if n := r.srv.Creates(); n < 3 {
		t.Errorf("%d batches, want the failed one re-sent", n)
	}
	for _, id := range r.srv.Batches()[2:] {
		if st := r.srv.Status(id); st != "completed" {
			t.Errorf("batch %s re-sent after the wait is %s, want completed", id, st)
		}
	}
	r.noCustomIDTwice()
}

// A batch failed with token_limit_exceeded with no other batch in flight
// is too big: it is re-sent in batches under the limit the message names,
// and every job ends as a result; a request over the limit by itself is a
// request_error dead letter carrying the provider's message.
func TestBatchTokenLimitResendsSmaller(t *testing.T) {
	t.Parallel()
	t.Run("smaller", func(t *testing.T) {
		t.Parallel()
		r := newRig(t, false)
		ids := []string{"ok-1", "ok-2", "ok-3", "ok-4", "ok-5", "ok-6"}
		r.size, r.wait = len(ids), time.Second // the six in the first batch
		// Any 2 requests fit, 6 do not; each is about the same size.
		probe := newRig(t, true)
		probe.submit("ok-1")
		pstop := probe.start(batch.HealBatch)
		limit := probe.srv.Tokens(probe.waitBatch(1)) * 5 / 2
		pstop()
		r.srv.SetEnqueuedTokenLimit(limit)
		r.submit(ids...)
		stop := r.start(batch.HealBatch)
		defer stop()
		r.waitEnded(ids...)
		stop()
		r.allSucceeded(ids...)
		b := r.srv.Batches()
		if r.srv.Status(b[0]) != "failed" {
			t.Fatalf("the first batch is %q, want failed over the limit", r.srv.Status(b[0]))
		}
		for _, id := range b[1:] {
			if n := r.srv.Tokens(id); n > limit || r.srv.Status(id) != "completed" {
				t.Errorf("batch %s: %d tokens (limit %d), %s", id, n, limit, r.srv.Status(id))
			}
		}
		t.Logf("limit %d tokens: %d batches after the failed one", limit, len(b)-1)
		r.noCustomIDTwice()
	})
	t.Run("alone over the limit", func(t *testing.T) {
		t.Parallel()
		r := newRig(t, false, func(c *batchtest.Config) { c.EnqueuedTokenLimit = 10 })
		r.submit("ok-1", "ok-2")
		stop := r.start(batch.HealBatch)
		defer stop()
		r.waitEnded("ok-1", "ok-2")
		stop()
		for id, o := range r.outcomes() {
			if len(o) != 1 || o[0].Status != job.StatusDeadLettered || o[0].Class != "request_error" ||
				!strings.Contains(o[0].Reason, "Enqueued token limit reached") {
				t.Errorf("%s: %+v, want one request_error dead letter with the provider's message", id, o)
			}
		}
	})
}

// A batch failed for a validation error: the request on the line the
// provider names is a request_error dead letter carrying its message; the
// others of the batch are re-sent and end as results. An error that names
// no line sends the requests once more, then dead-letters them.
func TestBatchValidationErrorDeadLetters(t *testing.T) {
	t.Parallel()
	refuse := func(line int) func(*batchtest.Config) {
		return func(c *batchtest.Config) {
			c.Refuse = func(body []byte) *batchtest.ErrorData {
				if bytes.Contains(body, []byte("FATE:bad")) {
					return &batchtest.ErrorData{Code: "invalid_value", Message: "Invalid value for 'messages': the job is refused.", Param: "body.messages", Line: line}
				}
				return nil
			}
		}
	}
	t.Run("line", func(t *testing.T) {
		t.Parallel()
		r := newRig(t, false, refuse(0))
		// The four in one batch: it closes when full, not after the rig's
		// 20ms gather wait, which a loaded machine can outlast.
		r.size, r.wait = 4, time.Second
		ids := []string{"ok-1", "bad-1", "ok-2", "ok-3"}
		r.submit(ids...)
		stop := r.start(batch.HealBatch)
		defer stop()
		r.waitEnded(ids...)
		stop()
		r.allSucceeded("ok-1", "ok-2", "ok-3")
		got := r.outcomes()["bad-1"]
		if len(got) != 1 || got[0].Class != "request_error" || !strings.Contains(got[0].Reason, "invalid_value: Invalid value for 'messages'") {
			t.Fatalf("bad-1: %+v, want a request_error dead letter with the provider's message", got)
		}
		if n := len(r.srv.Submitted()); n != 4+3 {
			t.Errorf("%d requests submitted, want 7: the four, then the three not refused (bad-1's line was named: not re-sent)", n)
		}
		rec := r.record(r.srv.Batches()[0])
		if !strings.Contains(rec.Reason(), "invalid_value") || !strings.Contains(rec.Reason(), "1 dead-lettered") {
			t.Errorf("reason %q", rec.Reason())
		}
		r.noCustomIDTwice()
	})
	t.Run("no line", func(t *testing.T) {
		t.Parallel()
		r := newRig(t, false, refuse(-1))
		r.submit("bad-1")
		stop := r.start(batch.HealBatch)
		defer stop()
		r.waitEnded("bad-1")
		stop()
		got := r.outcomes()["bad-1"]
		if len(got) != 1 || got[0].Class != "request_error" || !strings.Contains(got[0].Reason, "Invalid value for 'messages'") {
			t.Fatalf("bad-1: %+v", got)
		}
		if n := r.srv.Creates(); n != 2 {
			t.Errorf("%d batches, want 2 (one re-send)", n)
		}
	})
}

// One line of an output file cannot be read (cut short; garbage before its
// custom id): only its own request is asked again in a later batch; the
// others of the batch end at once. Before: the batch stayed "collecting",
// its file read again at every poll, and no job ended.
func TestBatchUnreadableLineAffectsItsRequestOnly(t *testing.T) {
	t.Parallel()
	var broken atomic.Int64
	r := newRig(t, false, func(c *batchtest.Config) {
		c.Break = func(id string, line []byte) []byte {
			switch {
			case broken.Load() == 0:
				broken.Add(1)
				return line[:len(line)/2] // cut in the middle of the answer
			case broken.Load() == 1:
				broken.Add(1)
				return append([]byte(`{"id": 7, ]`), line...) // unreadable before its custom_id
			}
			return line
		}
	})
	logs := &syncBuffer{}
	r.logs = logs
	ids := []string{"ok-1", "ok-2", "ok-3", "ok-4"}
	r.submit(ids...)
	stop := r.start(batch.HealBatch)
	defer stop()
	r.waitEnded(ids...)
	stop()
	r.allSucceeded(ids...)
	if n := len(r.srv.Submitted()); n != 4+2 {
		t.Errorf("%d requests submitted, want 6: the 4, then the 2 whose lines were unreadable", n)
	}
	if !strings.Contains(logs.String(), "unreadable result line") {
		t.Errorf("the unreadable lines were not logged:\n%s", logs)
	}
	r.noCustomIDTwice()
}

// A custom id answered twice in one output file is logged and settled by
// its first valid answer. Before: silently settled by its last line.
func TestBatchCustomIDAnsweredTwice(t *testing.T) {
	t.Parallel()
	var dupCalls atomic.Int64
	r := newRig(t, false, func(c *batchtest.Config) {
		c.Twice = func(string) bool { return true }
		c.Answer = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			n := dupCalls.Add(1)
			// The first call answers n 1, the second n 2: the server
			// writes the second line first.
			w.Header().Set("Content-Type", "application/json")
			_ = json.NewEncoder(w).Encode(map[string]any{
				"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4o-mini",
				"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": fmt.Sprintf(`{"n": %d}`, n), "refusal": nil}, "finish_reason": "stop"}},
				"usage":   map[string]any{"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
			})
		})
	})
	logs := &syncBuffer{}
	r.logs = logs
	r.submit("ok-1")
	stop := r.start(batch.HealBatch)
	defer stop()
	r.waitEnded("ok-1")
	stop()
	got := r.outcomes()["ok-1"]
	if len(got) != 1 || string(got[0].Data) != `{"n":2}` {
		t.Fatalf("ok-1: %+v, want the first line's answer {\"n\":2}", got)
	}
	if !strings.Contains(logs.String(), "answered twice") {
		t.Errorf("the custom id answered twice was not logged:\n%s", logs)
	}
}

// A request answered inside a batch with a refused key (a 401 line in
// OpenAI's error file; Anthropic's authentication_error result) is not
// the job's fault: it is queued again, nothing is dead-lettered, and the
// runner stops (Stopped, Err) as the synchronous workers do; the other
// answers of the batch are settled. Before: queued again and sent in the
// next batch, forever.
func TestBatchResultRefusedForTheKeyStops(t *testing.T) {
	t.Parallel()
	r := newRig(t, false, refusedKeyFor(func(body []byte) bool { return bytes.Contains(body, []byte("FATE:auth")) }))
	r.submit("ok-1", "auth-1")
	stop := r.start(batch.HealBatch)
	defer stop()
	select {
	case <-r.run.Stopped():
	case <-time.After(20 * time.Second):
		t.Fatal("the runner did not stop on a refused key")
	}
	if err := r.run.Err(); model.KindOf(err) != model.KindAuth {
		t.Fatalf("Err() = %v, want an auth error", err)
	}
	r.waitEnded("ok-1")
	n := r.srv.Creates()
	stop()
	got := r.outcomes()
	if len(got["auth-1"]) != 0 {
		t.Errorf("auth-1 ended for a refused key: %+v", got["auth-1"])
	}
	r.allSucceeded("ok-1")
	if p, err := r.run.Pending(t.Context()); err != nil || p != 1 {
		t.Errorf("%d jobs held by batch mode (%v), want auth-1 queued for the next run", p, err)
	}
	if n != 1 {
		t.Errorf("%d batches, want 1: nothing is submitted after the stop", n)
	}
}

// With --batch-heal sync, a heal turn refused for the key (a 401 of the
// synchronous endpoint) stops the runner too, and the job waits in the
// queue. Before: queued again and sent in the next batch.
func TestBatchHealSyncRefusedForTheKeyStops(t *testing.T) {
	t.Parallel()
	r := newRig(t, false, refusedKeyFor(func(body []byte) bool { return bytes.Count(body, []byte(`"role"`)) > 2 })) // a heal turn
	r.submit("heal-1")
	stop := r.start(batch.HealSync)
	defer stop()
	select {
	case <-r.run.Stopped():
	case <-time.After(20 * time.Second):
		t.Fatal("the runner did not stop on a heal turn refused for the key")
	}
	if err := r.run.Err(); model.KindOf(err) != model.KindAuth {
		t.Fatalf("Err() = %v, want an auth error", err)
	}
	stop()
	if got := r.outcomes()["heal-1"]; len(got) != 0 {
		t.Errorf("heal-1 ended: %+v", got)
	}
	if p, err := r.run.Pending(t.Context()); err != nil || p != 1 {
		t.Errorf("%d jobs held (%v), want heal-1 queued for the next run", p, err)
	}
}

// Two processes on one bucket: whichever reads the batch that failed for
// the enqueued-token limit, neither submits a batch until the batch in
// flight before the failure has finished (the other learns it from the
// failed batch's record). Before: the other process sent the requests
// again at its next poll, into batches that failed again.
func TestBatchTokenLimitHoldsTheFleet(t *testing.T) {
	t.Parallel()
	r := newRig(t, true)
	r.size, r.wait = 3, 2*time.Second
	first := []string{"ok-1", "ok-2", "ok-3"}
	r.submit(first...)
	stop1 := r.start(batch.HealBatch)
	defer stop1()
	one := r.run
	b1 := r.waitBatch(1)
	r.waitAcked()
	r.waitStatus(b1, "in_progress")
	r.srv.SetEnqueuedTokenLimit(r.srv.Tokens(b1) * 3 / 2)
	// The second three go into one batch, by size, of the first process
	// (alone on the queue until then): started first, the second process
	// could take some of them and, its batch closing by time, send it
	// before either process had read the failure, which no process can
	// know of yet.
	second := []string{"ok-4", "ok-5", "ok-6"}
	r.submit(second...)
	b2 := r.waitBatch(2)
	stop2 := r.start(batch.HealBatch)
	defer stop2()
	two := r.run
	r.waitRecordEnded(b2)
	for _, run := range []*batch.Runner{one, two} {
		r.run = run
		r.waitPolls(5)
	}
	if n := r.srv.Creates(); n != 2 {
		for _, id := range r.srv.Batches() {
			t.Logf("%s %s %d requests", id, r.srv.Status(id), len(r.srv.Requests(id)))
		}
		t.Fatalf("%d batches created while the first is in flight, want 2: both processes hold", n)
	}
	r.srv.SetHold(false)
	r.srv.Release(b1)
	r.waitEnded(append(first, second...)...)
	stop1()
	stop2()
	r.allSucceeded(append(first, second...)...)
	for _, id := range r.srv.Batches()[2:] {
		if st := r.srv.Status(id); st != "completed" {
			t.Errorf("batch %s re-sent after the wait is %s, want completed", id, st)
		}
	}
	r.noCustomIDTwice()
}

// refusedKeyFor makes the rig's provider answer the requests refused
// returns true for with OpenAI's 401 for a refused key, and the others as
// usual.
func refusedKeyFor(refused func(body []byte) bool) func(*batchtest.Config) {
	return func(c *batchtest.Config) {
		var calls atomic.Int64
		inner := answer(&calls)
		c.Answer = http.HandlerFunc(func(w http.ResponseWriter, req *http.Request) {
			body, _ := io.ReadAll(req.Body)
			if refused(body) {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(http.StatusUnauthorized)
				_, _ = io.WriteString(w, `{"error":{"message":"Incorrect API key provided: sk-*****.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`)
				return
			}
			req.Body = io.NopCloser(bytes.NewReader(body))
			inner.ServeHTTP(w, req)
		})
	}
}
