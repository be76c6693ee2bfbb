package main

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"unicode"
)

// hostileAnswer is a model's answer that writes terminal controls: ESC
// sequences (clear the screen, retitle the window), BEL, NUL, CR, a C1 CSI
// and a bidi override, in the prose around the JSON, in an additional
// property's key (its failing path) and in the values.
const hostileAnswer = "\x1b]0;pwned\x07Here it is:\r\n" +
	`{"subject": "\u001b[2J\u0007Cannot log in\r\u0000", "priority": "high", "category": "account",` +
	` "customer": {"name": "Ana\u202e", "email": "ana@example.com"},` +
	` "\u001b]0;title\u0007\r\u0000\u009bkey": "\u001b[2Jvalue\u0007\r\u0000"}`

// rawControl returns the first control character of s that a terminal would
// act on (anything but a line break or a tab), or -1.
func rawControl(s string) (rune, int) {
	for i, r := range s {
		if r != '\n' && r != '\t' && (unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r)) {
			return r, i
		}
	}
	return -1, -1
}

// TestNoControlCharactersInTextOutputs: a model that answers with terminal
// controls in keys and values (an additional property's failing path) gets
// none of them to the terminal, through any text output: dlq list and
// show, report as a table, markdown and html, stats, results, and run's
// own output and summary. The JSON outputs stay JSON with the values
// exact, their C1 controls and bidi overrides as \u escapes.
func TestNoControlCharactersInTextOutputs(t *testing.T) {
	t.Parallel()
	wantTestKeys(t)
	srv := newOpenAIServer(t, http.StatusOK, hostileAnswer)
	dir := t.TempDir()
	var jobs strings.Builder
	for i := range 3 {
		fmt.Fprintf(&jobs, `{"id":"t-%d","schema":"ticket","input":"From: Ana <ana@example.com>\r\nI cannot log in.\u001b[2J"}`+"\n", i)
	}
	mustCLI(t, jobs.String(), "submit", "--data-dir", dir, "-")
	runOut, runErr, code := runCLI(t, "", "run", "--data-dir", dir, "--until-idle", "--model", "openai:test-model", "--llm-url", srv.URL+"/v1")
	if code != 0 {
		t.Fatalf("run: exit %d\n%s", code, runErr)
	}
	outputs := map[string]string{"run stdout": runOut, "run stderr": runErr}
	for _, args := range [][]string{
		{"dlq", "list"}, {"dlq", "show", "t-1"}, {"stats"}, {"results"},
		{"report"}, {"report", "--format", "markdown"}, {"report", "--format", "html"},
		// JSON: encoding/json escapes C0 controls, escape.JSON the rest
		{"dlq", "list", "--json"}, {"dlq", "show", "--json", "t-1"}, {"report", "--format", "json"}, {"results", "--json"},
	} {
		n := 1
		if args[0] == "dlq" {
			n = 2
		}
		full := append(append(append([]string{}, args[:n]...), "--data-dir", dir), args[n:]...)
		out, errs, _ := runCLI(t, "", full...)
		outputs[strings.Join(args, " ")] = out
		outputs[strings.Join(args, " ")+" (stderr)"] = errs
	}
	for name, out := range outputs {
		if r, i := rawControl(out); i >= 0 {
			t.Errorf("%s: raw %U at byte %d:\n%q", name, r, i, out[max(0, i-40):min(len(out), i+40)])
		}
	}
	// What was escaped is still there to read.
	for name, want := range map[string]string{
		"dlq list":                 `\x1b]0;title\a\r\x00\u009bkey`,
		"dlq show t-1":             `\x1b]0;pwned\aHere it is:\r`,
		"report":                   `/\x1b]0;title\a\r\x00\u009bkey`,
		"report --format markdown": `\x1b]0;title\a\r\x00\u009bkey`,
	} {
		if !strings.Contains(outputs[name], want) {
			t.Errorf("%s lacks %q:\n%s", name, want, outputs[name])
		}
	}
	if !strings.Contains(outputs["dlq show t-1"], "    │ From: Ana <ana@example.com>\\r\n    │ I cannot log in.\\x1b[2J") {
		t.Errorf("dlq show: the input is not shown as its escaped text:\n%s", outputs["dlq show t-1"])
	}
	// JSON keeps the key exact.
	lines := jsonLines(t, mustCLI(t, "", "dlq", "list", "--data-dir", dir, "--json"))
	if len(lines) != 3 || !strings.Contains(fmt.Sprint(lines[0]["first_path"]), "\x1b]0;title\a\r\x00\u009bkey") {
		t.Errorf("dlq list --json: %d lines, first path %q; want 3 with the key as the model wrote it", len(lines), lines[0]["first_path"])
	}
}
