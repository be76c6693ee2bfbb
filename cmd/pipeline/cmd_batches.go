package main

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/llmpipeline/pipeline/batch"
	"github.com/llmpipeline/pipeline/heal"
	"github.com/llmpipeline/pipeline/ingest"
	"github.com/llmpipeline/pipeline/llm"
	"github.com/llmpipeline/pipeline/worker"
)

// batchFlags are run's batch-mode flags.
func batchFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "batch", EnvVars: []string{"PIPELINE_BATCH"},
			Usage: "send attempts through the provider's Batch API (OpenAI Batch, Anthropic Message Batches) at its discount, answered within 24 h; in-flight batches are kept on JetStream and resumed by any `pipeline run --batch`"},
		&cli.IntFlag{Name: "batch-size", Usage: "most requests per batch (0: the provider's limit or 1,000, whichever is lower; always under the provider's byte limit)"},
		&cli.DurationFlag{Name: "batch-wait", Value: batch.DefaultWait, Usage: "the longest a gathered request waits before its batch is submitted"},
		&cli.DurationFlag{Name: "batch-poll", Value: batch.DefaultPoll, Usage: "how often each batch's status is read"},
		&cli.StringFlag{Name: "batch-heal", Value: batch.HealBatch, Usage: "where heal turns go: batch (the next batch, at the discount) or sync (the ordinary endpoint, at full price, sooner)"},
	}
}

// serveBatch runs the workers with a batch runner as their handler. With
// --until-idle it returns once the jobs stream is idle and no job is held
// by batch mode, every outcome indexed.
func (e *env) serveBatch(ctx context.Context, c *cli.Context, conn *ingest.Conn, h ingest.Handler, bm builtModel, cfg worker.ServeConfig, paid func(heal.Usage), log *slog.Logger) error {
	b, err := llm.NewBatcher(bm.provider, bm.cfg)
	if err != nil {
		return fail(exitUsage, "--batch: %w", err)
	}
	kv, err := conn.BatchBucket(ctx)
	if err != nil {
		return err
	}
	run, err := batch.New(batch.Config{Batcher: b, Model: bm.name, KV: kv, Conn: conn, Inner: h,
		Size: c.Int("batch-size"), Wait: c.Duration("batch-wait"), Poll: c.Duration("batch-poll"), Heal: c.String("batch-heal"),
		TransportRetries: c.Int("transport-retries"), Paid: paid, Logger: log})
	if err != nil {
		return fail(exitUsage, "--batch: %w", err)
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); _ = run.Run(rctx) }()
	defer func() { cancel(); <-done }()
	untilIdle := cfg.Workers.UntilIdle
	if err := worker.Serve(ctx, conn, run, cfg); err != nil || !untilIdle {
		return err
	}
	// The jobs stream is idle; the batches are not, yet.
	t := time.NewTicker(max(c.Duration("batch-poll")/2, 10*time.Millisecond))
	defer t.Stop()
	for {
		n, err := run.Pending(ctx)
		if err != nil {
			return err
		}
		if n == 0 {
			break
		}
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
	cfg.NoWorkers = true // index what the batches stored
	return worker.Serve(ctx, conn, run, cfg)
}

func (e *env) batchesCommand() *cli.Command {
	return &cli.Command{
		Name:  "batches",
		Usage: "list the provider batches in flight and recently ended (batch mode)",
		Flags: flags(natsFlags(), []cli.Flag{&cli.BoolFlag{Name: "json", Usage: "one JSON object per batch per line"}}, logFlags()),
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
			if c.Bool("json") {
				enc := json.NewEncoder(e.stdout)
				for _, r := range recs {
					r.Requests = nil
					if err := enc.Encode(r); err != nil {
						return err
					}
				}
				return nil
			}
			tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "PROVIDER\tID\tSTATE\tSTATUS\tREQUESTS\tSUCCEEDED\tERRORED\tCREATED\tENDED")
			for _, r := range recs {
				ended := ""
				if !r.EndedAt.IsZero() {
					ended = r.EndedAt.Format(time.RFC3339)
				}
				id := r.ProviderID
				if id == "" {
					id = r.Key
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\n", r.Provider, id, r.State, r.Status.Status, len(r.Requests),
					r.Status.Counts.Succeeded, r.Status.Counts.Errored, r.CreatedAt.Format(time.RFC3339), ended)
			}
			return tw.Flush()
		},
		Subcommands: []*cli.Command{{
			Name:      "cancel",
			Usage:     "cancel a batch at its provider (its unanswered requests go into later batches)",
			ArgsUsage: "ID",
			Flags:     flags(natsFlags(), modelFlags(), logFlags()),
			Action: func(c *cli.Context) error {
				if c.NArg() != 1 {
					return fail(exitUsage, "batches cancel takes one batch id")
				}
				log, err := e.logger(c)
				if err != nil {
					return err
				}
				bm, err := e.buildModel(c, log, nil, newRunStatus(time.Now()))
				if err != nil {
					return err
				}
				b, err := llm.NewBatcher(bm.provider, bm.cfg)
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
				fmt.Fprintf(e.stdout, "%s %s: %s\n", st.Provider, st.ID, st.Status)
				return nil
			},
		}},
	}
}
