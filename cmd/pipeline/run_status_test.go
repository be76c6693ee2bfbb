package main

import (
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/poll"
	"github.com/llmpipeline/pipeline/internal/queue"
)

// TestRunEndsWithSummaryLine: without a terminal, no progress is drawn and
// `run --until-idle` ends with one summary line on stderr that agrees with
// the index.
func TestRunEndsWithSummaryLine(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file, ids := jobsFile(t, 30)
	mustCLI(t, "", "submit", "--data-dir", dir, file)
	_, errs, code := runCLI(t, "", "run", "--data-dir", dir, "--until-idle", "--sim-latency", "0", "-c", "4")
	if code != 0 {
		t.Fatalf("run: exit %d: %s", code, errs)
	}
	m := summaryRe.FindAllStringSubmatch(errs, -1)
	if len(m) != 1 {
		t.Fatalf("want one summary line on stderr, got %d:\n%s", len(m), errs)
	}
	n := func(i int) int { v, _ := strconv.Atoi(m[0][i]); return v }
	if n(1) != len(ids) || n(2)+n(3) != len(ids) || n(6) < len(ids) || n(7) == 0 {
		t.Errorf("summary %q: want %d jobs = succeeded + dead-lettered, at least one model call each, tokens", m[0][0], len(ids))
	}
	stats := jsonLines(t, mustCLI(t, "", "stats", "--data-dir", dir, "--json"))[0]
	if int(stats["succeeded"].(float64)) != n(2) || int(stats["dead_lettered"].(float64)) != n(3) {
		t.Errorf("summary %q disagrees with stats %v", m[0][0], stats)
	}
	if strings.ContainsAny(errs, "\r\x1b") || strings.Contains(errs, "jobs  ") {
		t.Errorf("progress drawn without a terminal:\n%q", errs)
	}
}

// TestRunProgressOnATerminal: on a terminal, the progress bar shows the
// status line, then the summary follows.
func TestRunProgressOnATerminal(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file, _ := jobsFile(t, 12)
	mustCLI(t, "", "submit", "--data-dir", dir, file)
	var out, errs syncBuffer
	app := newAppEnv(&env{stdin: strings.NewReader(""), stdout: &out, stderr: &errs,
		terminal: func(s any) bool { return s == any(&errs) }})
	err := runApp(t.Context(), app, []string{"pipeline", "run", "--data-dir", dir, "--until-idle", "--sim-latency", "0", "-c", "2"})
	if err != nil {
		t.Fatal(err)
	}
	got := errs.String()
	if !regexp.MustCompile(`\d+/\d+ jobs  [0-9.]+/s  ETA \S+  results \d+  dead letters \d+.*  in flight \d`).MatchString(got) || !strings.Contains(got, "\r") {
		t.Errorf("no progress bar with the status line on the terminal:\n%q", got)
	}
	if !summaryRe.MatchString(got) {
		t.Errorf("no summary line after the progress bar:\n%q", got)
	}
}

// TestRunStoppedSaysWhatItHandedBack: a run stopped while jobs are in
// flight (as by SIGINT: its context is cancelled) hands them back and
// says how many.
func TestRunStoppedSaysWhatItHandedBack(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file, ids := jobsFile(t, 20)
	mustCLI(t, "", "submit", "--data-dir", dir, file)
	// This connection runs the embedded server; the run joins it, so it
	// outlives the run for the checks below.
	conn, err := broker.Connect(t.Context(), broker.Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out, errs syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- mainContext(ctx, []string{"pipeline", "run", "--data-dir", dir, "--sim-latency", "10m", "-c", "2", "--shutdown-grace", "100ms"},
			strings.NewReader(""), &out, &errs)
	}()
	if err := poll.Wait(t, 30*time.Second, func() error {
		p, err := queue.Pending(t.Context(), conn)
		if err == nil && p.AckPending < 2 {
			err = fmt.Errorf("%+v", p)
		}
		return err
	}); err != nil {
		t.Fatalf("no job in flight after 30s (%v); stderr:\n%s", err, errs.String())
	}
	cancel()
	select {
	case code := <-done:
		if code != 0 {
			t.Errorf("stopped run: exit %d\n%s", code, errs.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatal("run did not stop within 60s")
	}
	m := regexp.MustCompile(`(?m)^stopped: (\d+) jobs handed back$`).FindStringSubmatch(errs.String())
	if m == nil {
		t.Fatalf("no 'stopped: N jobs handed back' line:\n%s", errs.String())
	}
	p, err := queue.Pending(t.Context(), conn)
	if err != nil {
		t.Fatal(err)
	}
	handed, _ := strconv.Atoi(m[1])
	t.Logf("%s (consumer after the stop: %+v)", m[0], p)
	if handed < 2 || p.Results+p.DeadLetters != 0 || p.Jobs != uint64(len(ids)) {
		t.Errorf("handed back %d (want at least the 2 in flight); after the stop %+v: want all %d jobs back, no outcome", handed, p, len(ids))
	}
	if !summaryRe.MatchString(errs.String()) {
		t.Errorf("no summary line after the stop:\n%s", errs.String())
	}
}

var summaryRe = regexp.MustCompile(`(?m)^run: (\d+) jobs in [^:]+: (\d+) succeeded, (\d+) dead-lettered( \([a-z_]+ \d+(, [a-z_]+ \d+)*\))?, (\d+) model calls, (\d+) tokens$`)
