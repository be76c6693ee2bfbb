package sink_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/brokertest"
	"github.com/llmpipeline/pipeline/internal/queue"
	"github.com/llmpipeline/pipeline/internal/sink"
)

func TestSinkWithWorkersAndIdle(t *testing.T) {
	t.Parallel()
	c := newConn(t)
	items := jobItems("e2e", "invoice", 50)
	submit(t, c, items)
	idx := sink.NewMemIndex(t)
	s := sink.New(c, idx, sink.Config{MaxWait: 10 * time.Millisecond, GapGrace: time.Minute})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	sinkDone := make(chan error, 1)
	go func() { sinkDone <- s.Run(ctx) }()
	h := queue.HandlerFunc(func(ctx context.Context, d *queue.Delivery) queue.Outcome {
		if d.Job.ID < "e2e-0010" {
			return queue.Outcome{Action: queue.ActionDeadLetter, Payload: resultFor(d), Record: d.Job.ID}
		}
		return queue.Outcome{Action: queue.ActionResult, Payload: resultFor(d), Record: d.Job.ID}
	})
	cfg := fastWorkers(queue.WorkerConfig{UntilIdle: true, Concurrency: 8})
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

func jobItems(prefix, schema string, n int) []queue.SubmitItem {
	items := make([]queue.SubmitItem, n)
	for i := range items {
		id := fmt.Sprintf("%s-%04d", prefix, i)
		items[i] = queue.SubmitItem{
			Data:   fmt.Appendf(nil, `{"id":%q,"schema":%q,"input":"text for %s"}`, id, schema, id),
			Schema: schema,
			MsgID:  id,
		}
	}
	return items
}

func submit(t testing.TB, c *broker.Conn, items []queue.SubmitItem) {
	t.Helper()
	if _, err := queue.Submit(context.Background(), c, items, nil); err != nil {
		t.Fatalf("Submit: %v", err)
	}
}

func fastWorkers(cfg queue.WorkerConfig) queue.WorkerConfig {
	if cfg.FetchWait == 0 {
		cfg.FetchWait = 100 * time.Millisecond
	}
	if cfg.ShutdownGrace == 0 {
		cfg.ShutdownGrace = 5 * time.Second
	}
	return cfg
}

// resultFor is what the test handlers store: the job id and its delivery.
func resultFor(d *queue.Delivery) []byte {
	return fmt.Appendf(nil, `{"job_id":%q,"delivery":%d,"orphan":%v}`, d.MsgID, d.NumDelivered, d.Orphan)
}

func toSink(items []queue.SubmitItem) []sink.Msg {
	out := make([]sink.Msg, len(items))
	for i, it := range items {
		out[i] = sink.Msg{MsgID: it.MsgID}
	}
	return out
}
