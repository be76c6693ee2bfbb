package app

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/config"
	"github.com/llmpipeline/pipeline/internal/exit"
	"github.com/llmpipeline/pipeline/internal/ledger"
	"github.com/llmpipeline/pipeline/internal/queue"
	"github.com/llmpipeline/pipeline/internal/secret"
	"github.com/llmpipeline/pipeline/model"
	"github.com/llmpipeline/pipeline/worker"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// Runtime is what Run needs from the program that runs it besides the
// settings: its logger, where its notices and progress go, the secrets to
// redact from stored outcomes, and how it connects to NATS (the CLI
// tracks the connections it opens).
type Runtime struct {
	Log    *slog.Logger
	Stderr io.Writer
	// Terminal reports whether Stderr is a terminal: the progress bar is
	// drawn only on one.
	Terminal bool
	Secrets  *secret.Redactor
	// Connect connects to NATS (Connect, when nil).
	Connect func(ctx context.Context, log *slog.Logger) (*broker.Conn, error)
	// Stdout is where the console's address is printed (--ui-addr).
	Stdout io.Writer
}

// Run is `pipeline run`: it wires schemas, model, heal loop, NATS, the
// index and the workers from cfg, and runs them until idle or until ctx is
// done. Its error carries the exit code (package exit).
func Run(ctx context.Context, cfg *config.Config, rt Runtime) error {
	log := rt.Log
	reg, err := LoadRegistry(cfg)
	if err != nil {
		return err
	}
	if err := RefuseBroken(reg, cfg.Schemas.SkipBroken, log); err != nil {
		return err
	}
	var metrics *worker.Metrics
	var promReg *prometheus.Registry
	if addr := cfg.Workers.MetricsAddr; addr != "" {
		promReg = prometheus.NewRegistry()
		promReg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		metrics = worker.NewMetrics(promReg)
		stopMetrics, err := ServeMetrics(addr, promReg, log)
		if err != nil {
			return err
		}
		defer stopMetrics()
	}
	status := NewStatus(time.Now())
	deps := Deps{Log: log, Metrics: metrics, Status: status, Notice: rt.Stderr}
	stack, err := BuildStack(cfg, reg, deps, rt.Secrets)
	if err != nil {
		return err
	}
	bm, models, h := stack.Model, stack.Chain, stack.Handler
	name, breaker := bm.Name, bm.Breaker
	if err := SetMemoryLimit(cfg.Workers.MemoryLimit); err != nil {
		return err
	}
	if cfg.Workers.Concurrency < 0 {
		return exit.Fail(exit.Usage, "--concurrency must be at least 0, got %d", cfg.Workers.Concurrency)
	}
	if cfg.Workers.Concurrency == 0 && !cfg.Store.Sink {
		return exit.Fail(exit.Usage, "--concurrency 0 with --sink=false would do nothing")
	}
	if cfg.Workers.MaxDeliver < 1 {
		return exit.Fail(exit.Usage, "--max-deliver must be at least 1, got %d", cfg.Workers.MaxDeliver)
	}
	if _, err := MaxJobBytes(cfg); err != nil {
		return err // before connecting
	}

	connect := rt.Connect
	if connect == nil {
		connect = func(ctx context.Context, log *slog.Logger) (*broker.Conn, error) { return Connect(ctx, cfg, log) }
	}
	conn, err := connect(ctx, log)
	if err != nil {
		return err
	}
	defer conn.Close()
	h.UseFiles(conn.Payloads())
	ShareParams(ctx, conn, log, append([]BuiltModel{bm}, models.Limited...))
	if cfg.Workers.Concurrency > 0 {
		leave, err := stack.ShareLimits(ctx, conn, log)
		if err != nil {
			return err
		}
		defer leave()
	}
	if !cfg.Store.Sink {
		if err := WarnStreamLoss(ctx, cfg, conn, log); err != nil {
			return err
		}
	}

	sc, err := stack.ServeConfig(cfg, log)
	if err != nil {
		return err
	}
	// The status counts from the workers' own outcomes.
	sc.Workers.Stored, sc.Workers.Repeated = status.Stored, status.Repeated
	sc.Workers.AlreadyDone, sc.Workers.HandedBack = status.AlreadyDone, status.HandedBack
	sc.Metrics = metrics
	if cfg.Store.Sink {
		st, err := OpenStore(cfg, true)
		if err != nil {
			return err
		}
		defer st.Close()
		sc.Store = st
	}
	// Before any job is fetched: a ledger that misses ended runs would
	// have them answered again.
	if err := ReconcileLedger(ctx, cfg, conn, sc.Store, log); err != nil {
		return err
	}
	if cfg.Console.Addr != "" {
		stopUI, err := RunConsole(cfg, sc.Store, conn, breaker, rt.Secrets, rt.Stdout, log)
		if err != nil {
			return err
		}
		defer stopUI()
	}
	stopProgress := ShowProgress(ctx, rt.Stderr, rt.Terminal, status, func(ctx context.Context) (queue.PendingInfo, error) { return queue.Pending(ctx, conn) })
	if cfg.Batch.Enabled {
		err = ServeBatch(ctx, cfg, conn, status.Handler(h), bm, sc, models.BatchPaid(metrics, name), BatchReport{Registry: promReg, Status: status}, log)
	} else {
		err = worker.Serve(ctx, conn, status.Handler(h), sc)
	}
	stopProgress()
	if err == nil && !sc.NoWorkers {
		// Every outcome the workers stored is in the ledger: the next
		// start's reconciliation reads only what comes after.
		mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		if merr := ledger.New(conn).AdvanceMarks(mctx); merr != nil {
			log.Warn("the next start reads this run's outcomes again to reconcile the job ledger", "err", merr)
		}
		cancel()
	}
	if !sc.NoWorkers {
		// The end of the run, on stderr: what was handed back when it was
		// stopped, and the summary line.
		if ctx.Err() != nil {
			fmt.Fprintf(rt.Stderr, "stopped: %d jobs handed back\n", status.HandedBackCount())
		}
		fmt.Fprintln(rt.Stderr, SummaryLine(status.Snapshot(time.Now())))
	}
	if err == nil {
		return nil
	}
	if be := BudgetExit(err); be != nil {
		return be
	}
	switch model.KindOf(err) {
	case model.KindAuth:
		return &exit.Error{Code: exit.Auth, Err: fmt.Errorf("stopped taking jobs: %w", err)}
	case model.KindNoCredit:
		return &exit.Error{Code: exit.NoCredit, Err: fmt.Errorf("stopped taking jobs, none dead-lettered, the jobs stay queued for the next run: %w", err)}
	case model.KindNotFound:
		return &exit.Error{Code: exit.Runtime, Err: fmt.Errorf("stopped taking jobs, none dead-lettered: %w; check --llm-url (the base URL the path above starts with) and --model", err)}
	}
	return exit.WithCode(exit.Runtime, err)
}
