package app

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/llmpipeline/pipeline/batch"
	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/config"
	"github.com/llmpipeline/pipeline/internal/exit"
	"github.com/llmpipeline/pipeline/internal/queue"
	"github.com/llmpipeline/pipeline/llm"
	"github.com/llmpipeline/pipeline/model"
	"github.com/llmpipeline/pipeline/worker"
	"github.com/prometheus/client_golang/prometheus"
)

// BatchReport is where batch mode reports: the metrics registry (nil
// without --metrics-addr) and the run's status (the progress line).
type BatchReport struct {
	Registry *prometheus.Registry
	Status   *Status
}

// ServeBatch runs the workers with a batch runner as their handler. With
// --until-idle it returns once the jobs stream is idle and no job is held
// by batch mode, every outcome indexed.
func ServeBatch(ctx context.Context, cfg *config.Config, conn *broker.Conn, h queue.Handler, bm BuiltModel, sc worker.ServeConfig, paid func(model.Usage), rep BatchReport, log *slog.Logger) error {
	b, err := llm.NewBatcher(bm.Provider, bm.LLM)
	if err != nil {
		return exit.Fail(exit.Usage, "--batch: %w", err)
	}
	if ps, ok := b.(ParamSharer); ok {
		// Every batch is written without a parameter the fleet was refused.
		ShareParams(ctx, conn, log, []BuiltModel{{Params: ps}})
	}
	kv, err := conn.BatchBucket(ctx)
	if err != nil {
		return err
	}
	var observe func(batch.Event)
	if rep.Registry != nil {
		observe = newBatchRequests(rep.Registry, b.Provider()).observe
	}
	run, err := batch.New(batch.Config{Batcher: b, Model: bm.Name, KV: kv, Conn: conn, Inner: h,
		Size: cfg.Batch.Size, Wait: cfg.Batch.Wait, Poll: cfg.Batch.Poll, Heal: cfg.Batch.Heal,
		// bm.LLM's: the flag's 0 (none) is -1 there, which batch.Config reads as none too
		TransportRetries: bm.LLM.TransportRetries, Paid: paid, Observe: observe, Logger: log,
		// The run's status counts the batches' outcomes too (its summary
		// line, its progress); the sink reads them from the streams.
		Stored: sc.Workers.Stored, Repeated: sc.Workers.Repeated})
	if err != nil {
		return exit.Fail(exit.Usage, "--batch: %w", err)
	}
	census := run.Census
	if rep.Registry != nil {
		if err := rep.Registry.Register(newBatchCollector(census)); err != nil {
			return fmt.Errorf("registering the batch metrics: %w", err)
		}
	}
	if rep.Status != nil {
		rep.Status.SetCensus(census)
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
	untilIdle := sc.Workers.UntilIdle
	err = worker.Serve(wctx, conn, run, sc)
	if rerr := run.Err(); rerr != nil {
		return fmt.Errorf("batch mode: %w", rerr)
	}
	if err != nil || !untilIdle {
		return err
	}
	// The jobs stream is idle; the batches are not, yet.
	t := time.NewTicker(max(cfg.Batch.Poll/2, 10*time.Millisecond))
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
	sc.NoWorkers = true // index what the batches stored
	return worker.Serve(ctx, conn, run, sc)
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

// Describe is prometheus.Collector's.
func (c batchCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- c.batches
	ch <- c.waiting
}

// Collect is prometheus.Collector's: the census, read without I/O.
func (c batchCollector) Collect(ch chan<- prometheus.Metric) {
	cs := c.census()
	for k, n := range cs.Batches {
		ch <- prometheus.MustNewConstMetric(c.batches, prometheus.GaugeValue, float64(n), k.Provider, k.State, k.Status)
	}
	ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(cs.InBatches), "batch")
	ch <- prometheus.MustNewConstMetric(c.waiting, prometheus.GaugeValue, float64(cs.Queued), "queue")
}
