package main

import (
	"strings"
	"testing"
)

// TestHelpFlag: `pipeline --help` and `-h`, which every error message
// points to, print the commands on stdout and exit 0, as do a command's
// and a subcommand's --help; `help run` shows --batch as a flag, not a
// placeholder taken from the usage text.
func TestHelpFlag(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--help"}, "COMMANDS:"},
		{[]string{"-h"}, "COMMANDS:"},
		{[]string{"run", "--help"}, "pipeline run - run workers"},
		{[]string{"dlq", "--help"}, "pipeline dlq - inspect and act on dead letters"},
		{[]string{"dlq", "show", "-h"}, "pipeline dlq show - show one job's whole transcript"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			out, errs, code := runCLI(t, "", tc.args...)
			if code != 0 || !strings.Contains(out, tc.want) || errs != "" {
				t.Errorf("exit %d, stdout has %q: %v, stderr %q", code, tc.want, strings.Contains(out, tc.want), errs)
			}
		})
	}
	out := mustCLI(t, "", "help", "run")
	for _, l := range strings.Split(out, "\n") {
		if f := strings.Fields(l); len(f) > 1 && f[0] == "--batch" && f[1] == "pipeline" {
			t.Errorf("help run shows a placeholder taken from the usage text: %q", l)
		}
	}
}
