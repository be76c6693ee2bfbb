package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// reportDoc is the part of `pipeline report --json` these tests read.
type reportDoc struct {
	GeneratedAt string `json:"generated_at"`
	Source      string `json:"source"`
	Range       *struct {
		From string `json:"from"`
		To   string `json:"to"`
	} `json:"range"`
	Totals struct {
		Jobs           int `json:"jobs"`
		Succeeded      int `json:"succeeded"`
		DeadLettered   int `json:"dead_lettered"`
		ReplayedHealed int `json:"replayed_healed"`
	} `json:"totals"`
	Filter struct {
		Version string `json:"version"`
	} `json:"filter"`
	Versions      map[string][]string `json:"versions"`
	ClustersTotal int                 `json:"clusters_total"`
	Clusters      []struct {
		Version        string `json:"version"`
		Path           string `json:"path"`
		DeadLetters    int    `json:"dead_letters"`
		ReplayedHealed int    `json:"replayed_healed"`
		Impossible     bool   `json:"impossible"`
	} `json:"clusters"`
}

func reportJSON(t *testing.T, args ...string) reportDoc {
	t.Helper()
	var doc reportDoc
	out := mustCLI(t, "", append([]string{"report", "--json"}, args...)...)
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		t.Fatalf("report --json: %v\n%s", err, out)
	}
	return doc
}

// TestReportAfterSchemaFixAndReplay: a field the model cannot satisfy is
// flagged; after the schema fix, `dlq replay` and a run in which every
// replayed job succeeded, the report (latest version by default) flags
// nothing and covers the new version only; --version all still shows the
// old version's cluster, its dead letters replayed, healed and unflagged.
func TestReportAfterSchemaFixAndReplay(t *testing.T) {
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
{"id":"p3","schema":"part","input":"part P-000003, a washer"}
`
	common := []string{"--data-dir", dir, "--schemas", schemaDir}
	run := append([]string{"run", "--until-idle", "--sim-latency", "0", "--sim-fault-scale", "0"}, common...)
	mustCLI(t, jobs, append(append([]string{"submit"}, common...), "-")...)
	mustCLI(t, "", run...)

	before := reportJSON(t, common...)
	if len(before.Clusters) == 0 || before.Clusters[0].Path != "/code" || !before.Clusters[0].Impossible {
		t.Fatalf("before the fix: clusters %+v, want /code impossible", before.Clusters)
	}
	v1 := before.Clusters[0].Version
	if before.Totals.Jobs != 3 || before.Totals.DeadLettered != 3 || before.ClustersTotal != len(before.Clusters) ||
		before.GeneratedAt == "" || before.Range == nil || before.Source != filepath.Join(dir, "pipeline.db") {
		t.Errorf("before the fix: header %+v", before)
	}

	writeSchema("")
	mustCLI(t, "", "dlq", "replay", "--data-dir", dir, "--schema", "part")
	mustCLI(t, "", run...)

	after := reportJSON(t, common...)
	for _, c := range after.Clusters {
		if c.Impossible || c.Version == v1 {
			t.Errorf("after the fix and replay the default report lists %+v", c)
		}
	}
	if vs := after.Versions["part"]; after.Filter.Version != "latest" || len(vs) != 1 || vs[0] == v1 {
		t.Errorf("after the fix the report covers %v (%s), want the new version only", after.Versions, after.Filter.Version)
	}
	if after.Totals.Jobs != 3 || after.Totals.Succeeded != 3 {
		t.Errorf("after the fix: totals %+v, want the 3 replays, succeeded", after.Totals)
	}

	history := reportJSON(t, append(common, "--version", "all")...)
	found := false
	for _, c := range history.Clusters {
		if c.Version == v1 && c.Path == "/code" {
			found = true
			if c.Impossible || c.ReplayedHealed != 3 || c.DeadLetters != 3 {
				t.Errorf("--version all: /code of the old version = %+v, want 3 dead letters replayed, healed, not impossible", c)
			}
		}
	}
	if !found || len(history.Versions["part"]) != 2 || history.Totals.ReplayedHealed != 3 {
		t.Errorf("--version all: clusters %+v, versions %v, totals %+v", history.Clusters, history.Versions, history.Totals)
	}

	table := mustCLI(t, "", append([]string{"report", "--version", "all"}, common...)...)
	for _, want := range []string{"index:     " + filepath.Join(dir, "pipeline.db"), "generated: ", "outcomes:  finished ",
		"versions:  every version (--version all): ", "part@" + v1[:8], "totals:    6 jobs, 3 succeeded, 3 dead-lettered (3 replayed, healed)"} {
		if !strings.Contains(table, want) {
			t.Errorf("report table lacks %q:\n%s", want, table)
		}
	}
	if !strings.Contains(mustCLI(t, "", "report", "--help"), "--version all") {
		t.Errorf("report --help does not document --version all")
	}
}
