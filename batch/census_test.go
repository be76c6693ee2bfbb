package batch_test

import (
	"fmt"
	"maps"
	"sync"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/batch"
	"github.com/llmpipeline/pipeline/internal/poll"
)

// events gathers what Config.Observe sees.
type events struct {
	mu       sync.Mutex
	outcomes map[string]int
	states   map[string]int // "state/status"
	noProv   int            // events without a provider
}

func (e *events) observe(ev batch.Event) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if ev.Provider == "" {
		e.noProv++
	}
	if ev.Outcome != "" {
		e.outcomes[ev.Outcome]++
	}
	if ev.Batch != "" {
		e.states[ev.State+"/"+ev.Status]++
	}
}

func (e *events) snapshot() (map[string]int, map[string]int, int) {
	e.mu.Lock()
	defer e.mu.Unlock()
	return maps.Clone(e.outcomes), maps.Clone(e.states), e.noProv
}

// TestBatchObserveAndCensus: every request's outcome reaches Observe with
// the provider, and once every job ended the census counts every batch
// the provider created as ended and completed, no request in a batch or
// queued.
func TestBatchObserveAndCensus(t *testing.T) {
	t.Parallel()
	r := newRig(t, false)
	ev := &events{outcomes: map[string]int{}, states: map[string]int{}}
	r.observe = ev.observe
	ids := []string{"ok-1", "ok-2", "heal-1", "fail-1"}
	r.submit(ids...)
	stop := r.start(batch.HealBatch)
	defer stop()
	r.waitEnded(ids...)
	// The last outcome is observed after it is stored, and every batch
	// gets settled after its last job ended: wait for the outcomes and for
	// the census to have every batch. When the time runs out, the
	// assertions below say what is missing.
	var c batch.Census
	if err := poll.Wait(t, 20*time.Second, func() error {
		c = r.run.Census()
		if o, _, _ := ev.snapshot(); o[batch.OutcomeResult]+o[batch.OutcomeDeadLetter] != len(ids) {
			return fmt.Errorf("outcomes observed %v", o)
		}
		if ended := c.Batches[batch.Kind{Provider: "openai", State: batch.StateEnded, Status: "completed"}]; ended != r.srv.Creates() || ended == 0 {
			return fmt.Errorf("census %+v, %d batches created", c, r.srv.Creates())
		}
		return nil
	}); err != nil {
		t.Logf("after 20s: %v", err)
	}
	stop()
	outcomes, states, noProv := ev.snapshot()
	// ok-1, ok-2: results; heal-1: a heal turn, then a result; fail-1: a
	// 500, one retry (TransportRetries 1), then a dead letter.
	want := map[string]int{batch.OutcomeResult: 3, batch.OutcomeHeal: 1, batch.OutcomeRetry: 1, batch.OutcomeDeadLetter: 1}
	if !maps.Equal(outcomes, want) {
		t.Errorf("outcomes observed %v, want %v", outcomes, want)
	}
	if noProv != 0 {
		t.Errorf("%d events without the provider", noProv)
	}
	n := r.srv.Creates()
	for _, s := range []string{batch.StateSubmitting + "/", batch.StateSubmitted + "/validating", batch.StateCollecting + "/completed", batch.StateEnded + "/completed"} {
		if states[s] != n {
			t.Errorf("%d events %q, want one per batch (%d): %v", states[s], s, n, states)
		}
	}
	if len(c.Batches) != 1 || c.InBatches != 0 || c.Queued != 0 || c.At.IsZero() {
		t.Errorf("census after the run %+v, want %d batches ended and completed, nothing in batches or queued", c, n)
	}
}

// TestBatchCensusInFlight: a batch the provider holds counts in flight
// with its provider status and its requests, in the census of the process
// that made it and of another one that only polls the bucket.
func TestBatchCensusInFlight(t *testing.T) {
	t.Parallel()
	r := newRig(t, true)
	r.size, r.wait = 3, 10*time.Second // one batch, however slow the machine
	ids := []string{"ok-1", "ok-2", "ok-3"}
	r.submit(ids...)
	stop := r.start(batch.HealBatch)
	defer stop()
	id := r.waitBatch(1)
	first := r.run
	r.waitAcked()
	// Another runner on the same bucket: it sees the batch at its first
	// poll.
	stop2 := r.start(batch.HealBatch)
	defer stop2()
	second := r.run
	inFlight := func(c batch.Census) bool {
		return c.Batches[batch.Kind{Provider: "openai", State: batch.StateSubmitted, Status: "in_progress"}] == 1 && c.InBatches == 3
	}
	poll.UntilOK(t, 20*time.Second, "the census of the batch held in progress", func() error {
		if c1, c2 := first.Census(), second.Census(); !inFlight(c1) || !inFlight(c2) {
			return fmt.Errorf("first %+v, second %+v; want it submitted, in_progress, with 3 requests", c1, c2)
		}
		return nil
	})
	r.srv.SetHold(false)
	r.srv.Release(id)
	r.waitEnded(ids...)
	poll.UntilOK(t, 20*time.Second, "the census after the batch ended", func() error {
		if c := second.Census(); c.Batches[batch.Kind{Provider: "openai", State: batch.StateEnded, Status: "completed"}] != 1 || c.InBatches != 0 {
			return fmt.Errorf("census %+v", c)
		}
		return nil
	})
}

// TestBatchRecordsKeptForADay: a settled batch's record stays in the bucket
// (listed, counted) while it is recent, and the first poll a day after it
// ended deletes it, so the bucket every poll reads does not grow with the
// history.
func TestBatchRecordsKeptForADay(t *testing.T) {
	t.Parallel()
	r := newRig(t, false)
	ids := []string{"ok-1", "ok-2"}
	r.submit(ids...)
	stop := r.start(batch.HealBatch)
	r.waitEnded(ids...)
	ended := batch.Kind{Provider: "openai", State: batch.StateEnded, Status: "completed"}
	poll.UntilOK(t, 20*time.Second, "the census after the batch ended", func() error {
		if c := r.run.Census(); c.Batches[ended] != 1 {
			return fmt.Errorf("census %+v", c)
		}
		return nil
	})
	stop()
	ctx := t.Context()
	// An hour later the record is still there.
	r.now = func() time.Time { return time.Now().Add(time.Hour) }
	r.start(batch.HealBatch)()
	if err := r.run.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	recs, err := batch.Records(ctx, r.kv)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != 1 || recs[0].State != batch.StateEnded || r.run.Census().Batches[ended] != 1 {
		t.Fatalf("an hour after the batch ended: records %+v, census %+v; want the ended record kept and counted", recs, r.run.Census())
	}
	// A day and an hour later the poll deletes it.
	r.now = func() time.Time { return time.Now().Add(25 * time.Hour) }
	r.start(batch.HealBatch)()
	if err := r.run.Tick(ctx); err != nil {
		t.Fatal(err)
	}
	if recs, err = batch.Records(ctx, r.kv); err != nil {
		t.Fatal(err)
	}
	if len(recs) != 0 || r.run.Census().Batches[ended] != 0 {
		t.Fatalf("a day after the batch ended: records %+v, census %+v; want none", recs, r.run.Census())
	}
}
