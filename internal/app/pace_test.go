package app

import (
	"context"
	"errors"
	"testing"
	"time"
)

// fakeClock is a clock that moves only when told to or when slept on.
type fakeClock struct {
	t      time.Time
	slept  []time.Duration
	cancel error // returned by sleep when set
}

func (c *fakeClock) now() time.Time { return c.t }

func (c *fakeClock) sleep(_ context.Context, d time.Duration) error {
	if c.cancel != nil {
		return c.cancel
	}
	c.slept = append(c.slept, d)
	c.t = c.t.Add(d)
	return nil
}

func testPace(budget int, window time.Duration, clock *fakeClock, onWait func()) *dedupePace {
	p := newDedupePace(budget, window, onWait)
	p.now, p.sleep = clock.now, clock.sleep
	return p
}

// TestPaceWaitsForTheOldestToBeForgotten: a batch that does not fit waits
// until the oldest batch's window (and the slack) has passed, and no longer.
func TestPaceWaitsForTheOldestToBeForgotten(t *testing.T) {
	clock := &fakeClock{t: time.Unix(1_000, 0)}
	waits := 0
	p := testPace(10, time.Minute, clock, func() { waits++ })
	ctx := context.Background()
	for range 2 {
		if err := p.wait(ctx, 4); err != nil {
			t.Fatal(err)
		}
		p.stored(4)
		clock.t = clock.t.Add(10 * time.Second)
	}
	if len(clock.slept) != 0 {
		t.Fatalf("8 of 10 ids held: waited %v before they were over the budget", clock.slept)
	}
	if err := p.wait(ctx, 4); err != nil {
		t.Fatal(err)
	}
	// The first batch was stored 20 s ago: it is forgotten 40 s from now.
	if want := []time.Duration{40*time.Second + paceSlack}; len(clock.slept) != 1 || clock.slept[0] != want[0] {
		t.Fatalf("waited %v, want %v", clock.slept, want)
	}
	if p.held != 4 || waits != 1 {
		t.Fatalf("after the wait %d ids held (want the second batch's 4), onWait called %d times (want 1)", p.held, waits)
	}
	p.stored(4)
	if err := p.wait(ctx, 4); err != nil {
		t.Fatal(err)
	}
	if waits != 1 {
		t.Fatalf("onWait called %d times, want once", waits)
	}
}

// TestPaceKeepsEveryWindowUnderTheBudget publishes 100 batches of
// irregular sizes as fast as the pace lets them and checks every window of
// the record: no window holds more ids than the budget, and the pace never
// waited when the ids in the last window left room.
func TestPaceKeepsEveryWindowUnderTheBudget(t *testing.T) {
	const budget, window = 1_000, 10 * time.Second
	clock := &fakeClock{t: time.Unix(1_000, 0)}
	p := testPace(budget, window, clock, nil)
	type stored struct {
		at time.Time
		n  int
	}
	var log []stored
	within := func(at time.Time, span time.Duration) int { // ids stored in the span ending at
		n := 0
		for _, s := range log {
			if !s.at.After(at) && at.Sub(s.at) < span {
				n += s.n
			}
		}
		return n
	}
	for i := range 100 {
		n := 50 + (i*37)%300
		before, start := len(clock.slept), clock.t
		if err := p.wait(context.Background(), n); err != nil {
			t.Fatal(err)
		}
		if len(clock.slept) > before && within(start, window+paceSlack)+n <= budget {
			// The pace counts an id until a window and the slack have passed.
			t.Fatalf("batch %d of %d ids waited %v with room for it", i, n, clock.slept[before:])
		}
		if len(clock.slept) == before && within(start, window+paceSlack)+n > budget {
			t.Fatalf("batch %d of %d ids did not wait, with %d ids stored within the window", i, n, within(start, window+paceSlack))
		}
		log = append(log, stored{clock.t, n})
		p.stored(n)
		if got := within(clock.t, window); got > budget {
			t.Fatalf("after batch %d, %d ids stored within %v, over the budget %d", i, got, window, budget)
		}
		clock.t = clock.t.Add(300 * time.Millisecond) // the next batch's publish
	}
	if len(clock.slept) == 0 {
		t.Fatal("about 20,000 ids at 1,000 per 10 s never waited")
	}
}

// TestPaceStopsWithItsContext: a wait ends with the context's error.
func TestPaceStopsWithItsContext(t *testing.T) {
	stop := errors.New("interrupted")
	clock := &fakeClock{t: time.Unix(1_000, 0), cancel: stop}
	p := testPace(10, time.Minute, clock, nil)
	p.stored(10)
	if err := p.wait(context.Background(), 1); !errors.Is(err, stop) {
		t.Fatalf("wait = %v, want the context's error", err)
	}
}
