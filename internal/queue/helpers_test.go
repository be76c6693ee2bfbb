package queue

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/brokertest"
	"github.com/llmpipeline/pipeline/internal/sink"
)

func TestMain(m *testing.M) { brokertest.VerifyTestMain(m) }

// newConn starts an embedded server in a fresh data dir.
func newConn(t testing.TB, mods ...func(*broker.Config)) *broker.Conn {
	t.Helper()
	return brokertest.NewConn(t, mods...)
}

func jobItem(id, schema string) SubmitItem {
	return SubmitItem{
		Data:   fmt.Appendf(nil, `{"id":%q,"schema":%q,"input":"text for %s"}`, id, schema, id),
		Schema: schema,
		MsgID:  id,
	}
}

func jobItems(prefix, schema string, n int) []SubmitItem {
	items := make([]SubmitItem, n)
	for i := range items {
		items[i] = jobItem(fmt.Sprintf("%s-%04d", prefix, i), schema)
	}
	return items
}

func submit(t testing.TB, c *broker.Conn, items []SubmitItem) SubmitStats {
	t.Helper()
	st, err := Submit(context.Background(), c, items, nil)
	if err != nil {
		t.Fatalf("Submit: %v", err)
	}
	return st
}

// readAll reads every message of a stream.
func readAll(t testing.TB, c *broker.Conn, stream, filter string) []sink.Msg {
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

func msgIDs(msgs []sink.Msg) []string {
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.MsgID
	}
	sort.Strings(ids)
	return ids
}

// runWorkers runs RunWorkers in the background and returns a func that
// waits for its error.
func runWorkers(ctx context.Context, c *broker.Conn, cfg WorkerConfig, h Handler) func() error {
	errc := make(chan error, 1)
	go func() { errc <- RunWorkers(ctx, c, cfg, h) }()
	var once sync.Once
	var err error
	return func() error {
		once.Do(func() {
			select {
			case err = <-errc:
			case <-time.After(30 * time.Second):
				err = fmt.Errorf("RunWorkers did not return within 30s")
			}
		})
		return err
	}
}

// counter counts handler calls per msg id.
type counter struct {
	mu sync.Mutex
	n  map[string]int
}

func (c *counter) add(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.n == nil {
		c.n = map[string]int{}
	}
	c.n[id]++
	return c.n[id]
}

func (c *counter) get(id string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.n[id]
}

func (c *counter) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.n)
}

func fastWorkers(cfg WorkerConfig) WorkerConfig {
	if cfg.FetchWait == 0 {
		cfg.FetchWait = 100 * time.Millisecond
	}
	if cfg.ShutdownGrace == 0 {
		cfg.ShutdownGrace = 5 * time.Second
	}
	return cfg
}
