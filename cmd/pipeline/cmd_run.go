package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/llmpipeline/pipeline/internal/app"
	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/config"
)

func (e *env) runCommand() *cli.Command {
	return &cli.Command{
		Name:      "run",
		Usage:     "run workers (and the sink) on the jobs stream",
		ArgsUsage: " ",
		Flags:     config.RunFlags(),
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return fail(exitUsage, "run takes no arguments, got %q", c.Args().First())
			}
			ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
			defer stop()
			return e.serve(ctx, c)
		},
	}
}

// serve runs the workers (and the sink) with the command's settings
// (app.Run), its connections tracked by the CLI.
func (e *env) serve(ctx context.Context, c *cli.Context) error {
	log, err := e.logger(c)
	if err != nil {
		return err
	}
	return app.Run(ctx, conf(c), app.Runtime{Log: log, Stdout: e.stdout, Stderr: e.stderr, Terminal: e.terminal(e.stderr), Secrets: e.secrets,
		Connect: func(ctx context.Context, log *slog.Logger) (*broker.Conn, error) { return e.connect(ctx, c, log) }})
}
