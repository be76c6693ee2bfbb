package faults

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/poll"
	"github.com/llmpipeline/pipeline/llm/batchtest"
)

// batchRunArgs are the arguments of a `pipeline run --batch` against the
// batch test server s.
func batchRunArgs(s *batchtest.Server, extra ...string) []string {
	return append([]string{"run", "--model", "openai:fault-model", "--llm-url", s.URL + "/v1", "--batch",
		"--batch-wait", "200ms", "--batch-poll", "100ms", "--ack-wait", ackWait, "--concurrency", "16", "--log-level", logLevel()}, extra...)
}

// kill -9 of a `run --batch` after its batches were created and its jobs
// acked (handed off), before the provider completes them; a new
// `run --batch --until-idle` resumes polling the batches on JetStream,
// the provider then completes them, and the new process reads the
// answers. Every job ends once and no custom_id is submitted twice.
func scenarioBatchKill9(t *testing.T) row {
	dir := t.TempDir()
	prov := newProvider(t, 0)
	srv := batchtest.New(batchtest.Config{Answer: prov.srv.Config.Handler, Hold: true, Key: testKey})
	t.Cleanup(srv.Close)
	jobs := exampleJobs(t, 60, "invoice", "ticket")
	env := childEnv("OPENAI_API_KEY=" + testKey)
	submitFile(t, env, writeJobs(t, dir, jobs), "--data-dir", dir)

	run1 := pipeline(t, "run-1", env, batchRunArgs(srv, "--data-dir", dir)...)
	nc, js := connectJS(t, embeddedURL(t, run1, dir))
	poll.Until(t, 60*time.Second, "every job in a held batch and acked", func() bool {
		if run1.exited() {
			t.Fatalf("run-1 exited %d; stderr:\n%s", run1.code, tail(run1.stderr.String(), 40))
		}
		if len(srv.Submitted()) < len(jobs) {
			return false
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		cons, err := js.Consumer(ctx, broker.StreamJobs, broker.WorkerConsumer)
		if err != nil {
			return false
		}
		info := cons.CachedInfo()
		return info.NumPending == 0 && info.NumAckPending == 0
	})
	batches := srv.Batches()
	for _, id := range batches {
		if st := srv.Status(id); st != "validating" && st != "in_progress" {
			t.Fatalf("batch %s is %q before the kill, want it held in progress", id, st)
		}
	}
	run1.kill9(t)
	nc.Close()
	calls, _, _, _ := prov.stats() // the provider's answers so far: none, every batch is held

	run2 := pipeline(t, "run-2", env, batchRunArgs(srv, "--data-dir", dir, "--until-idle")...)
	embeddedURL(t, run2, dir) // run-2 is up before the batches complete
	for _, id := range batches {
		srv.Release(id)
	}
	run2.mustSucceed(t)

	a := auditEmbedded(t, dir)
	r := a.check(t, "", ids(jobs))
	sub := srv.Submitted()
	seen := map[string]bool{}
	for _, id := range sub {
		if seen[id] {
			t.Errorf("custom_id %s submitted twice", id)
		}
		seen[id] = true
	}
	if len(sub) != len(jobs) {
		t.Errorf("%d custom_ids submitted for %d jobs, want one each (every answer valid at once)", len(sub), len(jobs))
	}
	if !slices.Equal(srv.Batches(), batches) {
		t.Errorf("batches after the restart %v, want only the %v created before the kill", srv.Batches(), batches)
	}
	for _, id := range batches {
		if st := srv.Status(id); st != "completed" {
			t.Errorf("batch %s is %q, want completed", id, st)
		}
	}
	if calls != 0 {
		t.Errorf("the provider answered %d requests before the kill, want 0 (batches held)", calls)
	}
	if len(a.results) != len(jobs) {
		t.Errorf("%d results after the restart, want %d: run-2 did not read every answer", len(a.results), len(jobs))
	}
	r.Note = fmt.Sprintf("killed with %d jobs in %d held batches, all acked; restart --until-idle read them; %d custom_ids, none twice",
		len(jobs), len(batches), len(sub)) + stranded(run2)
	return r
}
