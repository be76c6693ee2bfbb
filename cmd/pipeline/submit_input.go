package main

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/llmpipeline/pipeline/internal/app"
	"github.com/schollz/progressbar/v3"
	"github.com/urfave/cli/v2"
)

// jobSource returns how to open the command's FILE argument (or stdin, for
// "-" or none) for each of the two passes, its name for messages, and the
// cleanup to defer. Stdin is copied to a temporary file first, since it
// can be read once only; on a terminal, a notice says it is being read.
func (e *env) jobSource(c *cli.Context) (app.Opener, string, func(), error) {
	nothing := func() {}
	if c.NArg() > 1 {
		return nil, "", nothing, fail(exitUsage, "expected at most one FILE argument, got %d: %q", c.NArg(), c.Args().Slice())
	}
	name := c.Args().First()
	if name != "" && name != "-" {
		f, err := os.Open(name)
		if err != nil {
			return nil, "", nothing, fail(exitUsage, "opening input: %w", err)
		}
		f.Close()
		return func() (io.ReadCloser, error) { return os.Open(name) }, name, nothing, nil
	}
	if e.terminal(e.stdin) {
		fmt.Fprintln(e.stderr, "pipeline: reading jobs (JSONL) from stdin; end with Ctrl-D, or pass a FILE")
	}
	tmp, err := os.CreateTemp("", "pipeline-submit-*.jsonl")
	if err != nil {
		return nil, "", nothing, fail(exitRuntime, "spooling stdin to a temporary file: %w", err)
	}
	cleanup := func() { os.Remove(tmp.Name()) }
	_, err = io.Copy(tmp, e.stdin)
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		cleanup()
		return nil, "", nothing, fail(exitUsage, "reading <stdin> into %s: %w", tmp.Name(), err)
	}
	path := tmp.Name()
	return func() (io.ReadCloser, error) { return os.Open(path) }, "<stdin>", cleanup, nil
}

// progress returns a callback that draws a progress bar on a terminal
// (stderr), or nil when stderr is not a terminal. -1 ends the bar.
func (e *env) progress(what string, total int) func(int) {
	if !e.terminal(e.stderr) {
		return nil
	}
	bar := progressbar.NewOptions(total, progressbar.OptionSetWriter(e.stderr), progressbar.OptionSetDescription(what),
		progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionSetItsString("jobs"),
		progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionSetPredictTime(true))
	return func(done int) {
		if done < 0 {
			_ = bar.Finish() // a terminal write; nothing to do if it fails
			fmt.Fprintln(e.stderr)
			return
		}
		_ = bar.Set(done)
	}
}
