package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/urfave/cli/v2"
	"golang.org/x/net/http/httpguts"

	"github.com/llmpipeline/pipeline/batch"
	"github.com/llmpipeline/pipeline/heal"
	"github.com/llmpipeline/pipeline/ingest"
	"github.com/llmpipeline/pipeline/internal/app"
	"github.com/llmpipeline/pipeline/llm"
	"github.com/llmpipeline/pipeline/llm/ratelimit"
	"github.com/llmpipeline/pipeline/llm/sim"
	"github.com/llmpipeline/pipeline/worker"
)

func modelFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "model", EnvVars: []string{"PIPELINE_MODEL"}, Value: "sim",
			Usage: "openai:<model> (any OpenAI-compatible server), anthropic:<model>, or sim (the built-in simulator)"},
		&cli.StringSliceFlag{Name: "llm-header", EnvVars: []string{"PIPELINE_LLM_HEADERS"},
			Usage: "'Name: value' header sent with every request to --llm-url, after the provider's own (repeatable; in the variable, comma-separated): a gateway's key, Azure OpenAI's api-key. Values of 6 bytes or more are redacted like the API key"},
		&cli.StringFlag{Name: "llm-url", EnvVars: []string{"PIPELINE_LLM_URL"},
			Usage: "provider base URL (default: $OPENAI_BASE_URL or https://api.openai.com/v1 for openai; $ANTHROPIC_BASE_URL or https://api.anthropic.com for anthropic)"},
		&cli.StringFlag{Name: "response-format", Value: "json_object", Usage: "json_object, json_schema (the strict form of the job's schema: openai's strict response format, anthropic's structured outputs), tool (openai and anthropic: a forced tool call whose parameters are the job's schema) or none; anthropic sends plain text for json_object and none"},
		&cli.IntFlag{Name: "max-tokens", Value: 0, Usage: "completion token limit per call (0: 4096)"},
		&cli.DurationFlag{Name: "request-timeout", Value: 60 * time.Second, Usage: "timeout of one model call"},
		&cli.IntFlag{Name: "transport-retries", Value: 3, Usage: "retries of a model call after a transport failure (429, 5xx, timeouts); never counted as heal attempts"},
		&cli.DurationFlag{Name: "max-retry-after", EnvVars: []string{"PIPELINE_MAX_RETRY_AFTER"}, Value: llm.DefaultMaxRetryAfter,
			Usage: "longest wait kept when the provider asks for one (a 429 or 503 with Retry-After or retry-after-ms): the job is held, no delivery or transport retry spent, and the model's calls pause on every run process sharing its limit; a longer wait, or waits together longer in one call, are a transport failure naming the wait"},
		&cli.IntFlag{Name: "rpm", EnvVars: []string{"PIPELINE_RPM"},
			Usage: "most requests per minute (per --rate-window) sent to the model, by every run process on this model and key together (shared through NATS), spread evenly; the provider's rate-limit headers can only lower it (0: the headers alone decide)"},
		&cli.IntFlag{Name: "tpm", EnvVars: []string{"PIPELINE_TPM"},
			Usage: "most tokens per minute, counted as providers do before a call (prompt at 4 bytes a token, plus max tokens) and corrected by each answer's usage; shared like --rpm (0: the headers alone decide)"},
		&cli.DurationFlag{Name: "rate-window", Value: time.Minute,
			Usage: "the window --rpm and --tpm count over: --rpm 100 --rate-window 10s is 100 requests in any 10 seconds"},
		&cli.IntFlag{Name: "breaker-threshold", Value: 5, Usage: "consecutive transport failures that open the circuit breaker (stop fetching jobs)"},
		&cli.DurationFlag{Name: "breaker-cooldown", Value: 10 * time.Second, Usage: "how long the breaker stays open before letting one call through"},
		&cli.IntFlag{Name: "max-attempts", Value: 2, Usage: "model calls per job, at most (transport retries aside)"},
		&cli.Float64Flag{Name: "temperature", Value: 0.7, Usage: "temperature of the first attempt"},
		&cli.Float64Flag{Name: "temperature-step", Value: 0.2, Usage: "temperature decrease per attempt"},
		&cli.Float64Flag{Name: "temperature-floor", Value: 0.1, Usage: "lowest temperature"},
		&cli.StringFlag{Name: "heal-history", Value: "latest", Usage: "latest (only the latest failed output and its diagnostics go back to the model) or all"},
		&cli.IntFlag{Name: "max-diagnostics", Value: 20, Usage: "diagnostics shown to the model per attempt (the rest are counted)"},
		&cli.DurationFlag{Name: "sim-latency", Value: 100 * time.Millisecond, Usage: "sim: latency of each call"},
		&cli.Int64Flag{Name: "sim-seed", Value: 1, Usage: "sim: random seed"},
		&cli.Float64Flag{Name: "sim-fix-rate", Value: sim.DefaultConfig().FixRate, Usage: "sim: probability that each field named in the feedback gets fixed"},
		&cli.Float64Flag{Name: "sim-fault-scale", Value: 1, Usage: "sim: multiplies every fault rate (0: always valid on first pass)"},
		&cli.StringFlag{Name: "sim-force", Usage: "sim: force a failure class: truncated, grammar, transport, auth, request_error or no_progress"},
	}
}

func workerFlags() []cli.Flag {
	return []cli.Flag{
		&cli.IntFlag{Name: "concurrency", Aliases: []string{"c"}, EnvVars: []string{"PIPELINE_CONCURRENCY"}, Value: 16, Usage: "jobs in flight (0: no workers, run the sink alone)"},
		&cli.BoolFlag{Name: "until-idle", Usage: "exit once no job is pending or in flight and every outcome is stored"},
		&cli.DurationFlag{Name: "shutdown-grace", Value: 30 * time.Second, Usage: "on SIGINT/SIGTERM, how long in-flight jobs may finish before they are handed back to the stream"},
		&cli.DurationFlag{Name: "ack-wait", Value: 0, Usage: "how long the server waits for a worker before redelivering (0: max(30s, request-timeout/2); heartbeats every third of it keep long calls alive)"},
		&cli.IntFlag{Name: "max-deliver", Value: 5, Usage: "deliveries of one job before it is dead-lettered"},
		maxJobBytesFlag(),
		&cli.BoolFlag{Name: "sink", Value: true, Usage: "run the sink that writes the SQLite index (run it in exactly one process per index)"},
		&cli.StringFlag{Name: "db", EnvVars: []string{"PIPELINE_DB"}, Usage: "SQLite index file (default <data-dir>/pipeline.db)"},
		&cli.DurationFlag{Name: "dlq-max-age", Usage: "retention: delete outcomes older than this from the index (0: keep; a warning and a metric come first)"},
		&cli.IntFlag{Name: "dlq-max-rows", Usage: "retention: keep at most this many dead letters in the index, the newest (0: all)"},
		&cli.StringFlag{Name: "memory-limit", Value: "200MiB",
			Usage: "soft memory limit of the process (the Go runtime's GOMEMLIMIT, which wins when set; 0 or off: none). Keeps RSS flat at high --concurrency, the embedded server's caches included, for some extra GC CPU"},
		&cli.StringFlag{Name: "metrics-addr", EnvVars: []string{"PIPELINE_METRICS_ADDR"}, Usage: "serve Prometheus metrics on this address (/metrics), e.g. :9090"},
	}
}

func (e *env) runCommand() *cli.Command {
	return &cli.Command{
		Name:      "run",
		Usage:     "run workers (and the sink) on the jobs stream",
		ArgsUsage: " ",
		Flags: flags(natsFlags(), streamLimitFlags(), workerFlags(), budgetFlags(), modelFlags(), costFlags(), []cli.Flag{schemasFlag(),
			&cli.BoolFlag{Name: "skip-broken-schemas", EnvVars: []string{"PIPELINE_SKIP_BROKEN_SCHEMAS"},
				Usage: "start even when schema files of --schemas do not load: a warning per file, and their jobs are dead-lettered (unknown_schema, with the load error); without it, run refuses to start (exit 3)"},
		}, schemaLimitFlags(), uiFlags(), batchFlags(), logFlags()),
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

// serve wires schemas, model, heal loop, NATS, the index and the workers,
// and runs them until idle or until ctx is done.
func (e *env) serve(ctx context.Context, c *cli.Context) error {
	log, err := e.logger(c)
	if err != nil {
		return err
	}
	reg, err := loadRegistry(c)
	if err != nil {
		return err
	}
	if err := refuseBroken(reg, c.Bool("skip-broken-schemas"), log); err != nil {
		return err
	}
	var metrics *worker.Metrics
	var promReg *prometheus.Registry
	if addr := c.String("metrics-addr"); addr != "" {
		promReg = prometheus.NewRegistry()
		promReg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
		metrics = worker.NewMetrics(promReg)
		stopMetrics, err := serveMetrics(addr, promReg, log)
		if err != nil {
			return err
		}
		defer stopMetrics()
	}
	status := app.NewStatus(time.Now())
	bm, err := e.buildModel(c, log, metrics, status)
	if err != nil {
		return err
	}
	model, name, breaker := bm.model, bm.name, bm.breaker
	if c.Bool("batch") {
		model = &batch.Replay{Sync: model} // attempts go through provider batches (cmd_batches.go)
	}
	models, err := e.buildChain(c, log, metrics, status, model, name, breaker)
	if err != nil {
		return err
	}
	if c.Bool("batch") && c.String("response-format") == llm.FormatJSONSchema {
		// The batches' answers are replayed, not read by the client with
		// their request: they are mapped back from the strict schema here.
		models.primary = llm.StrictAnswers(models.primary, bm.provider)
	}
	loop, err := heal.New(models.primary, heal.Config{
		MaxAttempts:      c.Int("max-attempts"),
		Temperature:      c.Float64("temperature"),
		TemperatureStep:  c.Float64("temperature-step"),
		TemperatureFloor: c.Float64("temperature-floor"),
		MaxTokens:        c.Int("max-tokens"),
		History:          heal.History(c.String("heal-history")),
		MaxDiagnostics:   c.Int("max-diagnostics"),
		Logger:           log,
		Model:            name,
		Fallbacks:        models.fallbacks,
	})
	if err != nil {
		return fail(exitUsage, "%w", err)
	}
	if err := setMemoryLimit(c.String("memory-limit")); err != nil {
		return err
	}
	if c.Int("concurrency") < 0 {
		return fail(exitUsage, "--concurrency must be at least 0, got %d", c.Int("concurrency"))
	}
	if c.Int("concurrency") == 0 && !c.Bool("sink") {
		return fail(exitUsage, "--concurrency 0 with --sink=false would do nothing")
	}
	if c.Int("max-deliver") < 1 {
		return fail(exitUsage, "--max-deliver must be at least 1, got %d", c.Int("max-deliver"))
	}
	jobLimit, err := maxJobBytes(c)
	if err != nil {
		return err
	}

	h, err := worker.New(worker.Config{Schemas: reg, Loop: loop, Model: name, Metrics: metrics, Logger: log, Secrets: e.secrets,
		Cost: models.table.Cost, BatchCost: models.table.BatchCost, Budget: models.budget})
	if err != nil {
		return err
	}
	conn, err := e.connect(ctx, c, log)
	if err != nil {
		return err
	}
	defer conn.Close()
	shareParams(ctx, conn, log, append([]builtModel{bm}, models.limited...))
	if c.Int("concurrency") > 0 {
		// Limits apply per model: the fleet shares each model's, the
		// fallbacks' too.
		limited := models.limited
		if bm.limiter != nil {
			limited = append([]builtModel{bm}, limited...)
		}
		for _, m := range limited {
			leave, err := shareLimit(ctx, conn, m, log)
			if err != nil {
				return err
			}
			defer leave()
		}
	}
	if !c.Bool("sink") {
		if err := warnStreamLoss(ctx, c, conn, log); err != nil {
			return err
		}
	}

	cfg := worker.ServeConfig{
		Workers: ingest.WorkerConfig{
			Concurrency:   c.Int("concurrency"),
			AckWait:       ackWait(c),
			MaxDeliver:    c.Int("max-deliver"),
			ShutdownGrace: c.Duration("shutdown-grace"),
			UntilIdle:     c.Bool("until-idle"),
			MaxJobBytes:   jobLimit,
			Logger:        log,
			// The status counts from the workers' own outcomes.
			Stored:      status.Stored,
			Repeated:    status.Repeated,
			AlreadyDone: status.AlreadyDone,
			HandedBack:  status.HandedBack,
		},
		NoWorkers:     c.Int("concurrency") == 0,
		RetainMaxAge:  c.Duration("dlq-max-age"),
		RetainMaxRows: c.Int("dlq-max-rows"),
		Metrics:       metrics,
		Logger:        log,
	}
	cfg.Workers.Gate = models.gate // the breakers': fetch while any model of the chain takes calls
	cfg.Budget = models.budget
	if c.Bool("sink") {
		st, err := openStore(c, true)
		if err != nil {
			return err
		}
		defer st.Close()
		cfg.Store = st
	}
	// Before any job is fetched: a ledger that misses ended runs would
	// have them answered again.
	if err := reconcileLedger(ctx, c, conn, cfg.Store, log); err != nil {
		return err
	}
	if addr := c.String("ui-addr"); addr != "" {
		stopUI, err := e.runUI(c, cfg.Store, conn, breaker, log)
		if err != nil {
			return err
		}
		defer stopUI()
	}
	stopProgress := app.ShowProgress(ctx, e.stderr, e.terminal(e.stderr), status, conn.Pending)
	if c.Bool("batch") {
		err = e.serveBatch(ctx, c, conn, status.Handler(h), bm, cfg, models.batchPaid(metrics, name), batchReport{reg: promReg, status: status}, log)
	} else {
		err = worker.Serve(ctx, conn, status.Handler(h), cfg)
	}
	stopProgress()
	if err == nil && !cfg.NoWorkers {
		// Every outcome the workers stored is in the ledger: the next
		// start's reconciliation reads only what comes after.
		mctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
		if merr := conn.AdvanceLedgerMarks(mctx); merr != nil {
			log.Warn("the next start reads this run's outcomes again to reconcile the job ledger", "err", merr)
		}
		cancel()
	}
	if !cfg.NoWorkers {
		// The end of the run, on stderr: what was handed back when it was
		// stopped, and the summary line.
		if ctx.Err() != nil {
			fmt.Fprintf(e.stderr, "stopped: %d jobs handed back\n", status.HandedBackCount())
		}
		fmt.Fprintln(e.stderr, app.SummaryLine(status.Snapshot(time.Now())))
	}
	if err == nil {
		return nil
	}
	if be := budgetExit(err); be != nil {
		return be
	}
	switch heal.KindOf(err) {
	case heal.KindAuth:
		return &exitError{Code: exitAuth, Err: fmt.Errorf("stopped taking jobs: %w", err)}
	case heal.KindNoCredit:
		return &exitError{Code: exitNoCredit, Err: fmt.Errorf("stopped taking jobs, none dead-lettered, the jobs stay queued for the next run: %w", err)}
	case heal.KindNotFound:
		return &exitError{Code: exitRuntime, Err: fmt.Errorf("stopped taking jobs, none dead-lettered: %w; check --llm-url (the base URL the path above starts with) and --model", err)}
	}
	return withCode(exitRuntime, err)
}

// ackWait is the server's redelivery timer: a model call may take the whole
// request timeout, and heartbeats (a third of it) keep longer work alive.
func ackWait(c *cli.Context) time.Duration {
	return ackWaitFor(c.Duration("ack-wait"), c.Duration("request-timeout"))
}

// ackWaitFor is --ack-wait when set, else max(30s, request-timeout/2), as
// its help says.
func ackWaitFor(set, requestTimeout time.Duration) time.Duration {
	if set > 0 {
		return set
	}
	return max(30*time.Second, requestTimeout/2)
}

// builtModel is the model buildModel made: what the heal loop calls (the
// breaker around the rate limiter around the provider), its name, the
// breaker (the workers' fetch gate), and the limiter with the key its
// fleet shares (nil for the simulator without --rpm or --tpm).
type builtModel struct {
	model    heal.Model
	name     string
	breaker  *llm.Breaker
	limiter  *ratelimit.Limiter
	limitKey string
	provider string
	// cfg is the provider's configuration (for its batch endpoint).
	cfg llm.Config
	// params is the client that learns which parameters the model
	// refuses (OpenAI's), nil for the others.
	params paramSharer
}

// paramSharer is a client whose knowledge of refused parameters can be
// the fleet's (llm.OpenAI, llm.OpenAIBatch).
type paramSharer interface {
	ShareParams(ctx context.Context, mem llm.ParamMemory) error
}

// shareParams gives the models' clients the fleet's memory of the
// parameters their models refused (a KV bucket), so that no process sends
// one that another was refused. Without it each process learns alone: a
// warning, not a failure.
func shareParams(ctx context.Context, conn *ingest.Conn, log *slog.Logger, models []builtModel) {
	var clients []paramSharer
	for _, m := range models {
		if m.params != nil {
			clients = append(clients, m.params)
		}
	}
	if len(clients) == 0 {
		return
	}
	mem, err := conn.ModelParams(ctx)
	if err != nil {
		log.Warn("sharing the parameters models refused: each process learns its own", "err", err)
		return
	}
	for _, cl := range clients {
		if err := cl.ShareParams(ctx, mem); err != nil {
			log.Warn("reading the parameters models refused elsewhere in the fleet", "err", err)
		}
	}
}

// The fleet shares the pauses a provider asks for.
var _ ratelimit.Pauser = (*ingest.Fleet)(nil)

// shareLimit makes the limiter's budget the fleet's: this process joins
// the members of its limit key on NATS and takes its share. leave returns
// the share at once on the way out.
func shareLimit(ctx context.Context, conn *ingest.Conn, bm builtModel, log *slog.Logger) (leave func(), err error) {
	fleet, err := conn.JoinFleet(ctx, bm.limitKey)
	if err != nil {
		return nil, withCode(exitRuntime, fmt.Errorf("sharing the model's rate limit: %w", err))
	}
	bm.limiter.ShareWith(fleet)
	req, tok := bm.limiter.Rates()
	log.Info("rate limit shared", "provider", bm.provider, "members", fleet.Size(), "requests_per_second", req, "tokens_per_second", tok)
	return func() {
		lctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := fleet.Leave(lctx); err != nil {
			log.Warn("leaving the rate-limit fleet (the key expires on its own)", "err", err)
		}
	}, nil
}

// buildModel makes the model from --model and its flags. Keys come from the
// environment only, never from flags (flags end up in shell history and ps).
func (e *env) buildModel(c *cli.Context, log *slog.Logger, metrics *worker.Metrics, status *app.Status) (builtModel, error) {
	return e.buildModelSpec(c, c.String("model"), log, metrics, status)
}

// buildModelSpec makes the model of one spec (--model's or a
// --fallback-model's) with the model flags.
func (e *env) buildModelSpec(c *cli.Context, spec string, log *slog.Logger, metrics *worker.Metrics, status *app.Status) (builtModel, error) {
	provider, name, err := llm.Parse(spec)
	if err != nil {
		return builtModel{}, fail(exitUsage, "--model %q: %w", spec, err)
	}
	rpm, tpm := c.Int("rpm"), c.Int("tpm")
	if rpm < 0 || tpm < 0 {
		return builtModel{}, fail(exitUsage, "--rpm and --tpm must be at least 0, got %d and %d", rpm, tpm)
	}
	if c.Duration("max-retry-after") <= 0 {
		return builtModel{}, fail(exitUsage, "--max-retry-after must be positive, got %s", c.Duration("max-retry-after"))
	}
	if c.Duration("rate-window") <= 0 {
		return builtModel{}, fail(exitUsage, "--rate-window must be positive, got %s", c.Duration("rate-window"))
	}
	headers, err := llmHeaders(c, provider)
	if err != nil {
		return builtModel{}, err
	}
	cfg := llm.Config{
		Model:            name,
		Headers:          headers,
		Timeout:          c.Duration("request-timeout"),
		MaxTokens:        c.Int("max-tokens"),
		ResponseFormat:   c.String("response-format"),
		TransportRetries: c.Int("transport-retries"),
		MaxRetryAfter:    c.Duration("max-retry-after"),
		Logger:           log,
	}
	if cfg.TransportRetries == 0 {
		cfg.TransportRetries = -1 // the flag's 0 means none; the config's 0 means the default
	}
	// The limiter: always for the HTTP providers (their headers drive it
	// when no flag does), for the simulator only with a flag.
	var lim *ratelimit.Limiter
	if provider != llm.ProviderSim || rpm > 0 || tpm > 0 {
		lim, err = ratelimit.New(ratelimit.Config{
			Provider:  provider,
			RPM:       rpm,
			TPM:       tpm,
			Window:    c.Duration("rate-window"),
			MaxTokens: c.Int("max-tokens"),
			MaxPause:  c.Duration("max-retry-after"),
			Logger:    log,
			OnWait:    func(d time.Duration) { metrics.RateLimitWaited(provider, d) },
			OnMembers: func(n int) { metrics.SetRateLimitMembers(provider, n) },
		})
		if err != nil {
			return builtModel{}, fail(exitUsage, "--rpm/--tpm: %w", err)
		}
		cfg.OnResponse = lim.Observe
	}
	var m heal.Model
	var shared paramSharer
	switch provider {
	case "sim":
		sc := sim.DefaultConfig()
		sc.Latency = c.Duration("sim-latency")
		sc.Seed = c.Int64("sim-seed")
		sc.FixRate = c.Float64("sim-fix-rate")
		scale := c.Float64("sim-fault-scale")
		if scale < 0 {
			return builtModel{}, fail(exitUsage, "--sim-fault-scale must be >= 0, got %g", scale)
		}
		for _, r := range []*float64{&sc.FenceRate, &sc.ProseRate, &sc.TrailingCommaRate, &sc.WrongTypeRate, &sc.MissingRequiredRate, &sc.EnumNearMissRate} {
			*r = min(1, *r*scale)
		}
		sc.Force = c.String("sim-force")
		if !c.IsSet("model") {
			fmt.Fprintln(e.stderr, "pipeline: no --model given: using the built-in simulated model (a simulator for demos, rehearsal and load tests, not a real LLM)")
		}
		s, err := sim.New(sc)
		if err != nil {
			return builtModel{}, fail(exitUsage, "sim: %w", err)
		}
		m = s
		spec = "sim"
	case "openai":
		cfg.KeyEnv = "OPENAI_API_KEY"
		cfg.APIKey = os.Getenv(cfg.KeyEnv)
		cfg.BaseURL = firstNonEmpty(llmURL(c, provider), os.Getenv("OPENAI_BASE_URL"))
		o, err := llm.NewOpenAI(cfg)
		if err != nil {
			return builtModel{}, fail(exitUsage, "--model %s: %w", spec, err)
		}
		m, shared = o, o
	case "anthropic":
		cfg.KeyEnv = "ANTHROPIC_API_KEY"
		cfg.APIKey = os.Getenv(cfg.KeyEnv)
		cfg.BaseURL = firstNonEmpty(llmURL(c, provider), os.Getenv("ANTHROPIC_BASE_URL"))
		a, err := llm.NewAnthropic(cfg)
		if err != nil {
			return builtModel{}, fail(exitUsage, "--model %s: %w", spec, err)
		}
		m = a
	default:
		return builtModel{}, fail(exitUsage, "--model %q: unknown provider %q (use openai:<model>, anthropic:<model> or sim)", spec, provider)
	}
	bm := builtModel{name: spec, limiter: lim, provider: provider, cfg: cfg, params: shared}
	if lim != nil {
		bm.limitKey = ratelimit.Key(provider, cfg.BaseURL, name, cfg.APIKey)
		m = lim.Wrap(m)
	}
	b := llm.NewBreaker(m, llm.BreakerConfig{
		Threshold: c.Int("breaker-threshold"),
		Cooldown:  c.Duration("breaker-cooldown"),
		Logger:    log,
		OnState: func(state string) {
			// Runs under the breaker's lock: log and set a gauge, nothing more.
			if state == llm.StateClosed {
				log.Warn("model circuit breaker closed: taking jobs again", "provider", provider)
			} else {
				log.Warn("model circuit breaker "+state+": not taking jobs", "provider", provider, "cooldown", c.Duration("breaker-cooldown"))
			}
			metrics.SetBreaker(provider, state)
			if spec == c.String("model") {
				status.SetBreaker(state) // the progress line shows the primary's
			}
		},
	})
	metrics.SetBreaker(provider, llm.StateClosed)
	bm.model, bm.breaker = b, b
	return bm, nil
}

// llmURL is --llm-url for the provider of --model; a fallback model of
// another provider uses its own default (its *_BASE_URL variable).
func llmURL(c *cli.Context, provider string) string {
	if p, _, err := llm.Parse(c.String("model")); err == nil && p == provider {
		return c.String("llm-url")
	}
	return ""
}

// llmHeaders is --llm-header for the provider of --model (the headers go
// where --llm-url goes; a fallback of another provider gets none). A bad
// header is a usage error naming it, never its value.
func llmHeaders(c *cli.Context, provider string) (http.Header, error) {
	if p, _, err := llm.Parse(c.String("model")); err != nil || p != provider {
		return nil, nil
	}
	var h http.Header
	for i, raw := range c.StringSlice("llm-header") {
		name, value, ok := strings.Cut(raw, ":")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		switch {
		case !ok || len(name) > 64 || !httpguts.ValidHeaderFieldName(name):
			// Never shown: without its colon the whole flag may be a value.
			return nil, fail(exitUsage, "--llm-header #%d: want 'Name: value', a header name of letters, digits and -_.", i+1)
		case !httpguts.ValidHeaderFieldValue(value):
			return nil, fail(exitUsage, "--llm-header %s: the value holds a line break or another control character", name)
		}
		switch http.CanonicalHeaderKey(name) {
		case "Host", "Content-Length", "Content-Type", "Transfer-Encoding", "Connection":
			return nil, fail(exitUsage, "--llm-header %s: the client sets this header itself", http.CanonicalHeaderKey(name))
		}
		if h == nil {
			h = http.Header{}
		}
		h.Add(name, value)
	}
	return h, nil
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

func serveMetrics(addr string, reg *prometheus.Registry, log *slog.Logger) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fail(exitUsage, "--metrics-addr %q: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server", "err", err)
		}
	}()
	log.Info("serving metrics", "addr", ln.Addr().String())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx) // best effort on the way out
	}, nil
}

// setMemoryLimit applies --memory-limit unless the environment already set
// GOMEMLIMIT (the runtime has read it then).
func setMemoryLimit(v string) error {
	if os.Getenv("GOMEMLIMIT") != "" {
		return nil
	}
	n, err := parseBytes(v)
	if err != nil {
		return fail(exitUsage, "--memory-limit %q: %w", v, err)
	}
	if n > 0 {
		debug.SetMemoryLimit(n)
	}
	return nil
}

// parseBytes reads a size like 200MiB, 1GiB, 512MB or a number of bytes;
// "0" and "off" mean no limit.
func parseBytes(v string) (int64, error) {
	v = strings.TrimSpace(v)
	if v == "" || v == "0" || strings.EqualFold(v, "off") {
		return 0, nil
	}
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(v, u.suffix) {
			v, mult = strings.TrimSuffix(v, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("not a size (use e.g. 200MiB, 1GiB, or 0 for none)")
	}
	return n * mult, nil
}
