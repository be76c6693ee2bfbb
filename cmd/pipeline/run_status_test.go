package main

import (
	"context"
	"maps"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/batch"
	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/queue"
	"github.com/llmpipeline/pipeline/internal/sink"
	"github.com/llmpipeline/pipeline/job"
)

func TestStatusLine(t *testing.T) {
	cases := []struct {
		name string
		snap runSnapshot
		want string
	}{
		{"start", runSnapshot{Total: 60, Breaker: "closed"},
			"0/60 jobs  0.0/s  ETA ?  results 0  dead letters 0  in flight 0"},
		{"midway", runSnapshot{Elapsed: 10 * time.Second, Done: 20, Total: 60, Succeeded: 15, Dead: map[string]int{"schema": 2, "truncated": 3}, InFlight: 8, Breaker: "closed"},
			"20/60 jobs  2.0/s  ETA 20s  results 15  dead letters 5 (truncated 3, schema 2)  in flight 8"},
		{"breaker open", runSnapshot{Elapsed: time.Second, Done: 1, Total: 2, Succeeded: 1, InFlight: 0, Breaker: "open"},
			"1/2 jobs  1.0/s  ETA 1s  results 1  dead letters 0  in flight 0  breaker open"},
		{"done", runSnapshot{Elapsed: 2 * time.Second, Done: 4, Total: 4, Succeeded: 4},
			"4/4 jobs  2.0/s  ETA 0s  results 4  dead letters 0  in flight 0"},
		{"batches in flight", runSnapshot{Elapsed: 10 * time.Second, Done: 200, Total: 2020, Succeeded: 200, InFlight: 3, Breaker: "closed",
			Batches: &batchCounts{InFlight: map[string]int{"in_progress": 2, "finalizing": 1}, InBatches: 1800, Queued: 20}},
			"200/2020 jobs  20.0/s  ETA 1m31s  results 200  dead letters 0  in flight 3  batches in_progress 2, finalizing 1  requests 1800 in batches, 20 queued"},
		{"no batch in flight", runSnapshot{Elapsed: time.Second, Done: 2, Total: 2, Succeeded: 2, Batches: &batchCounts{InFlight: map[string]int{}}, Breaker: "open"},
			"2/2 jobs  2.0/s  ETA 0s  results 2  dead letters 0  in flight 0  batches 0 in flight  requests 0 in batches  breaker open"},
	}
	for _, tc := range cases {
		if got := statusLine(tc.snap); got != tc.want {
			t.Errorf("%s:\n got %q\nwant %q", tc.name, got, tc.want)
		}
	}
	s := runSnapshot{Elapsed: 2500 * time.Millisecond, Done: 10, Succeeded: 7, AlreadyDone: 1, Dead: map[string]int{"exhausted": 2}, Calls: 14, Tokens: 9000}
	if got, want := summaryLine(s), "run: 10 jobs in 2.5s: 7 succeeded, 2 dead-lettered (exhausted 2), 1 already done, 14 model calls, 9000 tokens"; got != want {
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
	s := newRunStatus(time.Now())
	o := job.Outcome{JobID: "a", Status: job.StatusSucceeded, Attempts: 2, Trace: []job.Attempt{{PromptTokens: 10, CompletionTokens: 5}, {PromptTokens: 10, CompletionTokens: 5}}}
	s.repeatedOutcome(sink.Msg{MsgID: "a", Record: &o})
	snap := s.snapshot(time.Now())
	got := summaryLine(snap)
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
	got := batchCountsOf(c)
	want := map[string]int{"submitting": 1, "validating": 1, "in_progress": 3, "collecting": 1}
	if !maps.Equal(got.InFlight, want) || got.InBatches != 900 || got.Queued != 4 {
		t.Errorf("batchCountsOf = %+v, want in flight %v, 900 in batches, 4 queued", got, want)
	}
	if n := (runSnapshot{Batches: got}).held(); n != 904 {
		t.Errorf("held %d, want 904 (in batches and queued)", n)
	}
}

// TestRunStatusInFlightCountsHandlers: in flight is the jobs inside the
// handler, what --concurrency bounds, not the consumer's unacked count
// (which holds the jobs fetched ahead too).
func TestRunStatusInFlightCountsHandlers(t *testing.T) {
	st := newRunStatus(time.Now())
	release := make(chan struct{})
	entered := make(chan struct{}, 3)
	h := st.handler(queue.HandlerFunc(func(ctx context.Context, d *queue.Delivery) queue.Outcome {
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
	if n := st.snapshot(time.Now()).InFlight; n != 3 {
		t.Errorf("in flight %d with 3 handlers running, want 3", n)
	}
	close(release)
	wg.Wait()
	if n := st.snapshot(time.Now()).InFlight; n != 0 {
		t.Errorf("in flight %d after the handlers returned, want 0", n)
	}
}

var summaryRe = regexp.MustCompile(`(?m)^run: (\d+) jobs in [^:]+: (\d+) succeeded, (\d+) dead-lettered( \([a-z_]+ \d+(, [a-z_]+ \d+)*\))?, (\d+) model calls, (\d+) tokens$`)

// TestRunEndsWithSummaryLine: without a terminal, no progress is drawn and
// `run --until-idle` ends with one summary line on stderr that agrees with
// the index.
func TestRunEndsWithSummaryLine(t *testing.T) {
	dir := t.TempDir()
	file, ids := jobsFile(t, 30)
	mustCLI(t, "", "submit", "--data-dir", dir, file)
	_, errs, code := runCLI(t, "", "run", "--data-dir", dir, "--until-idle", "--sim-latency", "0", "-c", "4")
	if code != 0 {
		t.Fatalf("run: exit %d: %s", code, errs)
	}
	m := summaryRe.FindAllStringSubmatch(errs, -1)
	if len(m) != 1 {
		t.Fatalf("want one summary line on stderr, got %d:\n%s", len(m), errs)
	}
	n := func(i int) int { v, _ := strconv.Atoi(m[0][i]); return v }
	if n(1) != len(ids) || n(2)+n(3) != len(ids) || n(6) < len(ids) || n(7) == 0 {
		t.Errorf("summary %q: want %d jobs = succeeded + dead-lettered, at least one model call each, tokens", m[0][0], len(ids))
	}
	stats := jsonLines(t, mustCLI(t, "", "stats", "--data-dir", dir, "--json"))[0]
	if int(stats["succeeded"].(float64)) != n(2) || int(stats["dead_lettered"].(float64)) != n(3) {
		t.Errorf("summary %q disagrees with stats %v", m[0][0], stats)
	}
	if strings.ContainsAny(errs, "\r\x1b") || strings.Contains(errs, "jobs  ") {
		t.Errorf("progress drawn without a terminal:\n%q", errs)
	}
}

// TestRunProgressOnATerminal: on a terminal, the progress bar shows the
// status line, then the summary follows.
func TestRunProgressOnATerminal(t *testing.T) {
	dir := t.TempDir()
	file, _ := jobsFile(t, 12)
	mustCLI(t, "", "submit", "--data-dir", dir, file)
	var out, errs syncBuffer
	app := newAppEnv(&env{stdin: strings.NewReader(""), stdout: &out, stderr: &errs,
		terminal: func(s any) bool { return s == any(&errs) }})
	err := app.RunContext(t.Context(), []string{"pipeline", "run", "--data-dir", dir, "--until-idle", "--sim-latency", "0", "-c", "2"})
	if err != nil {
		t.Fatal(err)
	}
	got := errs.String()
	if !regexp.MustCompile(`\d+/\d+ jobs  [0-9.]+/s  ETA \S+  results \d+  dead letters \d+.*  in flight \d`).MatchString(got) || !strings.Contains(got, "\r") {
		t.Errorf("no progress bar with the status line on the terminal:\n%q", got)
	}
	if !summaryRe.MatchString(got) {
		t.Errorf("no summary line after the progress bar:\n%q", got)
	}
}

// TestRunStoppedSaysWhatItHandedBack: a run stopped while jobs are in
// flight (as by SIGINT: its context is cancelled) hands them back and
// says how many.
func TestRunStoppedSaysWhatItHandedBack(t *testing.T) {
	dir := t.TempDir()
	file, ids := jobsFile(t, 20)
	mustCLI(t, "", "submit", "--data-dir", dir, file)
	// This connection runs the embedded server; the run joins it, so it
	// outlives the run for the checks below.
	conn, err := broker.Connect(t.Context(), broker.Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out, errs syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- mainContext(ctx, []string{"pipeline", "run", "--data-dir", dir, "--sim-latency", "10m", "-c", "2", "--shutdown-grace", "100ms"},
			strings.NewReader(""), &out, &errs)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		p, err := queue.Pending(t.Context(), conn)
		if err == nil && p.AckPending >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no job in flight after 30s (%+v, %v); stderr:\n%s", p, err, errs.String())
		}
		time.Sleep(20 * time.Millisecond) // polling the consumer, not waiting for an event
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("stopped run: exit %d\n%s", code, errs.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("run did not stop within 60s")
	}
	m := regexp.MustCompile(`(?m)^stopped: (\d+) jobs handed back$`).FindStringSubmatch(errs.String())
	if m == nil {
		t.Fatalf("no 'stopped: N jobs handed back' line:\n%s", errs.String())
	}
	p, err := queue.Pending(t.Context(), conn)
	if err != nil {
		t.Fatal(err)
	}
	handed, _ := strconv.Atoi(m[1])
	t.Logf("%s (consumer after the stop: %+v)", m[0], p)
	if handed < 2 || p.Results+p.DeadLetters != 0 || p.Jobs != uint64(len(ids)) {
		t.Errorf("handed back %d (want at least the 2 in flight); after the stop %+v: want all %d jobs back, no outcome", handed, p, len(ids))
	}
	if !summaryRe.MatchString(errs.String()) {
		t.Errorf("no summary line after the stop:\n%s", errs.String())
	}
}
