// Package brokertest holds the fixture the tests of the broker's users
// share: an embedded nats-server in a fresh data dir per test (random
// port, JetStream on, file storage under t.TempDir), closed by t.Cleanup.
//
//	conn := brokertest.NewConn(t)
//	queue.Submit(t.Context(), conn, items, nil)
package brokertest

import (
	"context"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/internal/broker"
	"go.uber.org/goleak"
)

// NewConn starts an embedded server in a fresh data dir, with mods applied
// to its Config, and closes it when the test ends.
func NewConn(t testing.TB, mods ...func(*broker.Config)) *broker.Conn {
	t.Helper()
	cfg := broker.Config{DataDir: t.TempDir()}
	for _, m := range mods {
		m(&cfg)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := broker.Connect(ctx, cfg)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	t.Cleanup(func() {
		if err := c.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return c
}

// VerifyTestMain runs a package's tests and fails them when goroutines
// outlive them, apart from nats-server's process-wide ones (its goroutine
// starter and its logger's init) that outlive any one server.
func VerifyTestMain(m *testing.M) {
	goleak.VerifyTestMain(m,
		goleak.IgnoreTopFunction("github.com/nats-io/nats-server/v2/server.(*Server).startGoRoutine.func1"),
		goleak.IgnoreAnyFunction("github.com/nats-io/nats-server/v2/server.init.0.func1"),
	)
}
