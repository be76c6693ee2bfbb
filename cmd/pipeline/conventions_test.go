package main

import (
	"encoding/json"
	"os"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"strings"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/internal/app"
	"github.com/llmpipeline/pipeline/internal/config"
)

func TestVersion(t *testing.T) {
	t.Parallel()
	want := "pipeline version " + app.BuildVersion().String() + "\n"
	for _, args := range [][]string{{"--version"}, {"version"}} {
		out, errs, code := runCLI(t, "", args...)
		if code != exitOK || out != want {
			t.Errorf("pipeline %v: exit %d, stdout %q, want %q (stderr %q)", args, code, out, want, errs)
		}
	}
	var v app.Version
	if err := json.Unmarshal([]byte(mustCLI(t, "", "version", "--json")), &v); err != nil || v.Module == "" || v.Version == "" || v.Go == "" {
		t.Errorf("version --json: %+v, %v", v, err)
	}

	bi := &debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Path: "github.com/llmpipeline/pipeline", Version: "v1.4.0"},
		Settings: []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"}}}
	if got, want := app.VersionFrom(bi).String(), "v1.4.0 (rev 0123456789ab, modified, go1.26.8)"; got != want {
		t.Errorf("versionFrom = %q, want %q", got, want)
	}
	if got := app.VersionFrom(nil).Version; got != "unknown" {
		t.Errorf("versionFrom(nil).Version = %q, want unknown", got)
	}
}

// TestCommandsAndHelp: help for a command, unknown commands exit 2, bare
// pipeline prints its help on stderr and exits 2.
func TestCommandsAndHelp(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name           string
		args           []string
		code           int
		stdout, stderr string
	}{
		{"bare", nil, exitUsage, "", "USAGE:"},
		{"help", []string{"help"}, exitOK, "COMMANDS:", ""},
		{"help run", []string{"help", "run"}, exitOK, "pipeline run - run workers", ""},
		{"help dlq replay", []string{"help", "dlq", "replay"}, exitOK, "pipeline dlq replay - ", ""},
		{"unknown", []string{"nope"}, exitUsage, "", `unknown command "nope"`},
		{"help unknown", []string{"help", "nope"}, exitUsage, "", `unknown command "nope"`},
		{"unknown subcommand", []string{"dlq", "nope"}, exitUsage, "", `unknown command "dlq nope"`},
		{"group without subcommand", []string{"schemas"}, exitUsage, "", "pipeline schemas needs a subcommand"},
		{"flag after argument", []string{"schemas", "lint", t.TempDir(), "--json"}, exitUsage, "", "put flags before arguments"},
		{"flag after file", []string{"submit", "jobs.jsonl", "--json"}, exitUsage, "", `flag --json after the argument "jobs.jsonl"`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			out, errs, code := runCLI(t, "", tc.args...)
			if code != tc.code || !strings.Contains(out, tc.stdout) || !strings.Contains(errs, tc.stderr) {
				t.Errorf("pipeline %v: exit %d (want %d)\nstdout %q (want %q)\nstderr %q (want %q)", tc.args, code, tc.code, out, tc.stdout, errs, tc.stderr)
			}
		})
	}
	// bare: nothing on stdout (the help is on stderr).
	if out, _, _ := runCLI(t, ""); out != "" {
		t.Errorf("bare pipeline wrote %q on stdout", out)
	}
}

// TestReadOnlyOnEmptyDataDir: every read-only command on a data dir without
// pipeline data exits 3 naming it, and creates nothing.
func TestReadOnlyOnEmptyDataDir(t *testing.T) {
	t.Parallel()
	cmds := [][]string{
		{"results"}, {"stats"}, {"report"}, {"dlq", "list"}, {"dlq", "show", "job-1"}, {"dlq", "export"},
		{"dlq", "replay", "--schema", "invoice"}, {"dlq", "purge", "--all"},
		{"eval", "--expected", "labels.jsonl"}, {"eval", "--history"},
	}
	for _, args := range cmds {
		for _, exists := range []bool{false, true} {
			dir := filepath.Join(t.TempDir(), "data")
			if exists {
				if err := os.Mkdir(dir, 0o700); err != nil {
					t.Fatal(err)
				}
			}
			// --data-dir right after the (sub)command, before its arguments.
			n := 1
			if args[0] == "dlq" {
				n = 2
			}
			full := append(append(append([]string{}, args[:n]...), "--data-dir", dir), args[n:]...)
			out, errs, code := runCLI(t, "", full...)
			want := "no pipeline data in " + dir + " (run `pipeline submit` first, or pass --data-dir)"
			if code != exitRuntime || !strings.Contains(errs, want) {
				t.Errorf("pipeline %v (dir exists %v): exit %d, stderr %q; want exit 3 and %q (stdout %q)", full, exists, code, errs, want, out)
			}
			entries, err := os.ReadDir(dir)
			switch {
			case !exists && err == nil:
				t.Errorf("pipeline %v created %s", full, dir)
			case exists && len(entries) > 0:
				t.Errorf("pipeline %v created %d entries in %s, first %s", full, len(entries), dir, entries[0].Name())
			}
		}
	}
}

// TestJobErrorsInUserTerms: a bad job line is named by its line and what is
// wrong in JSON terms, never by a Go type.
func TestJobErrorsInUserTerms(t *testing.T) {
	t.Parallel()
	in := `{"id":"a1","schema":"invoice","input":"x"}
{"id":"a2","schema":"invoice","input":"x"}
[1, 2]
{"id":7,"schema":"invoice","input":"x"}
{"id":"a5","schema":"invoice","input":["x"]}
{"id":"a6","schema":"invoice","input":"x",}
`
	_, errs, code := runCLI(t, in, "submit", "--data-dir", t.TempDir(), "-")
	if code != exitNegative {
		t.Fatalf("exit %d, want 1: %s", code, errs)
	}
	for _, want := range []string{
		"<stdin>:3: invalid job: a job must be a JSON object, got an array",
		`<stdin>:4: invalid job: field "id" must be a string, got a number`,
		`<stdin>:5: invalid job: field "input" must be a string, got an array`,
		"<stdin>:6: invalid job: not valid JSON at byte",
	} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errs)
		}
	}
	for _, goish := range []string{"Go value", "Go struct", "job.Job", "unmarshal"} {
		if strings.Contains(errs, goish) {
			t.Errorf("stderr names Go internals (%q):\n%s", goish, errs)
		}
	}
}

// TestHelpAgreesWithCode holds the help texts to what the code does.
func TestHelpAgreesWithCode(t *testing.T) {
	t.Parallel()
	help := mustCLI(t, "", "run", "--help")
	if !strings.Contains(help, "0: max(30s, request-timeout/2)") {
		t.Errorf("--ack-wait's help does not say what ackWait computes:\n%s", grepLine(help, "--ack-wait"))
	}
	for _, tc := range []struct{ timeout, want time.Duration }{{10 * time.Second, 30 * time.Second}, {120 * time.Second, time.Minute}} {
		if d := app.AckWait(0, tc.timeout); d != tc.want {
			t.Errorf("ack wait with --request-timeout %v = %v, want %v", tc.timeout, d, tc.want)
		}
	}
	if line := grepLine(help, "--sim-fix-rate"); strings.Count(line, "default") != 1 {
		t.Errorf("--sim-fix-rate's help line has %d defaults: %q", strings.Count(line, "default"), line)
	}

	list := mustCLI(t, "", "schemas", "list")
	lines := strings.Split(strings.TrimSpace(list), "\n")
	if !regexp.MustCompile(`^ID\s+VERSION\s+FILE`).MatchString(lines[0]) {
		t.Errorf("schemas list has no header: %q", lines[0])
	}
	for _, l := range lines[1:] {
		f := strings.Fields(l)
		if len(f) < 3 || len(f[1]) != 8 {
			t.Errorf("schemas list line %q: want the version's first 8 characters, as the report prints it", l)
		}
	}
}

// TestConnectionFlagsHaveEnvVars: every connection flag of run has its
// environment variable, and the manual (the README or a page of docs/)
// names it.
func TestConnectionFlagsHaveEnvVars(t *testing.T) {
	t.Parallel()
	readme := string(mustRead(t, "../../README.md"))
	manual := docText(t)
	for _, f := range config.BrokerFlags() {
		name := f.Names()[0]
		ev, ok := f.(interface{ GetEnvVars() []string })
		if !ok || len(ev.GetEnvVars()) == 0 {
			t.Errorf("--%s has no env var", name)
			continue
		}
		for _, v := range ev.GetEnvVars() {
			if !strings.Contains(manual, "`"+v+"`") {
				t.Errorf("neither README.md nor docs/ names %s (the env var of --%s)", v, name)
			}
		}
	}
	if strings.Contains(readme, "Needs Go 1.") {
		gomod := string(mustRead(t, "../../go.mod"))
		m := regexp.MustCompile(`(?m)^go (\d+\.\d+)`).FindStringSubmatch(gomod)
		if m == nil || !strings.Contains(readme, "Needs Go "+m[1]) {
			t.Errorf("README's Go version does not match go.mod's %v", m)
		}
	}
	install := strings.Index(readme, "go install ./cmd/pipeline")
	firstUse := strings.Index(readme, "\npipeline ")
	if install < 0 || (firstUse >= 0 && firstUse < install) {
		t.Errorf("README: the install line (at %d) must come before the first example calling pipeline (at %d)", install, firstUse)
	}
}

func grepLine(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}

// TestReplayMatchingNothing: a replay whose cluster or ids match no dead
// letter says so and exits 1, dry run or not.
func TestReplayMatchingNothing(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file, _ := jobsFile(t, 3)
	mustCLI(t, "", "submit", "--data-dir", dir, file)
	mustCLI(t, "", "run", "--data-dir", dir, "--until-idle", "--sim-latency", "0", "--sim-fault-scale", "0")
	for _, dry := range []bool{false, true} {
		for _, tc := range []struct {
			args []string
			want string
		}{
			{[]string{"--cluster", "c-nope"}, "no dead letter matches --cluster c-nope"},
			{[]string{"--id", "job-0000"}, "no dead letter to replay for job id(s) job-0000"},
			{[]string{"nope-1"}, "no dead letter to replay for job id(s) nope-1"},
		} {
			args := []string{"dlq", "replay", "--data-dir", dir}
			if dry {
				args = append(args, "--dry-run")
			}
			args = append(args, tc.args...)
			out, errs, code := runCLI(t, "", args...)
			if code != exitNegative || !strings.Contains(errs, tc.want) {
				t.Errorf("pipeline %v: exit %d, stderr %q; want exit 1 and %q (stdout %q)", args, code, errs, tc.want, out)
			}
		}
	}
}
