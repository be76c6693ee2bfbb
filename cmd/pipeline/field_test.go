package main

import (
	"encoding/json"
	"strings"
	"testing"
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
