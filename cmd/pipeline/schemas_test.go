package main

import (
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// brokenSchemaDir holds a good schema that references another file, and
// two files that do not load: one that does not compile, one whose name
// cannot be a schema id (a control character); "my schema.json" loads.
func brokenSchemaDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range map[string]string{
		"good.json":      `{"type":"object","required":["addr"],"properties":{"addr":{"$ref":"address.json"}}}`,
		"address.json":   `{"type":"object","required":["line"],"properties":{"line":{"type":"string"}}}`,
		"plain.json":     `{"type":"object","properties":{"name":{"type":"string"}}}`,
		"broken.json":    `{"type":"objekt"}`,
		"my schema.json": `{"type":"object"}`,
		"tab\there.json": `{"type":"object"}`,
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestSchemaCommandsWithABrokenFile: one broken file of the directory does
// not stop validate for the others; validate of the broken one, list and
// lint name it.
func TestSchemaCommandsWithABrokenFile(t *testing.T) {
	t.Parallel()
	dir := brokenSchemaDir(t)
	cases := []struct {
		name   string
		stdin  string
		args   []string
		code   int
		stdout []string
		stderr []string
	}{
		{"validate a good schema that references another file", `{"addr":{"line":"1 Main St"}}`,
			[]string{"validate", "--schemas", dir, "--schema", "good"}, exitOK, []string{"valid against good@"}, nil},
		{"validate follows the reference", `{"addr":{}}`,
			[]string{"validate", "--schemas", dir, "--schema", "good"}, exitNegative, []string{"/addr/line: missing required property"}, nil},
		{"validate the broken schema names its error", `{}`,
			[]string{"validate", "--schemas", dir, "--schema", "broken"}, exitRuntime, nil, []string{"broken.json", "/type"}},
		{"list marks the broken files", "",
			[]string{"schemas", "list", "--schemas", dir}, exitOK,
			[]string{"good\t", "broken\tbroken\t" + filepath.Join(dir, "broken.json"), `file name "tab\there.json" cannot be a schema id`, "printable UTF-8"}, nil},
		{"list --json", "",
			[]string{"schemas", "list", "--schemas", dir, "--json"}, exitOK,
			[]string{`"id":"good"`, `"uses":["address.json"]`, `"id":"broken"`, `"broken":true`}, nil},
		{"lint reports them", "",
			[]string{"schemas", "lint", dir}, exitNegative, []string{"tab\\there.json", "bad_file_name", "broken.json", "compile_error"}, nil},
		{"a depth limit from the flag", `{}`,
			[]string{"validate", "--schemas", dir, "--schema", "good", "--schema-max-depth", "2"}, exitRuntime, nil,
			[]string{"good.json", "depth limit of 2 levels"}},
		{"a size limit from the flag", `{}`,
			[]string{"validate", "--schemas", dir, "--schema", "good", "--schema-max-bytes", "20B"}, exitRuntime, nil,
			[]string{"good.json", "size limit of 20 bytes"}},
		{"a bad size limit", `{}`,
			[]string{"validate", "--schemas", dir, "--schema", "good", "--schema-max-bytes", "lots"}, exitUsage, nil,
			[]string{"--schema-max-bytes"}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, errs, code := runCLI(t, tc.stdin, tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, out, errs)
			}
			// The table's columns are padded with spaces: a tab in an
			// expectation stands for the padding.
			norm := regexp.MustCompile(` {2,}`).ReplaceAllString(out, "\t")
			for _, s := range tc.stdout {
				if !strings.Contains(out, s) && !strings.Contains(norm, s) {
					t.Errorf("stdout %q lacks %q", out, s)
				}
			}
			for _, s := range tc.stderr {
				if !strings.Contains(errs, s) {
					t.Errorf("stderr %q lacks %q", errs, s)
				}
			}
		})
	}
}

// TestRunRefusesBrokenSchemas: run does not start on a directory with a
// broken file, naming each; with --skip-broken-schemas it starts, and a job
// of the broken schema is dead-lettered with the load error while the
// others succeed.
func TestRunRefusesBrokenSchemas(t *testing.T) {
	t.Parallel()
	schemaDir := brokenSchemaDir(t)
	dataDir := t.TempDir()
	run := []string{"run", "--data-dir", dataDir, "--schemas", schemaDir, "--until-idle", "--sim-latency", "0", "--sim-fault-scale", "0"}

	out, errs, code := runCLI(t, "", run...)
	if code != exitRuntime {
		t.Fatalf("run on a broken directory: exit %d, want %d\nstdout: %s\nstderr: %s", code, exitRuntime, out, errs)
	}
	for _, s := range []string{"2 schema file(s) did not load", filepath.Join(schemaDir, "broken.json"), `"tab\there.json" cannot be a schema id`, "--skip-broken-schemas"} {
		if !strings.Contains(errs, s) {
			t.Errorf("stderr %q lacks %q", errs, s)
		}
	}

	// The job of "broken" was submitted while its file still loaded.
	broken := filepath.Join(schemaDir, "broken.json")
	if err := os.WriteFile(broken, []byte(`{"type":"object"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	jobs := `{"id":"g1","schema":"plain","input":"a name: Ada"}
{"id":"g2","schema":"good","input":"an address: 1 Main St"}
{"id":"b1","schema":"broken","input":"anything"}
`
	if _, errs, code := runCLI(t, jobs, "submit", "--data-dir", dataDir, "--schemas", schemaDir, "-"); code != exitOK {
		t.Fatalf("submit: exit %d: %s", code, errs)
	}
	if err := os.WriteFile(broken, []byte(`{"type":"objekt"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	_, errs, code = runCLI(t, "", append(run, "--skip-broken-schemas", "--log-level", "warn")...)
	if code != exitOK {
		t.Fatalf("run --skip-broken-schemas: exit %d\nstderr: %s", code, errs)
	}
	if !strings.Contains(errs, "schema file did not load") || !strings.Contains(errs, "broken.json") {
		t.Errorf("no warning naming broken.json on stderr: %q", errs)
	}
	dead := jsonLines(t, mustCLI(t, "", "dlq", "list", "--data-dir", dataDir, "--json"))
	if len(dead) != 1 || dead[0]["job_id"] != "b1" || dead[0]["class"] != "unknown_schema" {
		t.Fatalf("dead letters %v, want b1 as unknown_schema", dead)
	}
	if msg, _ := dead[0]["reason"].(string); !strings.Contains(msg, "did not load") || !strings.Contains(msg, "broken.json") {
		t.Errorf("dead letter error %q does not name the load error", msg)
	}
	// good.json references address.json: the model is given the bundled
	// schema and its answer is validated across the two files.
	results := jsonLines(t, mustCLI(t, "", "results", "--data-dir", dataDir))
	var ids []string
	for _, r := range results {
		ids = append(ids, r["job_id"].(string))
	}
	if slices.Sort(ids); !slices.Equal(ids, []string{"g1", "g2"}) {
		t.Errorf("results for %v, want g1 and g2", ids)
	}
}
