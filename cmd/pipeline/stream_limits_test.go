package main

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestStreamLimitsWarnAboutUnindexedOutcomes: a --stream-max-bytes that
// discards outcomes the index has not indexed yet is never silent: submit
// (no sink) warns on applying it, and the sink warns when it finds them
// gone.
func TestStreamLimitsWarnAboutUnindexedOutcomes(t *testing.T) {
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
	run := []string{"run", "--data-dir", dir, "--until-idle", "--sim-latency", "0"}
	mustCLI(t, "", "submit", "--data-dir", dir, jobs("a", 20))
	mustCLI(t, "", run...) // indexed
	mustCLI(t, "", "submit", "--data-dir", dir, jobs("b", 20))
	mustCLI(t, "", append(run, "--sink=false")...) // on the streams, not indexed

	_, errs, code := runCLI(t, "", "submit", "--data-dir", dir, "--stream-max-bytes", "2KiB", jobs("c", 1))
	if code != 0 {
		t.Fatalf("submit: exit %d: %s", code, errs)
	}
	lost := regexp.MustCompile(`level=WARN msg="stream limits discarded outcomes the index had not indexed yet.*stream=(RESULTS|DLQ) lost=([1-9]\d*)`)
	if !lost.MatchString(errs) {
		t.Errorf("submit applying --stream-max-bytes did not warn about the unindexed outcomes it discarded:\n%s", errs)
	}

	_, errs, code = runCLI(t, "", run...)
	if code != 0 {
		t.Fatalf("run: exit %d: %s", code, errs)
	}
	if !regexp.MustCompile(`level=WARN msg="sink: outcomes left the stream before they were indexed.*lost=[1-9]`).MatchString(errs) {
		t.Errorf("the sink did not warn about outcomes gone before it indexed them:\n%s", errs)
	}

	// Limits are kept by a command that does not set them.
	out := mustCLI(t, "", "results", "--data-dir", dir)
	if n := len(jsonLines(t, out)); n > 3 {
		t.Errorf("%d results on RESULTS after --stream-max-bytes 2KiB: the limit was not applied", n)
	}
}
