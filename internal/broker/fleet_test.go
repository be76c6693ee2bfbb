package broker

import (
	"context"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/internal/poll"
)

// Members of one limit key count each other; one that leaves is gone at
// the others' next count, one that dies (stops its heartbeat without
// deleting its key) is gone once its key's TTL runs out; another limit
// key is another fleet.
func TestFleetMembersComeAndGo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a := newConn(t, func(c *Config) { c.DataDir = dir })
	b := newConn(t, func(c *Config) { c.DataDir = dir })
	ctx := t.Context()

	fa, err := a.JoinFleet(ctx, "limitA")
	if err != nil {
		t.Fatal(err)
	}
	defer fa.Leave(context.Background())
	if n := fa.Size(); n != 1 {
		t.Fatalf("alone: size %d, want 1", n)
	}
	fb, err := b.JoinFleet(ctx, "limitA")
	if err != nil {
		t.Fatal(err)
	}
	if n := fb.Size(); n != 2 {
		t.Fatalf("second member's first count: %d, want 2", n)
	}
	other, err := b.JoinFleet(ctx, "limitB")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Leave(context.Background())
	if n := other.Size(); n != 1 {
		t.Fatalf("another limit key: size %d, want 1", n)
	}
	poll.Until(t, 10*time.Second, "the first member to count two", func() bool { return fa.Size() == 2 })

	// Leaving deletes the key: the other member counts one at its next beat.
	if err := fb.Leave(ctx); err != nil {
		t.Fatal(err)
	}
	if err := fb.Leave(ctx); err != nil {
		t.Fatalf("second Leave: %v", err)
	}
	poll.Until(t, 10*time.Second, "the left member's share to return", func() bool { return fa.Size() == 1 })

	// A member whose process dies: its heartbeat stops, its key stays
	// until the bucket's TTL removes it.
	dctx, die := context.WithCancel(ctx)
	fc, err := b.JoinFleet(dctx, "limitA")
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, "the new member to be counted", func() bool { return fa.Size() == 2 })
	die()
	<-fc.done
	start := time.Now()
	poll.Until(t, 10*time.Second, "the dead member's share to return", func() bool { return fa.Size() == 1 })
	t.Logf("dead member's share returned after %s (TTL %s)", time.Since(start).Round(100*time.Millisecond), FleetTTL)
}

func TestFleetRejectsBadKey(t *testing.T) {
	t.Parallel()
	c := newConn(t)
	for _, k := range []string{"", "a.b", "a*", "a>", "a b"} {
		if _, err := c.JoinFleet(t.Context(), k); err == nil {
			t.Errorf("JoinFleet(%q): no error", k)
		}
	}
}

// A pause one member asks for reaches the others of its limit key (and
// a member joining while it lasts), not another limit key's; it does not
// count as a member, and it outlives the bucket's TTL while it lasts.
func TestFleetSharesPauses(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	a := newConn(t, func(c *Config) { c.DataDir = dir })
	b := newConn(t, func(c *Config) { c.DataDir = dir })
	ctx := t.Context()
	fa, err := a.JoinFleet(ctx, "pauseA")
	if err != nil {
		t.Fatal(err)
	}
	defer fa.Leave(context.Background())
	fb, err := b.JoinFleet(ctx, "pauseA")
	if err != nil {
		t.Fatal(err)
	}
	defer fb.Leave(context.Background())
	other, err := b.JoinFleet(ctx, "pauseB")
	if err != nil {
		t.Fatal(err)
	}
	defer other.Leave(context.Background())
	if !fb.PausedUntil().IsZero() {
		t.Fatalf("paused until %v before any pause", fb.PausedUntil())
	}

	until := time.Now().Add(FleetTTL + 3*FleetHeartbeat).Truncate(time.Millisecond)
	fa.Pause(until)
	fa.Pause(until.Add(-time.Second)) // an earlier end changes nothing
	poll.Until(t, 5*time.Second, "the other member to see the pause", func() bool { return fb.PausedUntil().Equal(until) })
	if !fa.PausedUntil().Equal(until) {
		t.Errorf("the pausing member's own pause ends %v, want %v", fa.PausedUntil(), until)
	}
	// Past the bucket's TTL the pause is still there for a newcomer.
	time.Sleep(FleetTTL + FleetHeartbeat) // the TTL under test, not a synchronisation
	late, err := a.JoinFleet(ctx, "pauseA")
	if err != nil {
		t.Fatal(err)
	}
	defer late.Leave(context.Background())
	poll.Until(t, 5*time.Second, "a member joining during the pause to see it", func() bool { return late.PausedUntil().Equal(until) })
	if !other.PausedUntil().IsZero() {
		t.Errorf("another limit key is paused until %v, want no pause", other.PausedUntil())
	}
	// The pause key is no member: three members, counted as three.
	poll.Until(t, 5*time.Second, "three members counted", func() bool { return fb.Size() == 3 })
}
