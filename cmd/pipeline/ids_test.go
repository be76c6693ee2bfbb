package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestIDsAsGiven: schema files named as the SchemaStore catalogue and
// Windows users name them, and job ids that are paths, e-mail addresses,
// URLs, "." and "..", non-ASCII text and 512 bytes long, go end to end
// through submit, run (the simulated model), results, dlq list, dlq show,
// dlq replay, report and stats, shown as given; a 513-byte id is refused
// with FILE:LINE.
func TestIDsAsGiven(t *testing.T) {
	t.Parallel()
	dir, schemaDir := t.TempDir(), t.TempDir()
	obj := `{"type":"object","required":["name"],"properties":{"name":{"type":"string"}}}`
	for name, body := range map[string]string{
		"foo-1.0.0.json": obj,
		// The simulator never satisfies a pattern: these dead-letter.
		"ticket.v2.schema.json": `{"type":"object","required":["code"],"properties":{"code":{"type":"string","pattern":"^T-[0-9]{9}$"}}}`,
		"My Invoice.json":       obj,
		"請求書.json":              obj,
	} {
		if err := os.WriteFile(filepath.Join(schemaDir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	long := strings.Repeat("ü", 256) // 512 bytes
	jobs := []struct{ id, schema string }{
		{"inv.2024/03 #7", "My Invoice"},
		{"ana@example.com", "foo-1.0.0"},
		{"https://x.example/a?b=c", "ticket.v2"},
		{".", "請求書"},
		{"..", "ticket.v2"},
		{"ünïcode", "foo-1.0.0"},
		{"inv,7", "ticket.v2"},
		{long, "My Invoice"},
	}
	var file strings.Builder
	for _, j := range jobs {
		line, err := json.Marshal(map[string]string{"id": j.id, "schema": j.schema, "input": "name: Ada, code T-1"})
		if err != nil {
			t.Fatal(err)
		}
		file.Write(line)
		file.WriteByte('\n')
	}
	jobsPath := filepath.Join(t.TempDir(), "jobs.jsonl")
	if err := os.WriteFile(jobsPath, []byte(file.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	common := []string{"--data-dir", dir, "--schemas", schemaDir}

	tooLong := `{"id":"ok-1","schema":"My Invoice","input":"x"}` + "\n" + `{"id":"` + long + `x","schema":"My Invoice","input":"x"}` + "\n"
	_, errs, code := runCLI(t, tooLong, append(append([]string{"submit"}, common...), "-")...)
	if code != exitNegative || !strings.Contains(errs, `<stdin>:2: invalid job: field "id" is 513 bytes, over the limit of 512`) {
		t.Fatalf("a 513-byte id: exit %d, want %d with FILE:LINE and the limit\nstderr: %s", code, exitNegative, errs)
	}

	out := mustCLI(t, "", append(append([]string{"submit", "--json"}, common...), jobsPath)...)
	var sub map[string]int
	if err := json.Unmarshal([]byte(out), &sub); err != nil || sub["published"] != len(jobs) {
		t.Fatalf("submit: %q (%v), want %d published", out, err, len(jobs))
	}
	mustCLI(t, "", append([]string{"run", "--until-idle", "--sim-latency", "0", "--sim-fault-scale", "0"}, common...)...)

	ended := map[string]string{} // job id -> schema, across results and dead letters
	results := jsonLines(t, mustCLI(t, "", "results", "--data-dir", dir))
	for _, r := range results {
		ended[r["job_id"].(string)] = r["schema"].(string)
	}
	dead := jsonLines(t, mustCLI(t, "", "dlq", "list", "--json", "--data-dir", dir))
	for _, d := range dead {
		id := d["job_id"].(string)
		if _, twice := ended[id]; twice {
			t.Errorf("job %q ended as a result and a dead letter", id)
		}
		ended[id] = d["schema"].(string)
	}
	for _, j := range jobs {
		if got, ok := ended[j.id]; !ok || got != j.schema {
			t.Errorf("job %q: ended %v with schema %q, want schema %q", j.id, ok, got, j.schema)
		}
	}
	if len(results) != 5 || len(dead) != 3 || len(ended) != len(jobs) {
		t.Errorf("%d results and %d dead letters of %d ids, want 5 and 3 of %d", len(results), len(dead), len(ended), len(jobs))
	}

	mine := jsonLines(t, mustCLI(t, "", "results", "--data-dir", dir, "--schema", "My Invoice"))
	var ids []string
	for _, r := range mine {
		ids = append(ids, r["job_id"].(string))
	}
	slices.Sort(ids)
	if want := []string{"inv.2024/03 #7", long}; !slices.Equal(ids, want) {
		t.Errorf("results --schema \"My Invoice\": %q, want %q", ids, want)
	}

	for _, id := range []string{"https://x.example/a?b=c", "..", "inv,7"} {
		show := mustCLI(t, "", "dlq", "show", "--data-dir", dir, id)
		if !strings.Contains(show, id) || !strings.Contains(show, "ticket.v2") {
			t.Errorf("dlq show %q:\n%s\nlacks the id or the schema as given", id, show)
		}
		var o map[string]any
		if err := json.Unmarshal([]byte(mustCLI(t, "", "dlq", "show", "--json", "--data-dir", dir, id)), &o); err != nil || o["job_id"] != id {
			t.Errorf("dlq show --json %q: job_id %v (%v)", id, o["job_id"], err)
		}
	}
	if show := mustCLI(t, "", "dlq", "show", "--data-dir", dir, long); !strings.Contains(show, long) {
		t.Errorf("dlq show of the 512-byte id lacks it:\n%s", show)
	}

	out = mustCLI(t, "", "dlq", "replay", "--dry-run", "--data-dir", dir, "--id", "inv,7")
	if !strings.Contains(out, "would replay 1 ") || !strings.Contains(out, "inv,7\n") {
		t.Errorf("dlq replay --dry-run --id inv,7: %q, want the one job, its id whole", out)
	}

	for _, format := range []string{"json", "markdown", "table"} {
		rep := mustCLI(t, "", "report", "--data-dir", dir, "--schemas", schemaDir, "--format", format)
		if !strings.Contains(rep, "ticket.v2") {
			t.Errorf("report --format %s lacks schema ticket.v2:\n%s", format, rep)
		}
	}

	var stats struct {
		Jobs int `json:"jobs"`
	}
	if err := json.Unmarshal([]byte(mustCLI(t, "", "stats", "--data-dir", dir, "--json")), &stats); err != nil || stats.Jobs != len(jobs) {
		t.Errorf("stats: %d jobs (%v), want %d", stats.Jobs, err, len(jobs))
	}

	// The ledger knows every id: submitting the file again publishes nothing.
	out = mustCLI(t, "", append(append([]string{"submit", "--json"}, common...), jobsPath)...)
	if err := json.Unmarshal([]byte(out), &sub); err != nil || sub["already_done"] != len(jobs) || sub["published"] != 0 {
		t.Errorf("resubmit: %q, want all %d already done", out, len(jobs))
	}
}
