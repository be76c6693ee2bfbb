package main

import (
	"context"
	"fmt"
	"log/slog"
	"text/tabwriter"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/urfave/cli/v2"

	"github.com/llmpipeline/pipeline/batch"
	"github.com/llmpipeline/pipeline/heal"
	"github.com/llmpipeline/pipeline/ingest"
	"github.com/llmpipeline/pipeline/internal/app"
	"github.com/llmpipeline/pipeline/internal/escape"
	"github.com/llmpipeline/pipeline/llm"
	"github.com/llmpipeline/pipeline/worker"
)

// batchFlags are run's batch-mode flags.
func batchFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "batch", EnvVars: []string{"PIPELINE_BATCH"},
			Usage: "send attempts through the provider's Batch API (OpenAI Batch, Anthropic Message Batches) at its discount, answered within 24 h; in-flight batches are kept on JetStream and resumed by any 'pipeline run --batch'"},
		&cli.IntFlag{Name: "batch-size", Usage: "most requests per batch (0: the provider's limit or 1,000, whichever is lower; always under the provider's byte limit)"},
		&cli.DurationFlag{Name: "batch-wait", Value: batch.DefaultWait, Usage: "the longest a gathered request waits before its batch is submitted"},
		&cli.DurationFlag{Name: "batch-poll", Value: batch.DefaultPoll, Usage: "how often each batch's status is read"},
		&cli.StringFlag{Name: "batch-heal", Value: batch.HealBatch, Usage: "where heal turns go: batch (the next batch, at the discount) or sync (the ordinary endpoint, at full price, sooner)"},
	}
}

// batchReport is where batch mode reports: the metrics registry (nil
// without --metrics-addr) and the run's status (the progress line).
type batchReport struct {
	reg    *prometheus.Registry
	status *app.Status
}

// serveBatch runs the workers with a batch runner as their handler. With
// --until-idle it returns once the jobs stream is idle and no job is held
// by batch mode, every outcome indexed.
func (e *env) serveBatch(ctx context.Context, c *cli.Context, conn *ingest.Conn, h ingest.Handler, bm builtModel, cfg worker.ServeConfig, paid func(heal.Usage), rep batchReport, log *slog.Logger) error {
	b, err := llm.NewBatcher(bm.provider, bm.cfg)
	if err != nil {
		return fail(exitUsage, "--batch: %w", err)
	}
	if ps, ok := b.(paramSharer); ok {
		// Every batch is written without a parameter the fleet was refused.
		shareParams(ctx, conn, log, []builtModel{{params: ps}})
	}
	kv, err := conn.BatchBucket(ctx)
	if err != nil {
		return err
	}
	var observe func(batch.Event)
	if rep.reg != nil {
		observe = newBatchRequests(rep.reg, b.Provider()).observe
	}
	run, err := batch.New(batch.Config{Batcher: b, Model: bm.name, KV: kv, Conn: conn, Inner: h,
		Size: c.Int("batch-size"), Wait: c.Duration("batch-wait"), Poll: c.Duration("batch-poll"), Heal: c.String("batch-heal"),
		TransportRetries: c.Int("transport-retries"), Paid: paid, Observe: observe, Logger: log,
		// The run's status counts the batches' outcomes too (its summary
		// line, its progress); the sink reads them from the streams.
		Stored: cfg.Workers.Stored})
	if err != nil {
		return fail(exitUsage, "--batch: %w", err)
	}
	census := run.Census
	if rep.reg != nil {
		if err := rep.reg.Register(newBatchCollector(census)); err != nil {
			return fmt.Errorf("registering the batch metrics: %w", err)
		}
	}
	if rep.status != nil {
		rep.status.SetCensus(census)
	}
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	go func() { defer close(done); _ = run.Run(rctx) }()
	defer func() { cancel(); <-done }()
	// An account-level failure of the batch endpoints (a refused key on
	// upload, while polling or reading results) stops the workers as a
	// refused synchronous call does: no job is dead-lettered, the jobs
	// and the batches in flight wait for the next run.
	wctx, stopWorkers := context.WithCancel(ctx)
	defer stopWorkers()
	go func() {
		select {
		case <-run.Stopped():
			stopWorkers()
		case <-wctx.Done():
		}
	}()
	untilIdle := cfg.Workers.UntilIdle
	err = worker.Serve(wctx, conn, run, cfg)
	if rerr := run.Err(); rerr != nil {
		return fmt.Errorf("batch mode: %w", rerr)
	}
	if err != nil || !untilIdle {
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
		case <-run.Stopped():
			return fmt.Errorf("batch mode: %w", run.Err())
		case <-t.C:
		}
	}
	cfg.NoWorkers = true // index what the batches stored
	return worker.Serve(ctx, conn, run, cfg)
}

func (e *env) batchesCommand() *cli.Command {
	return &cli.Command{
		Name:  "batches",
		Usage: "list the provider batches in flight and ended in the last 24 hours (batch mode)",
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
				enc := e.jsonEncoder()
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
			Flags:     flags(natsFlags(), modelFlags(), logFlags()),
			Action: func(c *cli.Context) error {
				if c.NArg() != 1 {
					return fail(exitUsage, "batches cancel takes one batch id")
				}
				log, err := e.logger(c)
				if err != nil {
					return err
				}
				bm, err := e.buildModel(c, log, nil, app.NewStatus(time.Now()))
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
				fmt.Fprintf(e.stdout, "%s %s: %s\n", escape.Line(st.Provider), escape.Line(st.ID), escape.Line(st.Status))
				return nil
			},
		}},
	}
}

// reasonCell is a batch's reason in the table: one line, "-" when none.
func reasonCell(s string) string {
	if s = oneLine(s); s == "" {
		return "-"
	}
	return s
}

// batchRequests counts batch mode's requests by outcome
// (pipeline_batch_requests_total).
type batchRequests struct {
	total *prometheus.CounterVec
}

// newBatchRequests registers the counter with reg, every outcome of
// provider at 0 so a dashboard sees the series before the first answer.
func newBatchRequests(reg prometheus.Registerer, provider string) batchRequests {
	m := batchRequests{total: prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "pipeline_batch_requests_total",
		Help: "Requests answered by provider batches (or left unanswered), by provider and outcome: result and dead_letter (the job ended), heal (a heal turn follows), retry (failed inside the batch, sent again), requeued (unanswered by an expired, cancelled or never created batch, sent again).",
	}, []string{"provider", "outcome"})}
	reg.MustRegister(m.total)
	for _, o := range batch.Outcomes() {
		m.total.WithLabelValues(provider, o)
	}
	return m
}

// observe is the runner's Config.Observe: one count per request outcome.
func (m batchRequests) observe(ev batch.Event) {
	if ev.Outcome != "" {
		m.total.WithLabelValues(ev.Provider, ev.Outcome).Inc()
	}
}

// batchCollector reads the runner's census on each scrape: the fleet's
// batches as the last poll of the bucket counted them (every
// --batch-poll), updated at once by this process's own writes. A scrape
// does no I/O, and every process of the fleet reports the same numbers.
type batchCollector struct {
	census  func() batch.Census
	batches *prometheus.Desc
	waiting *prometheus.Desc
}

func newBatchCollector(census func() batch.Census) batchCollector {
	return batchCollector{
		census: census,
		batches: prometheus.NewDesc("pipeline_batches",
			"Batches kept in the PIPELINE_BATCHES bucket (the fleet's, whichever process made them), by provider, state (submitting, submitted, collecting, ended, abandoned) and status (the provider's word: validating, in_progress, finalizing, completed, expired, cancelled, failed, ended...; empty before the provider has the batch).",
			[]string{"provider", "state", "status"}, nil),
		waiting: prometheus.NewDesc("pipeline_batch_requests_waiting",
			"Requests of batch mode waiting for an answer, fleet-wide: in batches not settled yet (where=batch) or queued for the next batch (where=queue).",
			[]string{"where"}, nil),
	}
}

func (c batchCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.batches
	ch <- c.waiting
}

func (c batchCollector) Collect(ch chan<- prometheus.Metric) {
	cs := c.census()
	for k, n := range cs.Batches {
		ch <- prometheus.MustNewConstMetric(c.batches, prometheus.GaugeValue, float64(n), k.Provider, k.State, k.Status)
	}
	ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(cs.InBatches), "batch")
	ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(cs.Queued), "queue")
}
