package main

import (
	"context"
	"encoding/json"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/ingest"
)

// TestStatsRightAfterSubmit: before any run, stats says how many jobs are
// queued (exit 0), not "no pipeline data"; --json has the counts at zero
// and "queued".
func TestStatsRightAfterSubmit(t *testing.T) {
	dir := t.TempDir()
	file, _ := jobsFile(t, 5)
	mustCLI(t, "", "submit", "--data-dir", dir, file)
	out, errs, code := runCLI(t, "", "stats", "--data-dir", dir)
	if code != 0 || out != "5 jobs queued, no outcomes yet ('pipeline run' processes them)\n" {
		t.Errorf("stats after submit: exit %d, stdout %q, stderr %q", code, out, errs)
	}
	var s struct {
		Jobs   *int `json:"jobs"`
		Queued int  `json:"queued"`
	}
	if err := json.Unmarshal([]byte(mustCLI(t, "", "stats", "--data-dir", dir, "--json")), &s); err != nil || s.Jobs == nil || *s.Jobs != 0 || s.Queued != 5 {
		t.Errorf("stats --json after submit: %+v, %v; want jobs 0, queued 5", s, err)
	}
	mustCLI(t, "", "run", "--data-dir", dir, "--until-idle", "--sim-latency", "0")
	if out := mustCLI(t, "", "stats", "--data-dir", dir); !strings.HasPrefix(out, "jobs ") || strings.Contains(out, "queued") {
		t.Errorf("stats after the run:\n%s", out)
	}
}

// TestStoppedRunLeavesNoProgressBehind: a run stopped on a terminal (as by
// SIGINT: its context is cancelled) ends its progress line before it says
// what it handed back, and nothing redraws the bar over that notice or the
// summary afterwards (the bar's spinner goroutine used to outlive the run).
func TestStoppedRunLeavesNoProgressBehind(t *testing.T) {
	dir := t.TempDir()
	file, _ := jobsFile(t, 6)
	mustCLI(t, "", "submit", "--data-dir", dir, file)
	conn, err := ingest.Connect(t.Context(), ingest.Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out, errs syncBuffer
	app := newAppEnv(&env{stdin: strings.NewReader(""), stdout: &out, stderr: &errs,
		terminal: func(s any) bool { return s == any(&errs) }})
	done := make(chan error, 1)
	go func() {
		done <- app.RunContext(ctx, []string{"pipeline", "run", "--data-dir", dir, "--sim-latency", "10m", "-c", "2", "--shutdown-grace", "50ms"})
	}()
	deadline := time.Now().Add(30 * time.Second)
	for {
		if p, err := conn.Pending(t.Context()); err == nil && p.AckPending >= 2 && strings.Contains(errs.String(), "in flight") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no job in flight after 30s; stderr:\n%q", errs.String())
		}
		time.Sleep(20 * time.Millisecond) // polling the consumer, not waiting for an event
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Poll the goroutines for a while: the old spinner never stopped.
	for end := time.Now().Add(2 * time.Second); ; {
		buf := make([]byte, 1<<20)
		stacks := string(buf[:runtime.Stack(buf, true)])
		if !strings.Contains(stacks, "schollz/progressbar") {
			break
		}
		if time.Now().After(end) {
			t.Fatalf("a progress bar goroutine outlives the run:\n%s", stacks)
		}
		time.Sleep(20 * time.Millisecond) // polling the goroutines
	}
	got := errs.String()
	i := strings.Index(got, "stopped: ")
	if i < 1 || got[i-1] != '\n' || strings.Contains(got[i:], "\r") {
		t.Errorf("the stop notice does not start a line of its own, or the bar is drawn after it:\n%q", got[max(0, i-200):])
	}
}
