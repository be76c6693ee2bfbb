package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/llmpipeline/pipeline/index"
	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/queue"
	"github.com/llmpipeline/pipeline/internal/sink"
	"github.com/llmpipeline/pipeline/job"
)

// ServeConfig configures Serve.
type ServeConfig struct {
	Workers queue.WorkerConfig
	// Store, if set, is the SQLite index the sink writes; nil runs workers
	// only (on a cluster, one process runs the sink).
	Store *index.Store
	// SinkBatch is the number of outcomes written per transaction.
	SinkBatch int
	// SinkFlush bounds how long, after the workers stop, the sink may take
	// to store what they published (default 30s).
	SinkFlush time.Duration
	// NoWorkers runs the sink alone (one process per index on a cluster).
	NoWorkers bool
	// RetainMaxAge and RetainMaxRows bound the index (0: unbounded). A
	// retention pass runs at start and every RetainEvery (default 10m); it
	// logs a warning and counts the rows in a metric before deleting them.
	RetainMaxAge  time.Duration
	RetainMaxRows int
	RetainEvery   time.Duration
	Metrics       *Metrics
	Logger        *slog.Logger
	// Budget, if set, stops the workers once the run's spend reaches it:
	// nothing more is fetched, the jobs in flight finish and are stored,
	// and Serve returns a *BudgetError (errors.Is ErrBudget). The jobs not
	// started stay on the stream for the next run. The Handler's
	// Config.Budget must be the same.
	Budget *Budget
}

// Serve runs the workers and, with a Store, the sink, until ctx is done or,
// with Workers.UntilIdle, until nothing is left to do and every outcome is
// stored. The sink outlives the workers so that what they published is
// indexed before Serve returns.
func Serve(ctx context.Context, conn *broker.Conn, h queue.Handler, cfg ServeConfig) error {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if cfg.SinkFlush <= 0 {
		cfg.SinkFlush = 30 * time.Second
	}
	sinkCtx, stopSink := context.WithCancel(context.WithoutCancel(ctx))
	defer stopSink()
	// The stores' health: a failing NATS store closes the workers' gate
	// (before the breaker's), every failed write is counted.
	health := newStoreHealth(conn, cfg.Metrics, log)
	cfg.Workers.Gate = health.gate(cfg.Budget.gate(cfg.Workers.Gate))
	cfg.Workers.StoreFailed = health.publishFailed
	sinkDone := make(chan error, 1)
	var feed *sink.Sink
	if cfg.Store != nil {
		feed = sink.New(conn, &indexSink{st: cfg.Store, log: log, health: health}, sink.Config{Batch: cfg.SinkBatch, Logger: log})
		// The workers hand their outcomes straight to the sink; it reads
		// from the streams only what did not arrive that way.
		// A caller's own Stored hook sees every outcome too.
		stored := cfg.Workers.Stored
		cfg.Workers.Stored = func(m sink.Msg) {
			if stored != nil {
				stored(m)
			}
			feed.Offer(m)
		}
		go func() { sinkDone <- feed.Run(sinkCtx) }()
	} else {
		sinkDone <- nil
	}
	if m := cfg.Metrics; m != nil {
		done := cfg.Workers.AlreadyDone
		cfg.Workers.AlreadyDone = func(id string) {
			if done != nil {
				done(id)
			}
			m.AlreadyDone.Inc()
		}
	}
	// Background helpers stop with the sink, and Serve waits for them, so
	// none of them touches the store after Serve returns.
	var bg sync.WaitGroup
	bg.Go(func() { health.watch(sinkCtx) })
	if cfg.Metrics != nil {
		bg.Go(func() { pollPending(sinkCtx, conn, cfg.Store, cfg.Metrics, log) })
	}
	if cfg.Store != nil && (cfg.RetainMaxAge > 0 || cfg.RetainMaxRows > 0) {
		bg.Go(func() { retain(sinkCtx, cfg, log) })
	}

	var werr error
	switch {
	case !cfg.NoWorkers:
		werr = queue.RunWorkers(ctx, conn, cfg.Workers, h)
		var be *BudgetError
		if errors.As(werr, &be) {
			werr = be // the workers stopped at the gate: say only why
		}
	case !cfg.Workers.UntilIdle:
		<-ctx.Done()
	}

	if cfg.Store != nil {
		// Let the sink catch up with what the workers published, bounded.
		flushCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), cfg.SinkFlush)
		if err := feed.Idle(flushCtx); err != nil {
			log.Warn("sink did not catch up before stopping; the rest stays in the streams and is indexed by the next run", "err", err)
		}
		cancel()
	}
	stopSink()
	// Everything below honours its context; a call the broker never
	// answers (a stream without a leader) must still not keep the process
	// from exiting: what the sink did not index stays in the streams.
	stopped := make(chan struct{})
	go func() { bg.Wait(); close(stopped) }()
	var serr error
	wait := time.NewTimer(stopWait)
	defer wait.Stop()
	for sinkDone != nil || stopped != nil {
		select {
		case serr = <-sinkDone:
			sinkDone = nil
		case <-stopped:
			stopped = nil
		case <-wait.C:
			log.Error("the sink or a background task did not stop in time; exiting without it (the streams keep every outcome; the next run indexes the rest)", "waited", stopWait)
			return werr
		}
	}
	if serr != nil && !errors.Is(serr, context.Canceled) {
		serr = fmt.Errorf("sink: %w", serr)
	} else {
		serr = nil
	}
	return errors.Join(werr, serr)
}

// stopWait bounds how long Serve waits for the sink and its background
// tasks once they were told to stop.
const stopWait = 10 * time.Second

// Index returns the SQLite index as the sink writes it: RESULTS and DLQ
// messages decoded into outcomes (or taken as the worker of the same
// process built them) and stored with the stream cursors in one
// transaction. An error means nothing of the batch is stored. A message
// that is not an outcome cannot be stored at all: it is logged and skipped
// rather than blocking the sink forever.
func Index(st *index.Store, log *slog.Logger) sink.Index {
	return &indexSink{st: st, log: log}
}

type indexSink struct {
	st     *index.Store
	log    *slog.Logger
	health *storeHealth // nil: not watched
}

func (x *indexSink) Cursors(ctx context.Context) (map[string]uint64, error) {
	return x.st.Cursors(ctx)
}

func (x *indexSink) Write(ctx context.Context, batch []sink.Msg, cursors map[string]uint64) error {
	outs := make([]job.Outcome, 0, len(batch))
	for _, msg := range batch {
		if rec, ok := msg.Record.(*job.Outcome); ok {
			o := *rec // handed over by this process's worker, with its message
			o.Encoded = msg.Data
			outs = append(outs, o)
			continue
		}
		o, err := job.DecodeOutcome(msg.Data)
		if err != nil {
			x.log.Error("sink: skipping a message that is not an outcome", "subject", msg.Subject, "stream", msg.Stream, "seq", msg.Sequence, "err", err)
			continue
		}
		outs = append(outs, o)
	}
	err := x.st.WriteWithCursors(ctx, outs, cursors)
	if ctx.Err() == nil {
		x.health.indexWritten(x.st.Path(), err)
	}
	if err != nil {
		return fmt.Errorf("writing %d outcomes to %s: %w", len(outs), x.st.Path(), err)
	}
	return nil
}

func pollPending(ctx context.Context, conn *broker.Conn, st *index.Store, m *Metrics, log *slog.Logger) {
	t := time.NewTicker(5 * time.Second)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		p, err := queue.Pending(ctx, conn)
		if err != nil {
			log.Debug("reading consumer state", "err", err)
			continue
		}
		m.Pending.Set(float64(p.Pending))
		m.AckPending.Set(float64(p.AckPending))
		if st != nil {
			if s, err := st.Stats(ctx, index.Filter{}); err == nil {
				m.DLQRows.Set(float64(s.DeadLettered))
			}
		}
	}
}

// retain runs retention passes until ctx is done. Nothing is trimmed
// silently: every pass that deletes warns with the counts first and adds
// them to the retention metric.
func retain(ctx context.Context, cfg ServeConfig, log *slog.Logger) {
	every := cfg.RetainEvery
	if every <= 0 {
		every = 10 * time.Minute
	}
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		if err := RetainOnce(ctx, cfg.Store, cfg.RetainMaxAge, cfg.RetainMaxRows, cfg.Metrics, log); err != nil && ctx.Err() == nil {
			log.Error("dead-letter retention", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// RetainOnce plans one retention pass, warns and meters what it will
// delete, then deletes it.
func RetainOnce(ctx context.Context, st *index.Store, maxAge time.Duration, maxRows int, m *Metrics, log *slog.Logger) error {
	plan, err := st.Retain(ctx, maxAge, maxRows)
	if err != nil {
		return err
	}
	if plan.Empty() {
		return nil
	}
	log.Warn("retention: deleting outcomes from the index (the streams keep their copies)",
		"dead_letters", len(plan.DeadLetters), "succeeded", plan.Succeeded,
		"by_age", plan.ByAge, "by_rows", plan.ByRows, "max_age", maxAge, "max_rows", maxRows)
	if m != nil {
		m.RetentionTrim.Add(float64(len(plan.DeadLetters)))
	}
	_, err = st.Apply(ctx, plan)
	return err
}
