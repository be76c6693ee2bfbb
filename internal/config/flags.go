package config

import (
	"time"

	"github.com/llmpipeline/pipeline/batch"
	"github.com/llmpipeline/pipeline/internal/payload"
	"github.com/llmpipeline/pipeline/llm"
	"github.com/llmpipeline/pipeline/llm/sim"
	"github.com/llmpipeline/pipeline/schemas"
	"github.com/urfave/cli/v2"
)

// The flags of every setting of Config, by section: commands take the
// sections they read (each constructor returns new flags, as urfave/cli
// flags hold their value). Their long names are the file's keys.

// ConsoleTokenUsage is the help of the console's token flag (ui, run).
const ConsoleTokenUsage = "access token of the console, required (at least 16 characters) to listen on an address that is not loopback; every request must carry it (the login form, or Authorization: Bearer)"

// ConsoleHostUsage is the help of --ui-host (ui, run).
const ConsoleHostUsage = "a further name the console answers to, as the Host of a request (a reverse proxy's, the machine's DNS name); repeat it for several. Requests naming another host are refused (421): a page of another site cannot reach the console by rebinding its name"

// DefaultMaxJobBytes is --max-job-bytes' default.
const DefaultMaxJobBytes = "64MiB"

// DataDirFlag is --data-dir: the embedded store and the index.
func DataDirFlag() cli.Flag {
	return &cli.StringFlag{Name: "data-dir", EnvVars: []string{"PIPELINE_DATA_DIR"}, Value: "./pipeline-data",
		Usage: "directory for the embedded NATS store and the SQLite index (pipeline.db)"}
}

// SchemasFlag is --schemas: the directory of JSON Schema files.
func SchemasFlag() cli.Flag {
	return &cli.StringFlag{Name: "schemas", EnvVars: []string{"PIPELINE_SCHEMAS"},
		Usage: "directory of JSON Schema files (id = file name without .json); submit and run remember it for --data-dir, where the other commands then use it unless given again ('' forgets it); without one, the built-in examples"}
}

// LogFlags are the logger's flags (Log).
func LogFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "log-level", EnvVars: []string{"PIPELINE_LOG_LEVEL"}, Value: "warn", Usage: "debug, info, warn or error"},
		&cli.StringFlag{Name: "log-format", EnvVars: []string{"PIPELINE_LOG_FORMAT"}, Value: "text", Usage: "text or json (on stderr)"},
	}
}

// BrokerFlags are the NATS connection's flags (Broker).
func BrokerFlags() []cli.Flag {
	return []cli.Flag{
		DataDirFlag(),
		&cli.StringFlag{Name: "nats-url", EnvVars: []string{"NATS_URL"},
			Usage: "NATS server or cluster URL(s), comma-separated; empty: the embedded server (started, or joined if another pipeline command on --data-dir runs one; it requires the credentials in <data-dir>/nats-auth.json, which every command reads)"},
		&cli.StringFlag{Name: "nats-listen", EnvVars: []string{"PIPELINE_NATS_LISTEN"},
			Usage: "address of the embedded server, loopback only as it has no TLS (default 127.0.0.1 on the port the last server on --data-dir used, else a free one)"},
		&cli.StringFlag{Name: "nats-creds", EnvVars: []string{"NATS_CREDS"}, Usage: "NATS credentials file"},
		&cli.StringFlag{Name: "nats-tls-cert", EnvVars: []string{"NATS_TLS_CERT"}, Usage: "client TLS certificate"},
		&cli.StringFlag{Name: "nats-tls-key", EnvVars: []string{"NATS_TLS_KEY"}, Usage: "client TLS key"},
		&cli.StringFlag{Name: "nats-tls-ca", EnvVars: []string{"NATS_TLS_CA"}, Usage: "CA certificate to verify the server"},
		&cli.IntFlag{Name: "replicas", EnvVars: []string{"PIPELINE_REPLICAS"}, Value: 1, Usage: "stream replicas (3 on a cluster)"},
		&cli.BoolFlag{Name: "nats-sync-always", EnvVars: []string{"PIPELINE_NATS_SYNC_ALWAYS"},
			Usage: "embedded server: fsync every write before acknowledging it (survives power loss; about 40x slower publishes). Off: acknowledged data survives a kill -9 of the process, and is fsynced every 2 minutes"},
		&cli.DurationFlag{Name: "duplicate-window", EnvVars: []string{"PIPELINE_DUPLICATE_WINDOW"}, Value: 2 * time.Minute,
			Usage: "how long the streams remember a message id to drop duplicates (re-submitting a job id inside it is a no-op); unset: the streams keep their current window (2m when created); RESULTS and DLQ at most --stream-max-age"},
	}
}

// StoreFlags are the index's flags of the commands that read it (Store).
func StoreFlags() []cli.Flag {
	return []cli.Flag{
		DataDirFlag(),
		&cli.StringFlag{Name: "db", EnvVars: []string{"PIPELINE_DB"}, Usage: "SQLite index file (default <data-dir>/pipeline.db)"},
	}
}

// SchemaLimitFlags are the limits a schema file must keep to load: every
// command that loads the schemas has them.
func SchemaLimitFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "schema-max-bytes", EnvVars: []string{"PIPELINE_SCHEMA_MAX_BYTES"}, Value: "16MiB",
			Usage: "refuse a schema file larger than this (e.g. 16MiB, 512KB, or bytes)"},
		&cli.IntFlag{Name: "schema-max-depth", EnvVars: []string{"PIPELINE_SCHEMA_MAX_DEPTH"}, Value: schemas.DefaultMaxDepth,
			Usage: "refuse a schema file whose arrays and objects nest deeper than this"},
	}
}

// ModelFlags are the model's flags (Model and Heal).
func ModelFlags() []cli.Flag {
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

// WorkerFlags are the worker runtime's flags of run (Workers and Store).
func WorkerFlags() []cli.Flag {
	return []cli.Flag{
		&cli.IntFlag{Name: "concurrency", Aliases: []string{"c"}, EnvVars: []string{"PIPELINE_CONCURRENCY"}, Value: 16, Usage: "jobs in flight (0: no workers, run the sink alone)"},
		&cli.BoolFlag{Name: "until-idle", Usage: "exit once no job is pending or in flight and every outcome is stored"},
		&cli.DurationFlag{Name: "shutdown-grace", Value: 30 * time.Second, Usage: "on SIGINT/SIGTERM, how long in-flight jobs may finish before they are handed back to the stream"},
		&cli.DurationFlag{Name: "ack-wait", Value: 0, Usage: "how long the server waits for a worker before redelivering (0: max(30s, request-timeout/2); heartbeats every third of it keep long calls alive)"},
		&cli.IntFlag{Name: "max-deliver", Value: 5, Usage: "deliveries of one job before it is dead-lettered"},
		MaxJobBytesFlag(),
		&cli.BoolFlag{Name: "sink", Value: true, Usage: "run the sink that writes the SQLite index (run it in exactly one process per index)"},
		&cli.StringFlag{Name: "db", EnvVars: []string{"PIPELINE_DB"}, Usage: "SQLite index file (default <data-dir>/pipeline.db)"},
		&cli.DurationFlag{Name: "dlq-max-age", Usage: "retention: delete outcomes older than this from the index (0: keep; a warning and a metric come first)"},
		&cli.IntFlag{Name: "dlq-max-rows", Usage: "retention: keep at most this many dead letters in the index, the newest (0: all)"},
		&cli.StringFlag{Name: "memory-limit", Value: "200MiB",
			Usage: "soft memory limit of the process (the Go runtime's GOMEMLIMIT, which wins when set; 0 or off: none). Keeps RSS flat at high --concurrency, the embedded server's caches included, for some extra GC CPU"},
		&cli.StringFlag{Name: "metrics-addr", EnvVars: []string{"PIPELINE_METRICS_ADDR"}, Usage: "serve Prometheus metrics on this address (/metrics), e.g. :9090"},
	}
}

// CostFlags are the flags of prices and fallback models (run and demo).
func CostFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "prices", EnvVars: []string{"PIPELINE_PRICES"},
			Usage: `price file: a JSON object keyed by model spec, {"openai:gpt-4o-mini": {"input_per_mtok": 0.15, "output_per_mtok": 0.6, "cached_input_per_mtok": 0.075, "batch_discount": 0.5}} (US dollars per million tokens; the last two optional). Default: the built-in table (its date in the README; it may be out of date). A model priced nowhere counts tokens, its cost unknown`},
		&cli.StringSliceFlag{Name: "fallback-model",
			Usage: "a model spec to continue a job with when the models before it fail: their attempts end in a healable failure (exhausted, no_progress), or the model is unavailable (breaker open, transport failure, request error such as a context window exceeded). Repeatable, tried in order; --llm-url applies only to the provider of --model"},
		&cli.IntFlag{Name: "fallback-attempts", Value: 1, Usage: "model calls per job of each fallback model, at most (--max-attempts counts the primary's)"},
	}
}

// BudgetFlags are the flags of the run's spending limits.
func BudgetFlags() []cli.Flag {
	return []cli.Flag{
		&cli.Float64Flag{Name: "budget-usd", Usage: "stop once the run's spend reaches this many US dollars (priced by --prices): no job is fetched any more, the jobs in flight finish and are stored, the rest stay queued for the next run; exit 5 (0: no limit)"},
		&cli.Int64Flag{Name: "budget-tokens", Usage: "the same as --budget-usd, counted in tokens (prompt plus completion, every answered call; 0: no limit)"},
	}
}

// BatchFlags are run's batch-mode flags.
func BatchFlags() []cli.Flag {
	return []cli.Flag{
		&cli.BoolFlag{Name: "batch", EnvVars: []string{"PIPELINE_BATCH"},
			Usage: "send attempts through the provider's Batch API (OpenAI Batch, Anthropic Message Batches) at its discount, answered within 24 h; in-flight batches are kept on JetStream and resumed by any 'pipeline run --batch'"},
		&cli.IntFlag{Name: "batch-size", Usage: "most requests per batch (0: the provider's limit or 1,000, whichever is lower; always under the provider's byte limit)"},
		&cli.DurationFlag{Name: "batch-wait", Value: batch.DefaultWait, Usage: "the longest a gathered request waits before its batch is submitted"},
		&cli.DurationFlag{Name: "batch-poll", Value: batch.DefaultPoll, Usage: "how often each batch's status is read"},
		&cli.StringFlag{Name: "batch-heal", Value: batch.HealBatch, Usage: "where heal turns go: batch (the next batch, at the discount) or sync (the ordinary endpoint, at full price, sooner)"},
	}
}

// ConsoleFlags are run's flags that serve the console inside the workers' process.
func ConsoleFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "ui-addr", Usage: "also serve the operators' console (as 'pipeline ui') on this address, e.g. 127.0.0.1:8080"},
		&cli.StringFlag{Name: "ui-token", EnvVars: []string{"PIPELINE_UI_TOKEN"}, Usage: ConsoleTokenUsage},
		&cli.StringSliceFlag{Name: "ui-host", EnvVars: []string{"PIPELINE_UI_HOST"}, Usage: ConsoleHostUsage},
		&cli.BoolFlag{Name: "ui-read-only", EnvVars: []string{"PIPELINE_UI_READ_ONLY"}, Usage: "the console allows no replay or purge"},
	}
}

// StreamLimitFlags bound the RESULTS and DLQ streams. They are on the
// commands that feed the streams (run, submit); a command that does
// not set them leaves the streams' limits as they are.
func StreamLimitFlags() []cli.Flag {
	return []cli.Flag{
		&cli.DurationFlag{Name: "stream-max-age", EnvVars: []string{"PIPELINE_STREAM_MAX_AGE"},
			Usage: "RESULTS and DLQ streams: the sink removes indexed outcomes older than this (e.g. 720h; 0: keep all); never one the index has not read. Unset: the streams keep their current limit (none when created)"},
		&cli.StringFlag{Name: "stream-max-bytes", EnvVars: []string{"PIPELINE_STREAM_MAX_BYTES"},
			Usage: "RESULTS and DLQ streams: keep at most this much each, the sink removing the oldest indexed outcomes (e.g. 10GiB; 0: no limit). Unset: the streams keep their current limit (none when created)"},
	}
}

// MaxJobBytesFlag bounds one job, on submit (a longer line is rejected) and
// on run (a bigger message is dead-lettered invalid_job).
func MaxJobBytesFlag() cli.Flag {
	return &cli.StringFlag{Name: "max-job-bytes", EnvVars: []string{"PIPELINE_MAX_JOB_BYTES"}, Value: DefaultMaxJobBytes,
		Usage: "largest job accepted (e.g. 64MiB, 500KB, or bytes): submit rejects a longer line with its line number before publishing anything; a worker dead-letters a bigger message as invalid_job. Jobs, results and dead letters over the server's max payload travel through the object store " + payload.Bucket}
}

// DefaultMaxFileBytes is --max-file-bytes' default (app.DefaultMaxFileBytes):
// the largest file whose base64 fits Anthropic's 32 MB request with room
// for the prompt.
const DefaultMaxFileBytes = "22MiB"

// MaxFileBytesFlag bounds each file of a job, on submit.
func MaxFileBytesFlag() cli.Flag {
	return &cli.StringFlag{Name: "max-file-bytes", EnvVars: []string{"PIPELINE_MAX_FILE_BYTES"}, Value: DefaultMaxFileBytes,
		Usage: "largest file (image or PDF) a job may name (e.g. 22MiB, 5MB, or bytes; a file travels as base64, a third larger, and Anthropic takes 32 MB a request, OpenAI 50 MB): submit rejects a job with a bigger one, with its line number, before publishing anything. The job line and its files together stay within --max-job-bytes"}
}

// FilterFlags are the dead-letter filters of dlq list, purge, export and replay (Filter).
func FilterFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "schema", Usage: "only this schema"},
		&cli.StringFlag{Name: "class", Usage: "only this failure class (schema, grammar, truncated, refused, no_progress, exhausted, transport, request_error, invalid_job, unknown_schema, abandoned)"},
		&cli.StringFlag{Name: "path", Usage: "only dead letters that failed on this field path (array indices as *, e.g. /items/*/price)"},
		&cli.StringFlag{Name: "cluster", Usage: "only dead letters in this report cluster (its id)"},
		&cli.StringFlag{Name: "model", Usage: "only this model (as given to --model)"},
		&cli.StringFlag{Name: "since", Usage: "only dead letters since (RFC 3339, 2006-01-02, or a duration ago: 24h, 7d)"},
		&cli.StringFlag{Name: "until", Usage: "only dead letters before (same forms as --since)"},
		&cli.IntFlag{Name: "limit", Value: 0, Usage: "at most this many (0: all)"},
	}
}

// Flags is the flags of groups, each name once: the first of a name wins
// (several sections share --data-dir and --db).
func Flags(groups ...[]cli.Flag) []cli.Flag {
	var out []cli.Flag
	seen := map[string]bool{}
	for _, g := range groups {
		for _, f := range g {
			n := f.Names()[0]
			if !seen[n] {
				seen[n] = true
				out = append(out, f)
			}
		}
	}
	return out
}

// RunFlags are the flags of `pipeline run`, every section's: the bench
// resolves them too, to run with run's defaults.
func RunFlags() []cli.Flag {
	return Flags(BrokerFlags(), StreamLimitFlags(), WorkerFlags(), BudgetFlags(), ModelFlags(), CostFlags(), []cli.Flag{SchemasFlag(),
		&cli.BoolFlag{Name: "skip-broken-schemas", EnvVars: []string{"PIPELINE_SKIP_BROKEN_SCHEMAS"},
			Usage: "start even when schema files of --schemas do not load: a warning per file, and their jobs are dead-lettered (unknown_schema, with the load error); without it, run refuses to start (exit 3)"},
	}, SchemaLimitFlags(), ConsoleFlags(), BatchFlags(), LogFlags())
}

// ChunkFlags are submit's splitting of long documents (Submit.ChunkChars,
// Submit.ChunkOverlap).
func ChunkFlags() []cli.Flag {
	return []cli.Flag{
		&cli.IntFlag{Name: "chunk-chars", EnvVars: []string{"PIPELINE_CHUNK_CHARS"},
			Usage: "split each job whose input is longer than this many characters into chunk jobs <id>#<k> of at most this many, cut at blank lines, then sentence ends, then whitespace; the document ends once, with the chunks' answers merged by its schema (0: jobs stay whole; a job's \"chunking\": {\"chars\", \"overlap\"} overrides it; see docs/long-documents.md)"},
		&cli.IntFlag{Name: "chunk-overlap", EnvVars: []string{"PIPELINE_CHUNK_OVERLAP"},
			Usage: "characters consecutive chunks share (under half of --chunk-chars)"},
	}
}
