package main

import (
	"bytes"
	"strings"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/internal/poll"
	"github.com/llmpipeline/pipeline/llm/batchtest"
)

// batchArgs are the arguments of a `run --batch --until-idle` of the jobs
// in dir against srv.
func batchArgs(srv *batchtest.Server, dir string) []string {
	return []string{"run", "--data-dir", dir, "--until-idle", "--model", "openai:gpt-4o-mini", "--llm-url", srv.URL + "/v1",
		"--max-attempts", "2", "--concurrency", "4", "--max-deliver", "2",
		"--batch", "--batch-wait", "50ms", "--batch-poll", "50ms"}
}

// TestBatchRunStopsOnAuthFailure: with --batch, a key the provider refuses
// on the upload, or revoked while batches are in flight (a 401 while
// polling), stops the run as in sync mode: exit 4 within seconds, the
// key's variable named, nothing dead-lettered; the next run with a good
// key ends every job. Before: dead-lettered every job as abandoned and
// exited 0 (upload), or logged the 401 every poll forever (polling).
func TestBatchRunStopsOnAuthFailure(t *testing.T) {
	t.Run("upload", func(t *testing.T) {
		t.Setenv("OPENAI_API_KEY", "sk-wrong-key-456")
		srv := batchtest.New(batchtest.Config{Answer: ticketAnswers(), Key: "sk-test"})
		t.Cleanup(srv.Close)
		dir := t.TempDir()
		ids := ticketJobs(t, dir, "up", 6)
		start := time.Now()
		_, errs, code := runCLI(t, "", batchArgs(srv, dir)...)
		t.Logf("stopped in %v: %s", time.Since(start), errs[strings.LastIndex(strings.TrimSpace(errs), "\n")+1:])
		if code != exitAuth {
			t.Fatalf("exit %d, want %d\n%s", code, exitAuth, errs)
		}
		for _, want := range []string{"openai", "auth", "HTTP 401", "OPENAI_API_KEY"} {
			if !strings.Contains(errs, want) {
				t.Errorf("stderr lacks %q:\n%s", want, errs)
			}
		}
		if strings.Contains(errs, "sk-wrong-key-456") {
			t.Error("the API key reached stderr")
		}
		if n := srv.Unauthorized(); n > 4 {
			t.Errorf("%d calls refused for the key, want a few: the run stops at the first", n)
		}
		if srv.Creates() != 0 {
			t.Errorf("%d batches created with a refused key", srv.Creates())
		}
		if dead := jsonLines(t, mustCLI(t, "", "dlq", "list", "--data-dir", dir, "--json")); len(dead) != 0 {
			t.Fatalf("%d jobs dead-lettered for a refused key, want 0: %v", len(dead), dead)
		}
		t.Setenv("OPENAI_API_KEY", "sk-test")
		mustCLI(t, "", batchArgs(srv, dir)...)
		if st := statsJSON(t, dir); st["jobs"].(float64) != float64(len(ids)) {
			t.Errorf("the run with the right key stored %v jobs, want %d", st["jobs"], len(ids))
		}
	})
	t.Run("poll", func(t *testing.T) {
		t.Setenv("OPENAI_API_KEY", "sk-test")
		srv := batchtest.New(batchtest.Config{Answer: ticketAnswers(), Key: "sk-test", Hold: true})
		t.Cleanup(srv.Close)
		dir := t.TempDir()
		ids := ticketJobs(t, dir, "poll", 4)
		type exit struct {
			errs string
			code int
		}
		done := make(chan exit, 1)
		go func() {
			_, errs, code := runCLI(t, "", batchArgs(srv, dir)...)
			done <- exit{errs, code}
		}()
		poll.Until(t, 30*time.Second, "a batch in progress", func() bool {
			b := srv.Batches()
			return len(b) > 0 && srv.Status(b[0]) == "in_progress"
		})
		b := srv.Batches()[0]
		srv.SetKey("sk-revoked") // the key is revoked while the batch is in flight
		var got exit
		select {
		case got = <-done:
		case <-time.After(30 * time.Second):
			t.Fatalf("the run did not stop on a 401 while polling (%d 401s so far)", srv.Unauthorized())
		}
		if got.code != exitAuth || !strings.Contains(got.errs, "OPENAI_API_KEY") {
			t.Fatalf("exit %d, want %d naming OPENAI_API_KEY\n%s", got.code, exitAuth, got.errs)
		}
		if n := srv.Unauthorized(); n > 4 {
			t.Errorf("%d polls refused, want the run stopped at the first", n)
		}
		if dead := jsonLines(t, mustCLI(t, "", "dlq", "list", "--data-dir", dir, "--json")); len(dead) != 0 {
			t.Fatalf("%d jobs dead-lettered for a revoked key, want 0", len(dead))
		}
		// A new key: the next run reads the batch still in flight.
		srv.SetKey("sk-test")
		srv.SetHold(false)
		srv.Release(b)
		mustCLI(t, "", batchArgs(srv, dir)...)
		if st := statsJSON(t, dir); st["jobs"].(float64) != float64(len(ids)) {
			t.Errorf("the next run stored %v jobs, want %d", st["jobs"], len(ids))
		}
	})
}

// TestBatchesShowsWhyABatchFailed: a batch OpenAI failed for a validation
// error ends the job it names as a request_error dead letter carrying the
// provider's message, and `pipeline batches` shows the reason. Before:
// the batch was re-sent as if expired and the message was lost.
func TestBatchesShowsWhyABatchFailed(t *testing.T) {
	t.Parallel()
	wantTestKeys(t)
	srv := batchtest.New(batchtest.Config{Answer: ticketAnswers(), Key: "sk-test", Refuse: func(body []byte) *batchtest.ErrorData {
		if bytes.Contains(body, []byte("JOB=bad-00")) {
			return &batchtest.ErrorData{Code: "invalid_value", Message: "Invalid value for 'messages[1].content'.", Param: "body.messages[1].content"}
		}
		return nil
	}})
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	ticketJobs(t, dir, "bad", 1)
	ticketJobs(t, dir, "ok", 2)
	mustCLI(t, "", batchArgs(srv, dir)...)
	dead := jsonLines(t, mustCLI(t, "", "dlq", "list", "--data-dir", dir, "--json"))
	var refused map[string]any
	for _, d := range dead {
		if d["job_id"] == "bad-00" {
			refused = d
		}
	}
	if refused == nil || refused["class"] != "request_error" || !strings.Contains(refused["reason"].(string), "invalid_value: Invalid value for 'messages[1].content'.") {
		t.Fatalf("bad-00: %v, want a request_error dead letter with the provider's message", refused)
	}
	out := mustCLI(t, "", "batches", "--data-dir", dir)
	if !strings.Contains(out, "REASON") || !strings.Contains(out, "failed") || !strings.Contains(out, "invalid_value: Invalid value for 'messages[1].content'.") {
		t.Errorf("pipeline batches does not show why the batch failed:\n%s", out)
	}
	t.Logf("pipeline batches:\n%s", out)
}
