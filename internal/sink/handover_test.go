package sink_test

import (
	"context"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/brokertest"
	"github.com/llmpipeline/pipeline/internal/queue"
	"github.com/llmpipeline/pipeline/internal/queuetest"
	"github.com/llmpipeline/pipeline/internal/sink"
)

func TestSinkWithWorkersAndIdle(t *testing.T) {
	t.Parallel()
	c := newConn(t)
	items := queuetest.JobItems("e2e", "invoice", 50)
	queuetest.Submit(t, c, items)
	idx := sink.NewMemIndex(t)
	s := sink.New(c, idx, sink.Config{MaxWait: 10 * time.Millisecond, GapGrace: time.Minute})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	sinkDone := make(chan error, 1)
	go func() { sinkDone <- s.Run(ctx) }()
	h := queue.HandlerFunc(func(ctx context.Context, d *queue.Delivery) queue.Outcome {
		if d.Job.ID < "e2e-0010" {
			return queue.Outcome{Action: queue.ActionDeadLetter, Payload: queuetest.ResultFor(d), Record: d.Job.ID}
		}
		return queue.Outcome{Action: queue.ActionResult, Payload: queuetest.ResultFor(d), Record: d.Job.ID}
	})
	cfg := queuetest.FastWorkers(queue.WorkerConfig{UntilIdle: true, Concurrency: 8})
	cfg.Stored = func(m sink.Msg) {
		if !s.Offer(m) {
			t.Errorf("offer of %s refused", m.MsgID)
		}
	}
	if err := queue.RunWorkers(t.Context(), c, cfg, h); err != nil {
		t.Fatal(err)
	}
	// Every outcome was handed over: with a minute of grace, Idle returns
	// only because none had to be read back.
	if err := s.Idle(t.Context()); err != nil {
		t.Fatal(err)
	}
	cancel()
	if err := <-sinkDone; err != nil {
		t.Fatalf("Run: %v", err)
	}
	idx.Check(t, sink.MsgIDs(toSink(items)))
	for id := range idx.Stored() {
		if !idx.Offered()[id] {
			t.Errorf("%s read back from the stream, not handed over", id)
		}
	}
}

func newConn(t testing.TB) *broker.Conn {
	t.Helper()
	return brokertest.NewConn(t)
}

func toSink(items []queue.SubmitItem) []sink.Msg {
	out := make([]sink.Msg, len(items))
	for i, it := range items {
		out[i] = sink.Msg{MsgID: it.MsgID}
	}
	return out
}
