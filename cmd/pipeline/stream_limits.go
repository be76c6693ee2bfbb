package main

import (
	"context"
	"log/slog"
	"os"

	"github.com/urfave/cli/v2"

	"github.com/llmpipeline/pipeline/index"
	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/sink"
)

// streamLimitFlags bound the RESULTS and DLQ streams. They are on the
// commands that feed the streams (run, submit); a command that does
// not set them leaves the streams' limits as they are.
func streamLimitFlags() []cli.Flag {
	return []cli.Flag{
		&cli.DurationFlag{Name: "stream-max-age", EnvVars: []string{"PIPELINE_STREAM_MAX_AGE"},
			Usage: "RESULTS and DLQ streams: the sink removes indexed outcomes older than this (e.g. 720h; 0: keep all); never one the index has not read. Unset: the streams keep their current limit (none when created)"},
		&cli.StringFlag{Name: "stream-max-bytes", EnvVars: []string{"PIPELINE_STREAM_MAX_BYTES"},
			Usage: "RESULTS and DLQ streams: keep at most this much each, the sink removing the oldest indexed outcomes (e.g. 10GiB; 0: no limit). Unset: the streams keep their current limit (none when created)"},
	}
}

// streamLimits reads the stream limit flags of the command: only those set
// (by flag or env var) change the streams.
func streamLimits(c *cli.Context) (broker.StreamLimits, error) {
	var lim broker.StreamLimits
	if c.IsSet("stream-max-age") {
		d := c.Duration("stream-max-age")
		if d < 0 {
			return lim, fail(exitUsage, "--stream-max-age %v: want 0 (keep all) or a positive duration", d)
		}
		lim.MaxAge = &d
	}
	if c.IsSet("stream-max-bytes") {
		n, err := parseBytes(c.String("stream-max-bytes"))
		if err != nil {
			return lim, fail(exitUsage, "--stream-max-bytes %q: %w", c.String("stream-max-bytes"), err)
		}
		lim.MaxBytes = &n
	}
	return lim, nil
}

// warnStreamLoss, after a command applied stream limits without running
// the sink, compares the streams with the index on this data dir (when
// there is one) and warns about outcomes the limits discarded before they
// were indexed. The sink, where it runs, warns about them itself.
func warnStreamLoss(ctx context.Context, c *cli.Context, conn *broker.Conn, log *slog.Logger) error {
	if !c.IsSet("stream-max-age") && !c.IsSet("stream-max-bytes") {
		return nil
	}
	p := dbPath(c)
	if _, err := os.Stat(p); err != nil {
		log.Warn("stream limits applied, and no index to compare them with: outcomes the sink has not read yet may be discarded", "index", p)
		return nil
	}
	st, err := index.Open(p)
	if err != nil {
		return withCode(exitRuntime, err)
	}
	defer st.Close()
	cur, err := st.Cursors(ctx)
	if err != nil {
		return withCode(exitRuntime, err)
	}
	_, err = sink.WarnUnindexedLoss(ctx, conn, cur, log)
	return withCode(exitRuntime, err)
}
