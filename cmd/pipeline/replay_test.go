package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReplayAfterSchemaFix is the operator's loop: a schema the model
// cannot satisfy dead-letters its jobs; the author fixes the schema; replay
// republishes them; they succeed; the dead letters are marked replayed.
func TestReplayAfterSchemaFix(t *testing.T) {
	t.Parallel()
	dir, schemaDir := t.TempDir(), t.TempDir()
	writeSchema := func(pattern string) {
		t.Helper()
		s := `{"type":"object","required":["code","name"],"properties":{"name":{"type":"string"},"code":{"type":"string"` + pattern + `}}}`
		if err := os.WriteFile(filepath.Join(schemaDir, "part.json"), []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	writeSchema(`,"pattern":"^P-[0-9]{6}$"`) // the simulator never satisfies a pattern
	jobs := `{"id":"p1","schema":"part","input":"part P-000001, a bolt"}
{"id":"p2","schema":"part","input":"part P-000002, a nut"}
`
	common := []string{"--data-dir", dir, "--schemas", schemaDir}
	run := append([]string{"run", "--until-idle", "--sim-latency", "0", "--sim-fault-scale", "0"}, common...)
	mustCLI(t, jobs, append(append([]string{"submit"}, common...), "-")...)
	mustCLI(t, "", run...)
	dead := jsonLines(t, mustCLI(t, "", "dlq", "list", "--json", "--data-dir", dir))
	if len(dead) != 2 {
		t.Fatalf("%d dead letters before the fix, want 2: %v", len(dead), dead)
	}

	replay := []string{"dlq", "replay", "--data-dir", dir, "--schema", "part"}
	out := mustCLI(t, "", append(replay, "--dry-run")...)
	if !strings.Contains(out, "would replay 2 jobs") || !strings.Contains(out, "p1") || !strings.Contains(out, "p2") {
		t.Errorf("dry run output %q", out)
	}
	if again := jsonLines(t, mustCLI(t, "", "dlq", "list", "--json", "--data-dir", dir)); len(again) != 2 {
		t.Fatalf("a dry run changed the dead letters: %v", again)
	}

	writeSchema("")
	out = mustCLI(t, "", replay...)
	if !strings.Contains(out, "replayed 2 jobs, 0 failed") {
		t.Fatalf("replay output %q", out)
	}
	mustCLI(t, "", run...)

	if left := jsonLines(t, mustCLI(t, "", "dlq", "list", "--json", "--data-dir", dir)); len(left) != 0 {
		t.Errorf("dead letters still listed after a successful replay: %v", left)
	}
	replayed := jsonLines(t, mustCLI(t, "", "dlq", "list", "--json", "--replayed", "--data-dir", dir))
	if len(replayed) != 2 {
		t.Fatalf("%d replayed dead letters listed with --replayed, want 2", len(replayed))
	}
	for _, d := range replayed {
		if d["replayed"] != true {
			t.Errorf("dead letter %v not marked replayed", d)
		}
	}
	results := jsonLines(t, mustCLI(t, "", "results", "--data-dir", dir))
	if len(results) != 2 {
		t.Fatalf("%d results after the replay, want 2", len(results))
	}
	for _, r := range results {
		if !strings.HasPrefix(r["job_id"].(string), "p") || r["data"] == nil {
			t.Errorf("result %v", r)
		}
	}
}
