package broker

import (
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/internal/poll"
)

// TestFleetAcrossATakeover: the fleet's bucket lives in the embedded
// server's memory, so a process that took the server over finds none: a
// member that joined before (as a run does during its start-up, its
// bucket made on the old server, its first write on the new one) makes it
// again and keeps beating, and the next joins work.
func TestFleetAcrossATakeover(t *testing.T) {
	dir := t.TempDir()
	owner, err := Connect(t.Context(), Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer owner.Close()
	a := newConn(t, func(c *Config) { c.DataDir = dir })
	before, err := a.JoinFleet(t.Context(), "sim")
	if err != nil {
		t.Fatal(err)
	}
	defer before.Leave(t.Context())
	if err := owner.Close(); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 30*time.Second, "the joiner to take the server over", func() bool { return a.Embedded() && a.NATS().IsConnected() })
	// The bucket lived in the old server's memory: the heartbeat of a
	// member that joined before makes it again.
	if err := before.beat(t.Context()); err != nil {
		t.Errorf("a member's heartbeat on the server that took over: %v", err)
	}
	f, err := a.JoinFleet(t.Context(), "other")
	if err != nil {
		t.Fatalf("joining the fleet after the takeover: %v", err)
	}
	defer f.Leave(t.Context())
	poll.Until(t, 10*time.Second, "the member counted on the new server", func() bool { return before.Size() == 1 })
}
