package index

import (
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/job"
)

// TestJobCounts: a replayed dead letter keeps its job counted (awaiting its
// run) until the new run lands; its class leaves the latest-run counts.
func TestJobCounts(t *testing.T) {
	s := openTemp(t)
	ctx := t.Context()
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	outs := []job.Outcome{outcome("a", true, 2, t0, diag("/total", "type", `"1"`)), outcome("b", true, 2, t0.Add(time.Second)), outcome("c", false, 1, t0.Add(2*time.Second))}
	if err := s.Write(ctx, outs); err != nil {
		t.Fatal(err)
	}
	check := func(when string, jobs, awaiting, replayedDead int) {
		t.Helper()
		c, err := s.Analytics().JobCounts(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if c.Jobs != jobs || c.AwaitingReplay != awaiting || c.ReplayedDead["exhausted"] != replayedDead {
			t.Errorf("%s: %+v; want %d jobs, %d awaiting, %d replayed dead", when, c, jobs, awaiting, replayedDead)
		}
	}
	check("before the replay", 3, 0, 0)
	if err := s.MarkReplayed(ctx, "a", 0); err != nil {
		t.Fatal(err)
	}
	check("after the replay", 3, 1, 1)
	again := outcome("a", false, 1, t0.Add(time.Minute))
	again.Run = 1
	if err := s.Write(ctx, []job.Outcome{again}); err != nil {
		t.Fatal(err)
	}
	check("after the replay's run", 3, 0, 1)
}

// TestListOffset: List's pages skip Offset rows, newest first.
func TestListOffset(t *testing.T) {
	s := openTemp(t)
	t0 := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)
	var outs []job.Outcome
	for i, id := range []string{"d1", "d2", "d3", "d4", "d5"} {
		outs = append(outs, outcome(id, true, 1, t0.Add(time.Duration(i)*time.Second)))
	}
	if err := s.Write(t.Context(), outs); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		offset, limit int
		want          []string
	}{{0, 2, []string{"d5", "d4"}}, {2, 2, []string{"d3", "d2"}}, {4, 2, []string{"d1"}}, {5, 2, nil}, {3, 0, []string{"d2", "d1"}}} {
		es, err := s.List(t.Context(), Filter{Offset: tc.offset, Limit: tc.limit})
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, e := range es {
			got = append(got, e.JobID)
		}
		if len(got) != len(tc.want) || len(got) > 0 && got[0] != tc.want[0] || len(got) > 0 && got[len(got)-1] != tc.want[len(tc.want)-1] {
			t.Errorf("offset %d limit %d: %v, want %v", tc.offset, tc.limit, got, tc.want)
		}
	}
}
