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
