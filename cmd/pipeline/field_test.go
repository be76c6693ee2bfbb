package main

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/internal/app"
	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/poll"
	"github.com/llmpipeline/pipeline/internal/queue"
)

// TestStatsRightAfterSubmit: before any run, stats says how many jobs are
// queued (exit 0), not "no pipeline data"; --json has the counts at zero
// and "queued".
func TestStatsRightAfterSubmit(t *testing.T) {
	t.Parallel()
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
	t.Parallel()
	dir := t.TempDir()
	file, _ := jobsFile(t, 6)
	mustCLI(t, "", "submit", "--data-dir", dir, file)
	conn, err := broker.Connect(t.Context(), broker.Config{DataDir: dir})
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
		done <- runApp(ctx, app, []string{"pipeline", "run", "--data-dir", dir, "--sim-latency", "10m", "-c", "2", "--shutdown-grace", "50ms"})
	}()
	if err := poll.Wait(t, 30*time.Second, func() error {
		if p, err := queue.Pending(t.Context(), conn); err != nil || p.AckPending < 2 || !strings.Contains(errs.String(), "in flight") {
			return cmp.Or(err, errors.New("not in flight yet"))
		}
		return nil
	}); err != nil {
		t.Fatalf("no job in flight after 30s; stderr:\n%q", errs.String())
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// Poll the goroutines for a while: the old spinner never stopped.
	var stacks string
	if err := poll.Wait(t, 2*time.Second, func() error {
		buf := make([]byte, 1<<20)
		if stacks = string(buf[:runtime.Stack(buf, true)]); strings.Contains(stacks, "schollz/progressbar") {
			return errors.New("a progress bar goroutine runs")
		}
		return nil
	}); err != nil {
		t.Fatalf("a progress bar goroutine outlives the run:\n%s", stacks)
	}
	got := errs.String()
	i := strings.Index(got, "stopped: ")
	if i < 1 || got[i-1] != '\n' || strings.Contains(got[i:], "\r") {
		t.Errorf("the stop notice does not start a line of its own, or the bar is drawn after it:\n%q", got[max(0, i-200):])
	}
}

// TestSchemasRememberedPerDataDir: the --schemas of submit is remembered
// for the data dir: run, report (with its lint), validate and schemas lint
// use it without being told again; an unknown schema names where it was
// looked for and --schemas.
func TestSchemasRememberedPerDataDir(t *testing.T) {
	t.Parallel()
	dir, schemaDir := t.TempDir(), t.TempDir()
	// receipt: a schema of the user's, with a contradiction for the lint
	receipt := `{"type":"object","required":["total"],"properties":{"total":{"type":"number"},"n":{"type":"integer","minimum":10,"maximum":1}}}`
	if err := os.WriteFile(filepath.Join(schemaDir, "receipt.json"), []byte(receipt), 0o600); err != nil {
		t.Fatal(err)
	}
	job := `{"id":"r-1","schema":"receipt","input":"Total 12.50"}` + "\n"

	_, errs, code := runCLI(t, job, "submit", "--data-dir", dir, "-")
	if code != exitNegative || !strings.Contains(errs, `unknown schema "receipt" in the built-in schemas`) || !strings.Contains(errs, "--schemas DIR") {
		t.Errorf("submit without --schemas: exit %d, stderr %q; want the built-in schemas and --schemas named", code, errs)
	}
	mustCLI(t, job, "submit", "--data-dir", dir, "--schemas", schemaDir, "-")

	mustCLI(t, "", "run", "--data-dir", dir, "--until-idle", "--sim-latency", "0")
	var show struct {
		Class string `json:"class"`
	}
	if err := json.Unmarshal([]byte(mustCLI(t, "", "dlq", "show", "--data-dir", dir, "--json", "r-1")), &show); err == nil && show.Class == "unknown_schema" {
		t.Errorf("run without --schemas did not use the remembered directory: r-1 is unknown_schema")
	}
	var rep struct {
		Lint []struct {
			Schema string `json:"schema"`
		} `json:"lint"`
	}
	if err := json.Unmarshal([]byte(mustCLI(t, "", "report", "--data-dir", dir, "--json")), &rep); err != nil {
		t.Fatal(err)
	}
	if len(rep.Lint) == 0 || rep.Lint[0].Schema != "receipt" {
		t.Errorf("report without --schemas: lint %+v, want receipt's finding", rep.Lint)
	}
	if _, errs, code := runCLI(t, `{"total": 3}`, "validate", "--data-dir", dir, "--schema", "receipt"); code != 0 {
		t.Errorf("validate without --schemas: exit %d, %s", code, errs)
	}
	if out, _, code := runCLI(t, "", "schemas", "lint", "--data-dir", dir); code != exitNegative || !strings.Contains(out, "receipt.json") {
		t.Errorf("schemas lint without --schemas: exit %d, %q; want receipt's finding", code, out)
	}
	_, errs, _ = runCLI(t, `{}`, "validate", "--data-dir", dir, "--schema", "nope")
	if !strings.Contains(errs, schemaDir) || !strings.Contains(errs, "remembered in "+filepath.Join(dir, app.SchemasMemo)) || !strings.Contains(errs, "--schemas") {
		t.Errorf("unknown schema after the memory: %q; want the remembered directory, the memo and --schemas named", errs)
	}
	// --schemas "" on submit forgets: the built-in schemas again.
	mustCLI(t, "", "submit", "--data-dir", dir, "--schemas", "", "-")
	if _, err := os.Stat(filepath.Join(dir, app.SchemasMemo)); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("submit --schemas '' left the memo: %v", err)
	}
}
