package main

import (
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/llmpipeline/pipeline/index" // the sqlite3 driver
	"github.com/llmpipeline/pipeline/internal/queue"
)

// TestStreamLimitsKeepUnindexedOutcomes: limits shorter than the sink's
// lag never remove outcomes the index has not read. Outcomes stored with
// the sink stopped (run --sink=false) stay on the streams through a
// submit that sets --stream-max-bytes 2KiB and --stream-max-age 1m (below
// the duplicate window: capped, not refused), commands without the flags
// keep working, and the next run indexes every outcome before it trims
// the streams to the limit.
func TestStreamLimitsKeepUnindexedOutcomes(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	jobs := func(prefix string, n int) string {
		var b strings.Builder
		for i := range n {
			line, _ := json.Marshal(map[string]string{"id": fmt.Sprintf("%s-%d", prefix, i), "schema": "invoice", "input": "text " + prefix})
			b.Write(line)
			b.WriteByte('\n')
		}
		p := filepath.Join(t.TempDir(), prefix+".jsonl")
		if err := os.WriteFile(p, []byte(b.String()), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	onStreams := func() uint64 {
		t.Helper()
		c := connFor(t, []string{"--data-dir", dir})
		defer c.Close()
		p, err := queue.Pending(t.Context(), c)
		if err != nil {
			t.Fatal(err)
		}
		return p.Results + p.DeadLetters
	}
	run := []string{"run", "--data-dir", dir, "--until-idle", "--sim-latency", "0"}
	mustCLI(t, "", "submit", "--data-dir", dir, jobs("a", 20))
	mustCLI(t, "", run...) // indexed
	mustCLI(t, "", "submit", "--data-dir", dir, jobs("b", 20))
	mustCLI(t, "", append(run, "--sink=false")...) // on the streams, not indexed

	_, errs, code := runCLI(t, "", "submit", "--data-dir", dir, "--stream-max-bytes", "2KiB", "--stream-max-age", "1m", jobs("c", 1))
	if code != 0 {
		t.Fatalf("submit --stream-max-bytes 2KiB --stream-max-age 1m: exit %d: %s", code, errs)
	}
	if n := strings.Count(errs, "duplicate window capped"); n == 0 {
		t.Errorf("submit did not say the duplicate window was capped at the max age:\n%s", errs)
	}
	if n := onStreams(); n != 40 {
		t.Errorf("%d outcomes on the streams after the limits were set, want all 40 (20 of them not indexed yet)", n)
	}
	// Commands that do not set the flags read the stored settings back.
	if _, errs, code := runCLI(t, "", "results", "--data-dir", dir); code != 0 {
		t.Fatalf("results after --stream-max-age 1m: exit %d: %s", code, errs)
	}

	_, errs, code = runCLI(t, "", append(run, "--log-level", "info")...)
	if code != 0 {
		t.Fatalf("run: exit %d: %s", code, errs)
	}
	if strings.Contains(errs, "duplicate window capped") {
		t.Errorf("run without the flags said the cap again:\n%s", errs)
	}
	db, err := sql.Open("sqlite3", "file:"+filepath.Join(dir, "pipeline.db")+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	var indexed int
	if err := db.QueryRowContext(t.Context(), `SELECT COUNT(*) FROM outcomes`).Scan(&indexed); err != nil {
		t.Fatal(err)
	}
	if indexed != 41 {
		t.Errorf("index holds %d outcomes, want all 41: the limits removed outcomes before they were indexed", indexed)
	}
	if n := onStreams(); n > 10 {
		t.Errorf("%d outcomes left on the streams once indexed, with --stream-max-bytes 2KiB: the sink did not apply the limit", n)
	}
}
