package broker_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/poll"
	"github.com/llmpipeline/pipeline/internal/queue"
	"github.com/llmpipeline/pipeline/internal/queuetest"
)

func TestConnectJoinsRunningServer(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	first := newConn(t, func(c *broker.Config) { c.DataDir = dir })
	second := newConn(t, func(c *broker.Config) { c.DataDir = dir })

	if second.URL() != first.URL() {
		t.Errorf("second broker.Connect uses %s, first runs %s", second.URL(), first.URL())
	}
	if !first.Embedded() || second.Embedded() {
		t.Errorf("Embedded() = %v, %v; want true, false", first.Embedded(), second.Embedded())
	}
	b, err := os.ReadFile(filepath.Join(dir, broker.ServerInfoFile))
	if err != nil {
		t.Fatal(err)
	}
	var info broker.ServerInfo
	if err := json.Unmarshal(b, &info); err != nil {
		t.Fatal(err)
	}
	if info.URL != first.URL() || info.PID != os.Getpid() {
		t.Errorf("%s = %+v; want url %s pid %d", broker.ServerInfoFile, info, first.URL(), os.Getpid())
	}
	// Work submitted through one is seen by the other: one server.
	queuetest.Submit(t, second, queuetest.JobItems("join", "invoice", 3))
	p, err := queue.Pending(t.Context(), first)
	if err != nil {
		t.Fatal(err)
	}
	if p.Jobs != 3 {
		t.Errorf("first sees %d jobs, want 3", p.Jobs)
	}
}

// A joiner takes the server over when its owner closes: it runs the
// server on the same port and store, the jobs are there, and another
// joiner reconnects to it on its own.
func TestEmbeddedJoinerTakesOver(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := t.Context()
	owner, err := broker.Connect(ctx, broker.Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	a := newConn(t, func(c *broker.Config) { c.DataDir = dir })
	b := newConn(t, func(c *broker.Config) { c.DataDir = dir })
	queuetest.Submit(t, a, queuetest.JobItems("takeover", "invoice", 5))
	if err := owner.Close(); err != nil {
		t.Fatal(err)
	}

	poll.Until(t, 30*time.Second, "a joiner to take the server over", func() bool { return a.Embedded() || b.Embedded() })
	if a.Embedded() && b.Embedded() {
		t.Fatal("both joiners run a server")
	}
	for name, c := range map[string]*broker.Conn{"a": a, "b": b} {
		if c.URL() != owner.URL() {
			t.Errorf("%s at %s, the server was at %s", name, c.URL(), owner.URL())
		}
		var p queue.PendingInfo
		poll.Until(t, 30*time.Second, name+" to see the jobs again", func() bool {
			var err error
			p, err = queue.Pending(ctx, c)
			return err == nil
		})
		if p.Jobs != 5 {
			t.Errorf("%s sees %d jobs after the takeover, want 5", name, p.Jobs)
		}
		if c.Err() != nil {
			t.Errorf("%s lost: %v", name, c.Err())
		}
	}
	queuetest.Submit(t, b, queuetest.JobItems("after", "invoice", 2))
	p, err := queue.Pending(ctx, a)
	if err != nil || p.Jobs != 7 {
		t.Errorf("after the takeover a sees %d jobs (%v), want 7", p.Jobs, err)
	}
}
