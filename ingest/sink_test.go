package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/dlq"
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

// sinkOutcome is a RESULTS message as a worker encodes it: a first-pass
// success of about 1.5 KB (trace with the raw output, data, job).
func sinkOutcome(tb testing.TB, i int) []byte {
	tb.Helper()
	id := fmt.Sprintf("s-%08d", i)
	at := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Millisecond)
	o := dlq.Outcome{
		JobID: id, Schema: "invoice", SchemaVersion: "3f9a", Status: dlq.StatusSucceeded, Model: "canned", Attempts: 1,
		Trace: []dlq.Attempt{{N: 1, Temperature: 0.7, FinishReason: "stop", PromptTokens: 420, CompletionTokens: 130, LatencyMS: 1,
			Raw: `{"invoice_number":"INV-1","vendor":"ACME \"Tools\"","total":1250.5,"currency":"EUR","lines":[{"sku":"A-1","qty":2,"price":125.25},{"sku":"B-2","qty":1,"price":1000}]}` + strings.Repeat(" ", 200)}},
		Deliveries: 1, StartedAt: at, FinishedAt: at.Add(time.Millisecond),
	}
	b, err := json.Marshal(o)
	if err != nil {
		tb.Fatal(err)
	}
	b = append(b[:len(b)-1], `,"data":{"invoice_number":"INV-1","vendor":"ACME \"Tools\"","total":1250.5,"currency":"EUR","lines":[{"sku":"A-1","qty":2,"price":125.25},{"sku":"B-2","qty":1,"price":1000}]}`...)
	return fmt.Appendf(b, `,"job":{"id":%q,"schema":"invoice","input":%q}}`, id, strings.Repeat("Invoice INV-1 from ACME. ", 24))
}

// BenchmarkSink runs the sink as `pipeline run` does, from a real RESULTS
// stream into a real SQLite file: consume, decode, write, ack. "consume"
// writes nothing (the sink loop's and the broker's share); "sqlite" decodes
// and writes with dlq. cpu-µs/outcome is the process's CPU time (the
// embedded server's included) per outcome, the figure to compare.
func BenchmarkSink(b *testing.B) {
	for _, bc := range []struct {
		name  string
		store bool
	}{{"consume", false}, {"sqlite", true}} {
		b.Run(bc.name, func(b *testing.B) {
			c := newConn(b)
			for i := range b.N {
				if _, err := c.publishAsync(b.Context(), newMsg(SubjectResults+".invoice", fmt.Sprintf("s-%08d", i), sinkOutcome(b, i))); err != nil {
					b.Fatal(err)
				}
			}
			select {
			case <-c.js.PublishAsyncComplete():
			case <-b.Context().Done():
				b.Fatal(b.Context().Err())
			}
			st, err := dlq.Open(filepath.Join(b.TempDir(), "pipeline.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			n := 0
			write := func(ctx context.Context, batch []SinkMsg) error {
				n += len(batch)
				if !bc.store {
					return nil
				}
				outs := make([]dlq.Outcome, 0, len(batch))
				for _, m := range batch {
					o, err := dlq.DecodeOutcome(m.Data)
					if err != nil {
						return err
					}
					outs = append(outs, o)
				}
				return st.Write(ctx, outs)
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime(b)
			if err := c.RunSink(b.Context(), SinkConfig{UntilIdle: true, MaxWait: 20 * time.Millisecond}, write); err != nil {
				b.Fatal(err)
			}
			cpu := cpuTime(b) - cpu0
			b.StopTimer()
			if n < b.N {
				b.Fatalf("sink wrote %d of %d", n, b.N)
			}
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/outcome")
		})
	}
}

// cpuTime is the CPU time (user + system) this process used so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
