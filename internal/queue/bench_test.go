package queue

import (
	"bytes"
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/ledger"
	"github.com/nats-io/nats.go/jetstream"
)

const benchConcurrency = 256

// benchJobs are n jobs of about 1 KB.
func benchJobs(n int) []SubmitItem {
	input := bytes.Repeat([]byte("x"), 950)
	items := make([]SubmitItem, n)
	for i := range items {
		id := fmt.Sprintf("b-%08d", i)
		items[i] = SubmitItem{
			Data:   fmt.Appendf(nil, `{"id":%q,"schema":"invoice","input":%q}`, id, input),
			Schema: "invoice",
			MsgID:  id,
		}
	}
	return items
}

// BenchmarkRuntime: submit b.N 1 KB jobs, then RunWorkers with a no-op
// handler that returns a 1 KB result: consume, publish result (async, acked
// on confirmation), ack.
func BenchmarkRuntime(b *testing.B) {
	c := newConn(b)
	items := benchJobs(b.N)
	result := bytes.Repeat([]byte("r"), 1024)
	ctx, cancel := context.WithCancel(b.Context())
	defer cancel()
	var done atomic.Int64
	h := HandlerFunc(func(ctx context.Context, d *Delivery) Outcome {
		if done.Add(1) == int64(b.N) {
			defer cancel()
		}
		return Outcome{Action: ActionResult, Schema: d.SchemaToken, Payload: result}
	})
	b.ReportAllocs()
	b.ResetTimer()
	if _, err := Submit(ctx, c, items, nil); err != nil {
		b.Fatal(err)
	}
	if err := RunWorkers(ctx, c, WorkerConfig{Concurrency: benchConcurrency}, h); err != nil {
		b.Fatal(err)
	}
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
	if n := done.Load(); n < int64(b.N) {
		b.Fatalf("handled %d of %d", n, b.N)
	}
}

// BenchmarkRawJetStream is the broker's limit for the same work: async
// publish b.N 1 KB jobs into the work-queue stream, consume them with
// explicit ack, publish a 1 KB result asynchronously and ack the job on the
// result's confirmation, at most benchConcurrency in flight.
func BenchmarkRawJetStream(b *testing.B) {
	c := newConn(b)
	items := benchJobs(b.N)
	result := bytes.Repeat([]byte("r"), 1024)
	ctx := b.Context()
	cons, err := c.JetStream().CreateOrUpdateConsumer(ctx, broker.StreamJobs, jetstream.ConsumerConfig{
		Durable: "raw", AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: 4 * benchConcurrency,
	})
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for _, it := range items {
		if _, err := c.PublishAsync(ctx, broker.NewMsg(broker.SubjectJobs+"."+it.Schema, it.MsgID, it.Data)); err != nil {
			b.Fatal(err)
		}
	}
	<-c.JetStream().PublishAsyncComplete()

	sem := make(chan struct{}, benchConcurrency)
	var wg sync.WaitGroup
	var done atomic.Int64
	finished := make(chan struct{})
	cc, err := cons.Consume(func(m jetstream.Msg) {
		sem <- struct{}{}
		fut, err := c.PublishAsync(ctx, broker.NewMsg(broker.SubjectResults+".invoice", m.Headers().Get(jetstream.MsgIDHeader), result))
		if err != nil {
			b.Error(err)
			return
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			select {
			case <-fut.Ok():
			case err := <-fut.Err():
				b.Error(err)
			}
			_ = m.Ack()
			if done.Add(1) == int64(b.N) {
				close(finished)
			}
		}()
	}, jetstream.PullMaxMessages(benchConcurrency))
	if err != nil {
		b.Fatal(err)
	}
	<-finished
	cc.Stop()
	wg.Wait()
	b.StopTimer()
	b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "jobs/s")
}

// BenchmarkSubmit measures the embedded server's async publish rate of
// 1 KB jobs with the default sync interval and with SyncAlways.
func BenchmarkSubmit(b *testing.B) {
	for _, always := range []bool{false, true} {
		b.Run(fmt.Sprintf("sync_always=%v", always), func(b *testing.B) {
			c := newConn(b, func(cfg *broker.Config) { cfg.SyncAlways = always })
			items := benchJobs(b.N)
			b.ReportAllocs()
			b.ResetTimer()
			if _, err := Submit(b.Context(), c, items, nil); err != nil {
				b.Fatal(err)
			}
			b.StopTimer()
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

// BenchmarkSubmitLedgerCheck is submit's ledger check per line of a file
// that ran before: every line done, every line changed (its input edited;
// each needs its job's last run too), every line rerun.
func BenchmarkSubmitLedgerCheck(b *testing.B) {
	const n = 2000
	c := newConn(b)
	ctx := b.Context()
	for i := range n {
		id := fmt.Sprintf("j-%d", i)
		if _, err := ledger.New(c).Record(ctx, id, ledger.Run{Run: 0, MsgID: id, Stream: broker.StreamResults, Seq: uint64(i + 1), Input: "a"}); err != nil {
			b.Fatal(err)
		}
	}
	for _, tc := range []struct {
		name  string
		input string
		rerun bool
	}{{"done", "a", false}, {"changed", "b", false}, {"rerun", "a", true}} {
		items := make([]SubmitItem, n)
		for i := range items {
			id := fmt.Sprintf("j-%d", i)
			items[i] = SubmitItem{Data: []byte(`{}`), Schema: "invoice", MsgID: id, JobID: id, Input: tc.input, Rerun: tc.rerun}
		}
		b.Run(tc.name, func(b *testing.B) {
			for b.Loop() {
				var s SubmitStats
				kept, err := filterEnded(ctx, ledger.New(c), items, &s)
				if err != nil {
					b.Fatal(err)
				}
				if s.AlreadyDone+s.Changed+len(kept) != n {
					b.Fatalf("%+v, %d kept: want %d lines accounted for", s, len(kept), n)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*n), "µs/line")
		})
	}
}
