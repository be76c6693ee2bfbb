package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmpipeline/pipeline/internal/app"
)

// TestDemo is the newcomer's command: every example job ends exactly once
// and the report names the field the simulator cannot satisfy.
func TestDemo(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	out := mustCLI(t, "", "demo", "--data-dir", dir, "--sim-latency", "0")
	for _, want := range []string{"jobs", "succeeded", "dead_lettered", "/tracking_code", "IMPOSSIBLE", "explore: pipeline ui --data-dir " + dir} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
	if strings.Contains(out, "filter:") {
		t.Errorf("the demo's report is filtered, though it covers every job the demo ran:\n%s", out)
	}
	var stats struct {
		Jobs         int `json:"jobs"`
		Succeeded    int `json:"succeeded"`
		DeadLettered int `json:"dead_lettered"`
	}
	if err := json.Unmarshal([]byte(mustCLI(t, "", "stats", "--data-dir", dir, "--json")), &stats); err != nil {
		t.Fatal(err)
	}
	lines := strings.Count(strings.TrimSpace(string(mustRead(t, "../../examples/jobs.jsonl"))), "\n") + 1
	if stats.Jobs != lines || stats.Succeeded+stats.DeadLettered != lines {
		t.Errorf("stats %+v, want %d jobs = succeeded + dead_lettered", stats, lines)
	}

	var rep struct {
		Clusters []struct {
			Schema     string `json:"schema"`
			Path       string `json:"path"`
			Keyword    string `json:"keyword"`
			Impossible bool   `json:"impossible"`
		} `json:"clusters"`
	}
	if err := json.Unmarshal([]byte(mustCLI(t, "", "report", "--data-dir", dir, "--format", "json")), &rep); err != nil {
		t.Fatal(err)
	}
	// tracking_code has a pattern the simulator never satisfies: impossible.
	// carrier and friends fail too, but the model fixes them on the heal
	// turn; their jobs die of tracking_code, so they must not be flagged.
	var impossible []string
	for _, c := range rep.Clusters {
		if c.Impossible {
			impossible = append(impossible, c.Schema+" "+c.Path+" "+c.Keyword)
		}
	}
	if len(impossible) != 1 || impossible[0] != "shipment /tracking_code pattern" {
		t.Errorf("impossible clusters %q, want exactly shipment /tracking_code pattern", impossible)
	}
}

func mustRead(t *testing.T, p string) []byte {
	t.Helper()
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestExitCodes holds the documented exit codes.
func TestExitCodes(t *testing.T) {
	t.Parallel()
	schemaDir := t.TempDir()
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(schemaDir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("price.json", `{"type":"object","required":["price"],"properties":{"price":{"type":"number","exclusiveMinimum":0}}}`)
	contradictory := t.TempDir()
	if err := os.WriteFile(filepath.Join(contradictory, "bad.json"), []byte(`{"type":"object","properties":{"n":{"type":"integer","minimum":10,"maximum":1}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	broken := t.TempDir()
	if err := os.WriteFile(filepath.Join(broken, "broken.json"), []byte(`{"type": "object", "properties": {`), 0o600); err != nil {
		t.Fatal(err)
	}

	cases := []struct {
		name   string
		stdin  string
		args   []string
		code   int
		stdout string // substring expected on stdout
		stderr string // substring expected on stderr
	}{
		{"unknown flag", "", []string{"run", "--no-such-flag"}, exitUsage, "", "no-such-flag"},
		{"stats on an empty data dir", "", []string{"stats", "--data-dir", t.TempDir()}, exitRuntime, "", "no pipeline data"},
		{"sanitize fenced", "```json\n{\"a\": 1,}\n```", []string{"sanitize", "--explain"}, exitOK, `"a"`, "stages:"},
		{"sanitize truncated", `{"a": [1, 2`, []string{"sanitize"}, exitNegative, "", "truncated"},
		{"sanitize prose only", "I'm sorry, I cannot help with that.", []string{"sanitize"}, exitNegative, "", "no JSON"},
		{"validate ok", `{"price": 3}`, []string{"validate", "--schemas", schemaDir, "--schema", "price"}, exitOK, "valid", ""},
		{"validate invalid", `{"price": "12,50"}`, []string{"validate", "--schemas", schemaDir, "--schema", "price"}, exitNegative, `- /price: expected number`, ""},
		{"validate json", `{"price": -1}`, []string{"validate", "--schemas", schemaDir, "--schema", "price", "--json"}, exitNegative, `"keyword":"exclusiveMinimum"`, ""},
		{"validate unknown schema", `{}`, []string{"validate", "--schemas", schemaDir, "--schema", "nope"}, exitUsage, "", `"nope": unknown schema`},
		{"broken schema dir", `{}`, []string{"validate", "--schemas", broken, "--schema", "broken"}, exitRuntime, "", "broken.json"},
		{"lint findings", "", []string{"schemas", "lint", contradictory}, exitNegative, "minimum", "pipeline: 1 finding\n"},
		{"lint clean", "", []string{"schemas", "lint", schemaDir}, exitOK, "no findings", ""},
		{"lint builtin", "", []string{"schemas", "lint"}, exitOK, "no findings", ""},
		{"report bad format", "", []string{"report", "--format", "pdf"}, exitUsage, "", "--format"},
		{"bad memory limit", "", []string{"run", "--memory-limit", "lots"}, exitUsage, "", "--memory-limit"},
		{"bad concurrency", "", []string{"run", "--concurrency", "-1"}, exitUsage, "", "--concurrency"},
		{"bad heal history", "", []string{"run", "--heal-history", "some"}, exitUsage, "", "istory"},
		{"bad model", "", []string{"run", "--model", "gpt4"}, exitUsage, "", "--model"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, errs, code := runCLI(t, tc.stdin, tc.args...)
			if code != tc.code {
				t.Fatalf("exit %d, want %d\nstdout: %s\nstderr: %s", code, tc.code, out, errs)
			}
			if !strings.Contains(out, tc.stdout) {
				t.Errorf("stdout %q lacks %q", out, tc.stdout)
			}
			if !strings.Contains(errs, tc.stderr) {
				t.Errorf("stderr %q lacks %q", errs, tc.stderr)
			}
		})
	}
}

func TestParseBytes(t *testing.T) {
	t.Parallel()
	cases := []struct {
		in   string
		want int64
		bad  bool
	}{
		{"200MiB", 200 << 20, false}, {"1GiB", 1 << 30, false}, {"512MB", 512e6, false},
		{"4096", 4096, false}, {"0", 0, false}, {"off", 0, false}, {"", 0, false},
		{"-1MiB", 0, true}, {"lots", 0, true}, {"12XB", 0, true},
	}
	for _, tc := range cases {
		got, err := app.ParseBytes(tc.in)
		if (err != nil) != tc.bad || got != tc.want {
			t.Errorf("parseBytes(%q) = %d, %v; want %d, error %v", tc.in, got, err, tc.want, tc.bad)
		}
	}
}
