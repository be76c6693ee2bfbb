// Package queuetest holds what the tests of the packages beside and above
// the queue (broker's external tests, ledger, sink) share to put jobs on
// JOBS and run workers over them the way `pipeline run` does: job items,
// a submit that fails the test, worker settings that keep tests quick, the
// result a test handler stores, and a read of a whole stream.
package queuetest

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/queue"
	"github.com/llmpipeline/pipeline/internal/sink"
)

// JobItem is a valid job of schema with the message id id.
func JobItem(id, schema string) queue.SubmitItem {
	return queue.SubmitItem{
		Data:   fmt.Appendf(nil, `{"id":%q,"schema":%q,"input":"text for %s"}`, id, schema, id),
		Schema: schema,
		MsgID:  id,
	}
}

// JobItems is n jobs of schema, with ids prefix-0000, prefix-0001, ...
func JobItems(prefix, schema string, n int) []queue.SubmitItem {
	items := make([]queue.SubmitItem, n)
	for i := range items {
		items[i] = JobItem(fmt.Sprintf("%s-%04d", prefix, i), schema)
	}
	return items
}

// Submit publishes items, failing the test on an error.
func Submit(t testing.TB, c *broker.Conn, items []queue.SubmitItem) queue.SubmitStats {
	t.Helper()
	st, err := queue.Submit(context.Background(), c, items, nil)
	if err != nil {
		t.Fatalf("Submit: %v", err)
	}
	return st
}

// FastWorkers fills in a short fetch wait and shutdown grace, so a test's
// workers notice idleness and stop within a fraction of a second.
func FastWorkers(cfg queue.WorkerConfig) queue.WorkerConfig {
	if cfg.FetchWait == 0 {
		cfg.FetchWait = 100 * time.Millisecond
	}
	if cfg.ShutdownGrace == 0 {
		cfg.ShutdownGrace = 5 * time.Second
	}
	return cfg
}

// ResultFor is what the test handlers store: the job id and its delivery.
func ResultFor(d *queue.Delivery) []byte {
	return fmt.Appendf(nil, `{"job_id":%q,"delivery":%d,"orphan":%v}`, d.MsgID, d.NumDelivered, d.Orphan)
}

// ReadAll reads every message of a stream (matching filter, "" for all).
func ReadAll(t testing.TB, c *broker.Conn, stream, filter string) []sink.Msg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []sink.Msg
	if err := sink.ReadStream(ctx, c, stream, filter, func(m sink.Msg) error {
		out = append(out, m)
		return nil
	}); err != nil {
		t.Fatalf("ReadStream(%s, %q): %v", stream, filter, err)
	}
	return out
}

// Counter counts handler calls per message id; safe for the workers'
// goroutines.
type Counter struct {
	mu sync.Mutex
	n  map[string]int
}

// Add counts a call for id and returns the count.
func (c *Counter) Add(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[id]++
	return c.n[id]
}

// Get is the count for id.
func (c *Counter) Get(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[id]
}
