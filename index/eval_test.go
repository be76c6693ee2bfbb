package index

import (
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/job"
)

// TestLatestRunsAndEvalsSurviveRebuild: LatestRuns answers each job's
// highest indexed run with its data (a dead letter without), skips ids
// with no run; a stored eval survives Reset (dlq rebuild) while the data
// goes with the outcomes, and deleting an outcome (retention, purge)
// deletes its data.
func TestLatestRunsAndEvalsSurviveRebuild(t *testing.T) {
	s := openTemp(t)
	ctx := t.Context()
	now := time.Now()
	ok := func(id string, run int, data string) job.Outcome {
		return job.Outcome{JobID: id, Run: run, Schema: "s", SchemaVersion: "v", Status: job.StatusSucceeded, Model: "m",
			Attempts: 1, Data: []byte(data), StartedAt: now, FinishedAt: now}
	}
	dead := ok("d", 0, "")
	dead.Status, dead.Class, dead.Data = job.StatusDeadLettered, job.ClassExhausted, nil
	if err := s.Write(ctx, []job.Outcome{ok("a", 0, `{"n":1}`), ok("b", 0, `{"n":2}`), dead}); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, []job.Outcome{ok("b", 1, `{"n":3}`)}); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	err := s.LatestRuns(ctx, []string{"a", "b", "d", "nobody"}, func(r LatestRun) error {
		got[r.JobID] = string(r.Data)
		if r.Dead != (r.JobID == "d") || r.NoData {
			t.Errorf("%s: %+v", r.JobID, r)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 3 || got["a"] != `{"n":1}` || got["b"] != `{"n":3}` || got["d"] != "" {
		t.Errorf("latest runs %v, want a's run 0, b's run 1, d without data", got)
	}
	if _, err := s.SaveEval(ctx, Eval{At: now, File: "f", Digest: "sha256:1", Groups: []EvalGroup{{Schema: "s", Version: "v", Model: "m", Records: 1,
		EvalCounts: EvalCounts{Correct: 1}, Fields: map[string]EvalCounts{"/n": {Correct: 1}}}}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Reset(ctx); err != nil {
		t.Fatal(err)
	}
	evals, err := s.Evals(ctx, "")
	if err != nil || len(evals) != 1 || evals[0].Groups[0].Fields["/n"].Correct != 1 {
		t.Fatalf("evals after Reset: %+v, %v", evals, err)
	}
	var n int
	if err := s.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM result_data`).Scan(&n); err != nil || n != 0 {
		t.Errorf("result_data after Reset: %d rows, %v", n, err)
	}
	// retention and purge delete outcomes; their data goes with them
	if err := s.Write(ctx, []job.Outcome{ok("c", 0, `{}`)}); err != nil {
		t.Fatal(err)
	}
	if _, err := s.w.ExecContext(ctx, `DELETE FROM outcomes`); err != nil {
		t.Fatal(err)
	}
	if err := s.r.QueryRowContext(ctx, `SELECT COUNT(*) FROM result_data`).Scan(&n); err != nil || n != 0 {
		t.Errorf("result_data after deleting the outcomes: %d rows, %v", n, err)
	}
}

// TestLatestRunsAfterAPurgedRerun: job p succeeded (run 0), a --rerun
// dead lettered (run 1), and the dead letter was purged; the index's
// highest run of p is run 0, marked replayed when run 1 was indexed.
// LatestRuns answers it as Superseded, without its data, so the eval does
// not score the older success; q, never rerun, keeps its data.
func TestLatestRunsAfterAPurgedRerun(t *testing.T) {
	s := openTemp(t)
	ctx := t.Context()
	now := time.Now()
	ok := func(id string) job.Outcome {
		return job.Outcome{JobID: id, Schema: "s", SchemaVersion: "v1", Status: job.StatusSucceeded, Model: "m",
			Attempts: 1, Data: []byte(`{"n":1}`), StartedAt: now, FinishedAt: now}
	}
	if err := s.Write(ctx, []job.Outcome{ok("p"), ok("q")}); err != nil {
		t.Fatal(err)
	}
	rerun := ok("p")
	rerun.Run, rerun.SchemaVersion, rerun.Status, rerun.Class, rerun.Data = 1, "v2", job.StatusDeadLettered, job.ClassExhausted, nil
	if err := s.Write(ctx, []job.Outcome{rerun}); err != nil {
		t.Fatal(err)
	}
	if ids, err := s.Purge(ctx, Filter{IDs: []string{"p"}}, false); err != nil || len(ids) != 1 {
		t.Fatalf("purge: %v, %v", ids, err)
	}
	got := map[string]LatestRun{}
	if err := s.LatestRuns(ctx, []string{"p", "q"}, func(r LatestRun) error {
		r.Data = append([]byte(nil), r.Data...)
		got[r.JobID] = r
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if p := got["p"]; !p.Superseded || p.Dead || len(p.Data) != 0 || p.NoData {
		t.Errorf("p: %+v, want superseded, no data", p)
	}
	if q := got["q"]; q.Superseded || string(q.Data) != `{"n":1}` {
		t.Errorf("q: %+v, want its data", q)
	}
}
