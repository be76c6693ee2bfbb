package app

import (
	"context"
	"maps"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/batch"
	"github.com/llmpipeline/pipeline/internal/queue"
	"github.com/llmpipeline/pipeline/internal/sink"
	"github.com/llmpipeline/pipeline/job"
)

func TestStatusLine(t *testing.T) {
	cases := []struct {
		name string
		snap Snapshot
		want string
	}{
		{"start", Snapshot{Total: 60, Breaker: "closed"},
			"0/60 jobs  0.0/s  ETA ?  results 0  dead letters 0  in flight 0"},
		{"midway", Snapshot{Elapsed: 10 * time.Second, Done: 20, Total: 60, Succeeded: 15, Dead: map[string]int{"schema": 2, "truncated": 3}, InFlight: 8, Breaker: "closed"},
			"20/60 jobs  2.0/s  ETA 20s  results 15  dead letters 5 (truncated 3, schema 2)  in flight 8"},
		{"breaker open", Snapshot{Elapsed: time.Second, Done: 1, Total: 2, Succeeded: 1, InFlight: 0, Breaker: "open"},
			"1/2 jobs  1.0/s  ETA 1s  results 1  dead letters 0  in flight 0  breaker open"},
		{"done", Snapshot{Elapsed: 2 * time.Second, Done: 4, Total: 4, Succeeded: 4},
			"4/4 jobs  2.0/s  ETA 0s  results 4  dead letters 0  in flight 0"},
		{"batches in flight", Snapshot{Elapsed: 10 * time.Second, Done: 200, Total: 2020, Succeeded: 200, InFlight: 3, Breaker: "closed",
			Batches: &BatchCounts{InFlight: map[string]int{"in_progress": 2, "finalizing": 1}, InBatches: 1800, Queued: 20}},
			"200/2020 jobs  20.0/s  ETA 1m31s  results 200  dead letters 0  in flight 3  batches in_progress 2, finalizing 1  requests 1800 in batches, 20 queued"},
		{"no batch in flight", Snapshot{Elapsed: time.Second, Done: 2, Total: 2, Succeeded: 2, Batches: &BatchCounts{InFlight: map[string]int{}}, Breaker: "open"},
			"2/2 jobs  2.0/s  ETA 0s  results 2  dead letters 0  in flight 0  batches 0 in flight  requests 0 in batches  breaker open"},
	}
	for _, tc := range cases {
		if got := StatusLine(tc.snap); got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
	s := Snapshot{Elapsed: 2500 * time.Millisecond, Done: 10, Succeeded: 7, AlreadyDone: 1, Dead: map[string]int{"exhausted": 2}, Calls: 14, Tokens: 9000}
	if got, want := SummaryLine(s), "run: 10 jobs in 2.5s: 7 succeeded, 2 dead-lettered (exhausted 2), 1 already done, 14 model calls, 9000 tokens"; got != want {
		t.Errorf("summary:\n got %q\nwant %q", got, want)
	}
}

// TestBatchCountsOf: the status line counts the batches in flight only, a
// batch the provider has by the provider's word, the others by the
// record's state; ended and abandoned batches are left out.
// TestSummaryCountsRepeatedAnswers: jobs answered whose run's outcome was
// stored already count as jobs, and their model calls as calls, instead of
// a summary of "0 jobs ... 0 model calls" after 2 calls.
func TestSummaryCountsRepeatedAnswers(t *testing.T) {
	s := NewStatus(time.Now())
	o := job.Outcome{JobID: "a", Status: job.StatusSucceeded, Attempts: 2, Trace: []job.Attempt{{PromptTokens: 10, CompletionTokens: 5}, {PromptTokens: 10, CompletionTokens: 5}}}
	s.Repeated(sink.Msg{MsgID: "a", Record: &o})
	snap := s.Snapshot(time.Now())
	got := SummaryLine(snap)
	for _, want := range []string{"run: 1 jobs in", "0 succeeded", "1 answered again", "2 model calls, 30 tokens"} {
		if !strings.Contains(got, want) {
			t.Errorf("summary %q lacks %q", got, want)
		}
	}
}

func TestBatchCountsOf(t *testing.T) {
	c := batch.Census{Batches: map[batch.Kind]int{
		{Provider: "openai", State: batch.StateSubmitting}:                          1,
		{Provider: "openai", State: batch.StateSubmitted, Status: "validating"}:     1,
		{Provider: "openai", State: batch.StateSubmitted, Status: "in_progress"}:    2,
		{Provider: "anthropic", State: batch.StateSubmitted, Status: "in_progress"}: 1,
		{Provider: "openai", State: batch.StateCollecting, Status: "completed"}:     1,
		{Provider: "openai", State: batch.StateEnded, Status: "completed"}:          7,
		{Provider: "openai", State: batch.StateAbandoned}:                           1,
	}, InBatches: 900, Queued: 4}
	got := BatchCountsOf(c)
	want := map[string]int{"submitting": 1, "validating": 1, "in_progress": 3, "collecting": 1}
	if !maps.Equal(got.InFlight, want) || got.InBatches != 900 || got.Queued != 4 {
		t.Errorf("BatchCountsOf = %+v, want in flight %v, 900 in batches, 4 queued", got, want)
	}
	if n := (Snapshot{Batches: got}).held(); n != 904 {
		t.Errorf("held %d, want 904 (in batches and queued)", n)
	}
}

// TestRunStatusInFlightCountsHandlers: in flight is the jobs inside the
// handler, what --concurrency bounds, not the consumer's unacked count
// (which holds the jobs fetched ahead too).
func TestRunStatusInFlightCountsHandlers(t *testing.T) {
	st := NewStatus(time.Now())
	release := make(chan struct{})
	entered := make(chan struct{}, 3)
	h := st.Handler(queue.HandlerFunc(func(ctx context.Context, d *queue.Delivery) queue.Outcome {
		entered <- struct{}{}
		<-release
		return queue.Outcome{}
	}))
	var wg sync.WaitGroup
	for range 3 {
		wg.Go(func() { h.Handle(t.Context(), &queue.Delivery{}) })
	}
	for range 3 {
		<-entered
	}
	if n := st.Snapshot(time.Now()).InFlight; n != 3 {
		t.Errorf("in flight %d with 3 handlers running, want 3", n)
	}
	close(release)
	wg.Wait()
	if n := st.Snapshot(time.Now()).InFlight; n != 0 {
		t.Errorf("in flight %d after the handlers returned, want 0", n)
	}
}
