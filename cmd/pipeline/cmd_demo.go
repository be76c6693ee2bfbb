package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/llmpipeline/pipeline/examples"
	"github.com/llmpipeline/pipeline/internal/app"
	"github.com/llmpipeline/pipeline/internal/config"
	"github.com/llmpipeline/pipeline/internal/queue"
)

func (e *env) demoCommand() *cli.Command {
	fs := flags(config.BrokerFlags(), config.WorkerFlags(), config.BudgetFlags(), config.ModelFlags(), config.CostFlags(), []cli.Flag{config.SchemasFlag()}, config.LogFlags())
	setDefault(fs, "data-dir", "")
	setDefault(fs, "concurrency", 64)
	setDefault(fs, "sim-latency", 50*time.Millisecond)
	return &cli.Command{
		Name:  "demo",
		Usage: "run the whole pipeline on the example jobs with the simulated model, then print stats and the report",
		Description: `Starts an embedded NATS server and a SQLite index in a fresh data directory (a new temporary one
unless --data-dir), submits the example jobs shipped with pipeline (invoices, support tickets and
shipment notices over three built-in schemas), runs the workers until idle with the built-in
simulated model, and prints the stats and the failure report. The simulator never satisfies
'pattern' keywords, so the report shows shipment's tracking_code as a field it cannot satisfy.
Every other command works on the data directory afterwards (pipeline dlq list --data-dir DIR).`,
		ArgsUsage: " ",
		Flags:     fs,
		Action: func(c *cli.Context) error {
			if conf(c).Broker.DataDir == "" {
				dir, err := os.MkdirTemp("", "pipeline-demo-")
				if err != nil {
					return fail(exitRuntime, "creating a data directory: %w", err)
				}
				if err := c.Set("data-dir", dir); err != nil {
					return err
				}
			}
			if err := c.Set("until-idle", "true"); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
			defer stop()
			fmt.Fprintf(e.stdout, "data dir: %s\n", conf(c).Broker.DataDir)

			log, err := e.logger(c)
			if err != nil {
				return err
			}
			reg, err := app.LoadSchemas(conf(c), c.App.ErrWriter)
			if err != nil {
				return err
			}
			jc, src := app.NewJobCheck(reg, queue.DefaultMaxJobBytes), app.BytesSource(examples.Jobs())
			defer jc.Close()
			var bad []string
			err = jc.ScanFrom(src, func(n int, reason string) { bad = append(bad, fmt.Sprintf("line %d: %s", n, reason)) })
			if err != nil || len(bad) > 0 {
				return fail(exitRuntime, "example jobs do not match the schemas (%d bad lines: %v): %v", len(bad), bad, err)
			}
			conn, err := e.connect(ctx, c, log)
			if err != nil {
				return err
			}
			stats, err := app.SubmitChecked(ctx, conn, jc, src, app.RerunNone, e.progress("submitted", jc.Valid))
			conn.Close()
			if err != nil {
				return withCode(exitRuntime, err)
			}
			fmt.Fprintf(e.stdout, "submitted %d example jobs (%d already there)\n", stats.Published, stats.Duplicates)

			start := time.Now()
			if err := e.serve(ctx, c); err != nil {
				return err
			}
			fmt.Fprintf(e.stdout, "processed in %s\n\n", time.Since(start).Round(time.Millisecond))

			st, err := app.OpenStore(conf(c), false)
			if err != nil {
				return err
			}
			defer st.Close()
			if err := e.printStats(c.Context, st, false); err != nil {
				return err
			}
			fmt.Fprintln(e.stdout)
			if err := e.printReport(c, st, reg, "table"); err != nil {
				return err
			}
			dir := conf(c).Broker.DataDir
			fmt.Fprintf(e.stdout, "\nexplore: pipeline ui --data-dir %s   (the console in a browser)\n"+
				"         pipeline dlq list --data-dir %s   |   pipeline report --format html --data-dir %s > report.html\n",
				dir, dir, dir)
			return nil
		},
	}
}

// setDefault changes the default value of one flag in a list.
func setDefault(fs []cli.Flag, name string, v any) {
	for _, f := range fs {
		if f.Names()[0] != name {
			continue
		}
		switch f := f.(type) {
		case *cli.StringFlag:
			f.Value = v.(string)
		case *cli.IntFlag:
			f.Value = v.(int)
		case *cli.DurationFlag:
			f.Value = v.(time.Duration)
		default:
			panic(fmt.Sprintf("setDefault: flag %s has unsupported type %T", name, f))
		}
	}
}
