package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/llmpipeline/pipeline/internal/clikit"
)

// runApp runs app as Main does (clikit.Run: urfave/cli's parsing is
// serialised across the tests' commands).
func runApp(ctx context.Context, app *cli.App, args []string) error {
	return clikit.Run(ctx, app, args)
}

// cli runs the pipeline command in-process and returns stdout, stderr and
// the exit code.
func runCLI(t *testing.T, stdin string, args ...string) (string, string, int) {
	t.Helper()
	var out, errb bytes.Buffer
	code := Main(append([]string{"pipeline"}, args...), strings.NewReader(stdin), &out, &errb)
	return out.String(), errb.String(), code
}

func mustCLI(t *testing.T, stdin string, args ...string) string {
	t.Helper()
	out, errs, code := runCLI(t, stdin, args...)
	if code != 0 {
		t.Fatalf("pipeline %s: exit %d\nstdout:\n%s\nstderr:\n%s", strings.Join(args, " "), code, out, errs)
	}
	return out
}

// jobsFile writes n jobs over the built-in schemas and returns the path
// and the ids.
func jobsFile(t *testing.T, n int) (string, []string) {
	t.Helper()
	var b strings.Builder
	var ids []string
	schemas := []string{"invoice", "ticket", "shipment"}
	for i := range n {
		id := fmt.Sprintf("job-%04d", i)
		ids = append(ids, id)
		line, _ := json.Marshal(map[string]string{"id": id, "schema": schemas[i%len(schemas)], "input": "text number " + id})
		b.Write(line)
		b.WriteByte('\n')
	}
	p := filepath.Join(t.TempDir(), "jobs.jsonl")
	if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return p, ids
}

func jsonLines(t *testing.T, s string) []map[string]any {
	t.Helper()
	var out []map[string]any
	sc := bufio.NewScanner(strings.NewReader(s))
	sc.Buffer(nil, 1<<24)
	for sc.Scan() {
		if strings.TrimSpace(sc.Text()) == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("not JSON: %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}

// TestSubmitThenRun is the main path: submit and run as two commands on
// one data dir (each starts and stops its own embedded server), then every
// job id appears exactly once across results and dead letters.
func TestSubmitThenRun(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file, ids := jobsFile(t, 60)

	out := mustCLI(t, "", "submit", "--data-dir", dir, "--json", file)
	var sub map[string]int
	if err := json.Unmarshal([]byte(out), &sub); err != nil || sub["published"] != len(ids) {
		t.Fatalf("submit: %q (%v), want %d published", out, err, len(ids))
	}
	// Submitting again inside the duplicate window publishes nothing.
	out = mustCLI(t, "", "submit", "--data-dir", dir, "--json", file)
	if err := json.Unmarshal([]byte(out), &sub); err != nil || sub["duplicates"] != len(ids) || sub["published"] != 0 {
		t.Fatalf("resubmit: %q, want %d duplicates", out, len(ids))
	}

	mustCLI(t, "", "run", "--data-dir", dir, "--until-idle", "--model", "sim", "--sim-latency", "0", "--concurrency", "8")

	results := jsonLines(t, mustCLI(t, "", "results", "--data-dir", dir))
	dead := jsonLines(t, mustCLI(t, "", "dlq", "list", "--data-dir", dir, "--json"))
	seen := map[string]int{}
	for _, r := range results {
		seen[r["job_id"].(string)]++
		if r["data"] == nil || r["attempts"].(float64) < 1 {
			t.Errorf("result %v lacks data or attempts", r)
		}
	}
	for _, d := range dead {
		seen[d["job_id"].(string)]++
		if d["class"] == "" {
			t.Errorf("dead letter %v has no class", d)
		}
	}
	for _, id := range ids {
		if seen[id] != 1 {
			t.Errorf("job %s ended %d times, want exactly once", id, seen[id])
		}
	}
	if len(seen) != len(ids) {
		t.Errorf("%d distinct ids in outcomes, want %d", len(seen), len(ids))
	}

	var stats struct {
		Jobs         int            `json:"jobs"`
		Succeeded    int            `json:"succeeded"`
		DeadLettered int            `json:"dead_lettered"`
		ByAttempt    map[string]int `json:"by_attempt"`
	}
	out = mustCLI(t, "", "stats", "--data-dir", dir, "--json")
	if err := json.Unmarshal([]byte(out), &stats); err != nil {
		t.Fatalf("stats: %q: %v", out, err)
	}
	if stats.Jobs != len(ids) || stats.Succeeded+stats.DeadLettered != len(ids) {
		t.Errorf("stats %+v: want jobs %d = succeeded + dead_lettered", stats, len(ids))
	}
	if stats.Succeeded != len(results) || stats.DeadLettered != len(dead) {
		t.Errorf("stats %+v disagree with %d results and %d dead letters", stats, len(results), len(dead))
	}
	sum := 0
	for _, n := range stats.ByAttempt {
		sum += n
	}
	if sum != stats.Succeeded {
		t.Errorf("by_attempt sums to %d, want succeeded %d", sum, stats.Succeeded)
	}
}

func TestSubmitRejectsBadLinesWithLineNumbers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	in := `{"id":"a1","schema":"invoice","input":"x"}
not json at all
{"id":"a2","schema":"nope","input":"x"}

{"id":"a3","schema":"invoice"}
{"id":"a1","schema":"invoice","input":"again"}
`
	out, errs, code := runCLI(t, in, "submit", "--data-dir", dir, "-")
	if code != exitNegative {
		t.Fatalf("exit %d, want %d; stderr %s", code, exitNegative, errs)
	}
	for _, want := range []string{"<stdin>:2:", "<stdin>:3: unknown schema \"nope\"", "<stdin>:5: invalid job: missing required field \"input\"", "<stdin>:6: job id \"a1\" repeats line 1"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errs)
		}
	}
	if !strings.Contains(out, "published 0") {
		t.Errorf("stdout %q: want nothing published", out)
	}
	if _, err := os.Stat(filepath.Join(dir, "nats")); err == nil {
		t.Errorf("a rejected file should not even start NATS")
	}
}

// syncBuffer is a stderr (or stdout) the test reads while a command, its
// progress goroutine and its logger write it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
