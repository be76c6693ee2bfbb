package main

import (
	"os"
	"os/signal"
	"syscall"

	"github.com/urfave/cli/v2"

	"github.com/llmpipeline/pipeline/internal/app"
	"github.com/llmpipeline/pipeline/internal/config"
	"github.com/llmpipeline/pipeline/ui"
)

func (e *env) uiCommand() *cli.Command {
	return &cli.Command{
		Name:  "ui",
		Usage: "serve the operators' console: overview, clusters, dead letters and their transcripts, schemas; replay and purge",
		Description: `Serves the console over the index and the streams (the embedded server, joined or started, or
--nats-url). Pages: / (overview, refreshes by itself), /clusters, /clusters/ID, /dead-letters (filters
as 'dlq list'), /dead-letters/JOB_ID (the whole transcript), /schemas; /api/overview is the overview
as JSON. Replay and purge do what 'dlq replay' and 'dlq purge' do, after a dry run shown for
confirmation; each is logged at warn level. It binds to loopback by default; any other address
needs --token (16 characters at least). It answers only requests addressed to it: its address, the loopback
names when bound to loopback, and names given with --ui-host. Secrets the process knows are never shown. 'pipeline run --ui-addr' serves the same
console inside the workers' process.`,
		ArgsUsage: " ",
		Flags: flags(config.BrokerFlags(), config.StoreFlags(), []cli.Flag{config.SchemasFlag(),
			&cli.StringFlag{Name: "addr", Aliases: []string{"ui-addr"}, EnvVars: []string{"PIPELINE_UI_ADDR"}, Value: "127.0.0.1:8080", Usage: "address to serve the console on"},
			&cli.StringFlag{Name: "token", Aliases: []string{"ui-token"}, EnvVars: []string{"PIPELINE_UI_TOKEN"}, Usage: config.ConsoleTokenUsage},
			&cli.StringSliceFlag{Name: "ui-host", EnvVars: []string{"PIPELINE_UI_HOST"}, Usage: config.ConsoleHostUsage},
			&cli.BoolFlag{Name: "read-only", Aliases: []string{"ui-read-only"}, EnvVars: []string{"PIPELINE_UI_READ_ONLY"}, Usage: "show everything, allow no replay or purge"},
		}, config.SchemaLimitFlags(), config.LogFlags()),
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return fail(exitUsage, "ui takes no arguments, got %q", c.Args().First())
			}
			cfg := conf(c)
			if err := ui.CheckAddr(cfg.Console.Addr, cfg.Console.Token); err != nil {
				return fail(exitUsage, "--addr: %w", err)
			}
			// Nothing is created on a data dir without pipeline data: a wrong
			// --data-dir is said, not served empty.
			createIndex, err := app.ConsoleIndex(cfg)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
			defer stop()
			conn, log, err := e.dial(c)
			if err != nil {
				return err
			}
			defer conn.Close()
			st, err := app.OpenStore(cfg, createIndex)
			if err != nil {
				return err
			}
			defer st.Close()
			stopUI, err := app.StartConsole(cfg, cfg.Console, st, conn, nil, e.secrets, e.stdout, log)
			if err != nil {
				return err
			}
			<-ctx.Done()
			stopUI()
			return nil
		},
	}
}
