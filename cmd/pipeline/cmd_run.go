package main

import (
	"context"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/llmpipeline/pipeline/dlq"
	"github.com/llmpipeline/pipeline/ingest"
	"github.com/llmpipeline/pipeline/internal/app"
	"github.com/llmpipeline/pipeline/llm"
	"github.com/llmpipeline/pipeline/llm/sim"
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

// serve runs the workers (and the sink) with the command's settings
// (app.Run), its connections tracked and its console served by the CLI.
func (e *env) serve(ctx context.Context, c *cli.Context) error {
	log, err := e.logger(c)
	if err != nil {
		return err
	}
	return app.Run(ctx, conf(c), app.Runtime{Log: log, Stderr: e.stderr, Terminal: e.terminal(e.stderr), Secrets: e.secrets,
		Connect: func(ctx context.Context, log *slog.Logger) (*ingest.Conn, error) { return e.connect(ctx, c, log) },
		StartUI: func(st *dlq.Store, conn *ingest.Conn, breaker *llm.Breaker, log *slog.Logger) (func(), error) {
			return e.runUI(c, st, conn, breaker, log)
		}})
}
