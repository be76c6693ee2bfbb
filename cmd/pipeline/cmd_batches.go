package main

import (
	"fmt"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/llmpipeline/pipeline/batch"
	"github.com/llmpipeline/pipeline/internal/app"
	"github.com/llmpipeline/pipeline/internal/config"
	"github.com/llmpipeline/pipeline/internal/escape"
	"github.com/llmpipeline/pipeline/llm"
)

func (e *env) batchesCommand() *cli.Command {
	return &cli.Command{
		Name:  "batches",
		Usage: "list the provider batches in flight and ended in the last 24 hours (batch mode)",
		Flags: flags(config.BrokerFlags(), []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "one JSON object per batch per line"}}, config.LogFlags()),
		Action: func(c *cli.Context) error {
			log, err := e.logger(c)
			if err != nil {
				return err
			}
			conn, err := e.connect(c.Context, c, log)
			if err != nil {
				return err
			}
			defer conn.Close()
			kv, err := conn.BatchBucket(c.Context)
			if err != nil {
				return err
			}
			recs, err := batch.Records(c.Context, kv)
			if err != nil {
				return err
			}
			if conf(c).Output.JSON {
				enc := jsonEncoder(e.stdout)
				for _, r := range recs {
					r.Requests = nil
					if err := enc.Encode(r); err != nil {
						return err
					}
				}
				return nil
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "PROVIDER\tID\tSTATE\tSTATUS\tREQUESTS\tSUCCEEDED\tERRORED\tCREATED\tENDED\tREASON")
			for _, r := range recs {
				ended := ""
				if !r.EndedAt.IsZero() {
					ended = r.EndedAt.Format(time.RFC3339)
				}
				id := r.ProviderID
				if id == "" {
					id = r.Key
				}
				l := escape.Line // the id, status and reason are the provider's words
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\n", l(r.Provider), l(id), l(r.State), l(r.Status.Status), len(r.Requests),
					r.Status.Counts.Succeeded, r.Status.Counts.Errored, r.CreatedAt.Format(time.RFC3339), ended, l(reasonCell(r.Reason())))
			}
			return tw.Flush()
		},
		Subcommands: []*cli.Command{{
			Name:      "cancel",
			Usage:     "cancel a batch at its provider (its unanswered requests go into later batches)",
			ArgsUsage: "ID",
			Flags:     flags(config.BrokerFlags(), config.ModelFlags(), config.LogFlags()),
			Action: func(c *cli.Context) error {
				if c.NArg() != 1 {
					return fail(exitUsage, "batches cancel takes one batch id")
				}
				log, err := e.logger(c)
				if err != nil {
					return err
				}
				cfg := conf(c)
				bm, err := app.BuildModel(cfg, cfg.Model.Spec, app.Deps{Log: log, Notice: e.stderr})
				if err != nil {
					return err
				}
				b, err := llm.NewBatcher(bm.Provider, bm.LLM)
				if err != nil {
					return fail(exitUsage, "--model: %w", err)
				}
				conn, err := e.connect(c.Context, c, log)
				if err != nil {
					return err
				}
				defer conn.Close()
				kv, err := conn.BatchBucket(c.Context)
				if err != nil {
					return err
				}
				st, err := batch.Cancel(c.Context, kv, b, c.Args().First())
				if err != nil {
					return withCode(exitRuntime, err)
				}
				fmt.Fprintf(e.stdout, "%s %s: %s\n", escape.Line(st.Provider), escape.Line(st.ID), escape.Line(st.Status))
				return nil
			},
		}},
	}
}

// reasonCell is a batch's reason in the table: one line, "-" when none.
func reasonCell(s string) string {
	if s = app.OneLine(s); s == "" {
		return "-"
	}
	return s
}
