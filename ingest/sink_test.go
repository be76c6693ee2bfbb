package ingest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"
)

// publishOutcomes stores n results and m dead letters directly.
func publishOutcomes(t *testing.T, c *Conn, results, dead int) []string {
	t.Helper()
	var ids []string
	for i := range results + dead {
		id := fmt.Sprintf("out-%04d", i)
		subj := SubjectResults + ".invoice"
		if i >= results {
			subj = SubjectDLQ + ".invoice"
		}
		if _, err := c.JetStream().PublishMsg(t.Context(), newMsg(subj, id, []byte(`{"job_id":"`+id+`"}`))); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

func TestRunSinkAcksOnlyAfterWrite(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		results   int
		dead      int
		failFirst int // write calls that fail before the store works
		batch     int
	}{
		{name: "all written", results: 30, dead: 7, batch: 10},
		{name: "write fails once then redelivered", results: 20, dead: 5, failFirst: 1, batch: 500},
		{name: "empty", batch: 10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newConn(t)
			ids := publishOutcomes(t, c, tc.results, tc.dead)
			var mu sync.Mutex
			stored := map[string]int{}
			calls, failed, maxBatch := 0, 0, 0
			var inWrite bool
			write := func(ctx context.Context, batch []SinkMsg) error {
				mu.Lock()
				defer mu.Unlock()
				if inWrite {
					t.Error("write called concurrently")
				}
				calls++
				maxBatch = max(maxBatch, len(batch))
				if failed < tc.failFirst {
					failed++
					return errors.New("database is locked")
				}
				for _, m := range batch {
					if m.MsgID == "" || m.Sequence == 0 || m.Stream == "" {
						t.Errorf("sink message without id or position: %+v", m)
					}
					stored[m.MsgID]++
				}
				return nil
			}
			err := c.RunSink(t.Context(), SinkConfig{Batch: tc.batch, MaxWait: 20 * time.Millisecond, UntilIdle: true}, write)
			if err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			var got []string
			for id, n := range stored {
				got = append(got, id)
				if n != 1 {
					t.Errorf("%s stored %d times", id, n)
				}
			}
			slices.Sort(got)
			if !slices.Equal(got, ids) {
				t.Errorf("stored %v\nwant %v", got, ids)
			}
			if maxBatch > tc.batch {
				t.Errorf("batch of %d, above %d", maxBatch, tc.batch)
			}
			if failed != tc.failFirst {
				t.Errorf("%d failed writes, want %d", failed, tc.failFirst)
			}
			if err := c.SinkIdle(t.Context()); err != nil {
				t.Errorf("SinkIdle after RunSink: %v", err)
			}
		})
	}
}

func TestRunSinkWithWorkersAndSinkIdle(t *testing.T) {
	t.Parallel()
	c := newConn(t)
	items := jobItems("e2e", "invoice", 50)
	submit(t, c, items)
	var mu sync.Mutex
	var stored []string
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	sinkDone := make(chan error, 1)
	go func() {
		sinkDone <- c.RunSink(ctx, SinkConfig{MaxWait: 10 * time.Millisecond}, func(ctx context.Context, b []SinkMsg) error {
			mu.Lock()
			defer mu.Unlock()
			for _, m := range b {
				stored = append(stored, m.MsgID)
			}
			return nil
		})
	}()
	h := HandlerFunc(func(ctx context.Context, d *Delivery) Outcome {
		if d.Job.ID < "e2e-0010" {
			return Outcome{Action: ActionDeadLetter, Payload: resultFor(d)}
		}
		return Outcome{Action: ActionResult, Payload: resultFor(d)}
	})
	if err := c.RunWorkers(t.Context(), fastWorkers(WorkerConfig{UntilIdle: true, Concurrency: 8}), h); err != nil {
		t.Fatal(err)
	}
	if err := c.SinkIdle(t.Context()); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-sinkDone; err != nil {
		t.Fatalf("RunSink: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	slices.Sort(stored)
	if want := msgIDs(toSink(items)); !slices.Equal(stored, want) {
		t.Errorf("sink stored %d ids, want %d: %v", len(stored), len(want), stored)
	}
}

func TestReadStreamFilters(t *testing.T) {
	t.Parallel()
	c := newConn(t)
	publishOutcomes(t, c, 5, 3)
	if _, err := c.JetStream().PublishMsg(t.Context(), newMsg(SubjectResults+".person", "p-1", []byte("{}"))); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		stream, filter string
		want           int
	}{
		{StreamResults, "", 6},
		{StreamResults, SubjectResults + ".invoice", 5},
		{StreamResults, SubjectResults + ".person", 1},
		{StreamResults, SubjectResults + ".nothing", 0},
		{StreamDLQ, "", 3},
		{StreamJobs, "", 0},
	}
	for _, tc := range cases {
		t.Run(tc.stream+" "+tc.filter, func(t *testing.T) {
			got := readAll(t, c, tc.stream, tc.filter)
			if len(got) != tc.want {
				t.Errorf("read %d messages, want %d", len(got), tc.want)
			}
			for i := 1; i < len(got); i++ {
				if got[i].Sequence <= got[i-1].Sequence {
					t.Errorf("out of order: %d after %d", got[i].Sequence, got[i-1].Sequence)
				}
			}
		})
	}
	stop := errors.New("enough")
	err := c.ReadStream(t.Context(), StreamResults, "", func(SinkMsg) error { return stop })
	if !errors.Is(err, stop) {
		t.Errorf("ReadStream returned %v, want fn's error", err)
	}
}
