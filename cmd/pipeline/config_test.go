package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// writeConfig writes a configuration file and returns its path.
func writeConfig(t *testing.T, text string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "pipeline.yaml")
	if err := os.WriteFile(p, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// deadLetters is `dlq list --json` on dir: each job's attempts and class.
func deadLetters(t *testing.T, dir string) map[string]string {
	t.Helper()
	got := map[string]string{}
	for _, m := range jsonLines(t, mustCLI(t, "", "dlq", "list", "--json", "--data-dir", dir)) {
		got[m["job_id"].(string)] = fmt.Sprintf("%v %v", m["attempts"], m["class"])
	}
	return got
}

// TestRunConfigFile: `pipeline run --config FILE` takes its settings from
// the file, of several sections (broker: data-dir at the top level, for
// every command; workers, model, heal and log under run), a flag wins
// over the file, and an environment variable wins over the file.
func TestRunConfigFile(t *testing.T) {
	dir := t.TempDir()
	jobs, ids := jobsFile(t, 4)
	cfg := writeConfig(t, fmt.Sprintf(`# the settings of every command
data-dir: %s
log-level: error
run:
  until-idle: true
  concurrency: 3
  sim-latency: 0s
  sim-force: grammar
  max-attempts: 3
`, dir))
	mustCLI(t, "", "submit", "--config", cfg, jobs) // data-dir from the file
	mustCLI(t, "", "run", "--config", cfg)          // returns: until-idle from the file
	got := deadLetters(t, dir)
	for _, id := range ids {
		if got[id] != "3 exhausted" {
			t.Errorf("job %s: %q, want 3 attempts, exhausted (max-attempts and sim-force from the file): %v", id, got[id], got)
		}
	}

	// A flag wins over the file.
	flagDir := t.TempDir()
	mustCLI(t, "", "submit", "--data-dir", flagDir, jobs)
	mustCLI(t, "", "run", "--config", cfg, "--data-dir", flagDir, "--max-attempts", "1")
	got = deadLetters(t, flagDir)
	for _, id := range ids {
		if got[id] != "1 exhausted" {
			t.Errorf("with --max-attempts 1: job %s: %q, want 1 attempt: %v", id, got[id], got)
		}
	}

	// An environment variable wins over the file.
	envDir := t.TempDir()
	mustCLI(t, "", "submit", "--data-dir", envDir, jobs)
	t.Setenv("PIPELINE_DATA_DIR", envDir)
	t.Setenv("PIPELINE_CONFIG", cfg) // the file named by the environment
	mustCLI(t, "", "run")
	if got = deadLetters(t, envDir); len(got) != len(ids) {
		t.Errorf("PIPELINE_DATA_DIR over the file's data-dir: %d dead letters in it, want %d", len(got), len(ids))
	}
	out := mustCLI(t, "", "config", "show", "--json")
	sources := map[string]string{}
	for _, m := range jsonLines(t, out) {
		sources[m["name"].(string)] = m["source"].(string)
	}
	for name, want := range map[string]string{
		"data-dir":     "env PIPELINE_DATA_DIR",
		"concurrency":  "file " + cfg + ":6",
		"max-attempts": "file " + cfg + ":9",
		"ack-wait":     "default",
		"config":       "env PIPELINE_CONFIG",
	} {
		if sources[name] != want {
			t.Errorf("config show: %s from %q, want %q", name, sources[name], want)
		}
	}
}

// TestConfigFileMistakes: an unknown key, or a value of the wrong type, is
// a usage error (exit 2) naming the file, the line and the key.
func TestConfigFileMistakes(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, text, want string
	}{
		{"unknown key of run", "data-dir: x\nrun:\n  max-attemps: 3\n", ":3: unknown key \"run.max-attemps\""},
		{"unknown top-level key", "schemas: ./s\ndatadir: x\n", ":2: unknown key \"datadir\""},
		{"unknown command", "runn:\n  concurrency: 3\n", ":1: unknown key \"runn\""},
		{"wrong type", "run:\n  concurrency: many\n", ":2: key \"run.concurrency\": invalid value \"many\""},
		{"not a mapping", "- a\n- b\n", ":1: want a mapping"},
		{"a misspelt key names the nearest", "run:\n  concurency: 4\n", `:2: unknown key "run.concurency": 'pipeline run' has no such setting (keys are the long flag names); did you mean "concurrency"?`},
		{"a misspelt section names the nearest", "dlqq:\n  list:\n    limit: 5\n", `:1: unknown key "dlqq": no command "dlqq" (a section is a command's name, holding its settings); did you mean "dlq"?`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cfg := writeConfig(t, tc.text)
			for _, args := range [][]string{{"run", "--config", cfg}, {"stats", "--config", cfg}, {"config", "show", "--config", cfg}} {
				_, errs, code := runCLI(t, "", args...)
				if code != exitUsage || !strings.Contains(errs, cfg+tc.want) {
					t.Errorf("%v: exit %d, stderr %q; want exit 2 naming %q", args, code, errs, cfg+tc.want)
				}
			}
		})
	}
}

// TestConfigShowSources: `config show` lists every setting of the command
// with where it came from.
func TestConfigShowSources(t *testing.T) {
	cfg := writeConfig(t, "data-dir: /srv/pipeline\nrun:\n  model: openai:gpt-4o-mini\ndlq:\n  list:\n    limit: 5\n")
	t.Setenv("PIPELINE_CONCURRENCY", "7")
	out := mustCLI(t, "", "config", "show", "--config", cfg)
	for _, want := range []string{
		"data-dir ", "/srv/pipeline", "file " + cfg + ":1",
		"openai:gpt-4o-mini", "file " + cfg + ":3",
		"env PIPELINE_CONCURRENCY", "default",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("config show lacks %q:\n%s", want, out)
		}
	}
	out = mustCLI(t, "", "config", "show", "--config", cfg, "--command", "dlq list")
	if !strings.Contains(out, "file "+cfg+":6") || !strings.Contains(out, "/srv/pipeline") {
		t.Errorf("config show --command 'dlq list' lacks its section's limit or the top level's data-dir:\n%s", out)
	}
	if _, errs, code := runCLI(t, "", "config", "show", "--command", "nope"); code != exitUsage {
		t.Errorf("--command nope: exit %d (%s), want 2", code, errs)
	}
}

// TestConfigFileSchemaLimitsReachEveryCommand: the schema limits of a
// configuration file hold for every command that loads the schemas, not
// only for run: a schema nesting deeper than the file's schema-max-depth
// is broken for submit and report too, so submit refuses its jobs rather
// than publishing what run will then refuse.
func TestConfigFileSchemaLimitsReachEveryCommand(t *testing.T) {
	t.Parallel()
	dir, schemaDir := t.TempDir(), t.TempDir()
	schema := `{"type": "object", "properties": {"a": {"type": "object", "properties": {"b": {"type": "string"}}}}}`
	if err := os.WriteFile(filepath.Join(schemaDir, "deep.json"), []byte(schema), 0o600); err != nil {
		t.Fatal(err)
	}
	jobs := filepath.Join(t.TempDir(), "jobs.jsonl")
	if err := os.WriteFile(jobs, []byte(`{"id": "j1", "schema": "deep", "input": "a b"}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := writeConfig(t, fmt.Sprintf("data-dir: %s\nschemas: %s\nschema-max-depth: 3\n", dir, schemaDir))
	_, errs, code := runCLI(t, "", "submit", "--config", cfg, jobs)
	if code != exitNegative || !strings.Contains(errs, "deeper than") {
		t.Errorf("submit with schema-max-depth 3 from the file: exit %d, stderr %q; want exit 1 and the schema refused for its depth", code, errs)
	}
	mustCLI(t, "", "submit", "--data-dir", dir, "--schemas", schemaDir, jobs) // without the file's limit
	mustCLI(t, "", "run", "--data-dir", dir, "--schemas", schemaDir, "--until-idle", "--sim-latency", "0s")
	_, errs, code = runCLI(t, "", "report", "--config", cfg)
	if !strings.Contains(errs, "deeper than") {
		t.Errorf("report with schema-max-depth 3 from the file: exit %d, stderr %q; want the schema refused for its depth", code, errs)
	}
}
