package main

import (
	"github.com/urfave/cli/v2"
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
