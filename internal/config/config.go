package config

import (
	"fmt"
	"io"
	"reflect"
	"slices"
	"time"

	"github.com/urfave/cli/v2"
)

// Config is every setting a command reads, by section. A field's tag names
// its flag (the file's key); a command fills the fields of the flags it
// has, and leaves the others at their zero value.
type Config struct {
	Broker  Broker
	Store   Store
	Schemas Schemas
	Log     Log
	Workers Workers
	Model   Model
	Heal    Heal
	Budget  Budget
	Batch   Batch
	Console Console
	Filter  Filter
	Output  Output
	Submit  Submit
	Report  Report
	Actions Actions
	Tools   Tools
	Eval    Eval

	// Command is the name of the command the settings are for ("run").
	Command string

	set map[string]bool
}

// Broker is the NATS connection and the streams' settings.
type Broker struct {
	DataDir         string        `flag:"data-dir"`
	URL             string        `flag:"nats-url"`
	Listen          string        `flag:"nats-listen"`
	Creds           string        `flag:"nats-creds"`
	TLSCert         string        `flag:"nats-tls-cert"`
	TLSKey          string        `flag:"nats-tls-key"`
	TLSCA           string        `flag:"nats-tls-ca"`
	Replicas        int           `flag:"replicas"`
	SyncAlways      bool          `flag:"nats-sync-always"`
	DuplicateWindow time.Duration `flag:"duplicate-window"`
	StreamMaxAge    time.Duration `flag:"stream-max-age"`
	StreamMaxBytes  string        `flag:"stream-max-bytes"`
}

// Store is the SQLite index and its retention.
type Store struct {
	DB      string        `flag:"db"`
	MaxAge  time.Duration `flag:"dlq-max-age"`
	MaxRows int           `flag:"dlq-max-rows"`
	Sink    bool          `flag:"sink"`
}

// Schemas is where the schemas come from and the limits a file keeps.
type Schemas struct {
	Dir        string `flag:"schemas"`
	SkipBroken bool   `flag:"skip-broken-schemas"`
	MaxBytes   string `flag:"schema-max-bytes"`
	MaxDepth   int    `flag:"schema-max-depth"`
}

// Log is the logger on stderr.
type Log struct {
	Level  string `flag:"log-level"`
	Format string `flag:"log-format"`
}

// Workers is the worker runtime of `run`.
type Workers struct {
	Concurrency   int           `flag:"concurrency"`
	UntilIdle     bool          `flag:"until-idle"`
	ShutdownGrace time.Duration `flag:"shutdown-grace"`
	AckWait       time.Duration `flag:"ack-wait"`
	MaxDeliver    int           `flag:"max-deliver"`
	MaxJobBytes   string        `flag:"max-job-bytes"`
	MemoryLimit   string        `flag:"memory-limit"`
	MetricsAddr   string        `flag:"metrics-addr"`
}

// Model is the model provider, its transport, its limits and the
// simulator.
type Model struct {
	Spec             string        `flag:"model"`
	Headers          []string      `flag:"llm-header"`
	URL              string        `flag:"llm-url"`
	ResponseFormat   string        `flag:"response-format"`
	MaxTokens        int           `flag:"max-tokens"`
	RequestTimeout   time.Duration `flag:"request-timeout"`
	TransportRetries int           `flag:"transport-retries"`
	MaxRetryAfter    time.Duration `flag:"max-retry-after"`
	RPM              int           `flag:"rpm"`
	TPM              int           `flag:"tpm"`
	RateWindow       time.Duration `flag:"rate-window"`
	BreakerThreshold int           `flag:"breaker-threshold"`
	BreakerCooldown  time.Duration `flag:"breaker-cooldown"`
	SimLatency       time.Duration `flag:"sim-latency"`
	SimSeed          int64         `flag:"sim-seed"`
	SimFixRate       float64       `flag:"sim-fix-rate"`
	SimFaultScale    float64       `flag:"sim-fault-scale"`
	SimForce         string        `flag:"sim-force"`
}

// Heal is the heal loop.
type Heal struct {
	MaxAttempts      int     `flag:"max-attempts"`
	Temperature      float64 `flag:"temperature"`
	TemperatureStep  float64 `flag:"temperature-step"`
	TemperatureFloor float64 `flag:"temperature-floor"`
	History          string  `flag:"heal-history"`
	MaxDiagnostics   int     `flag:"max-diagnostics"`
}

// Budget is the run's prices, spending limits and fallback models.
type Budget struct {
	Prices           string   `flag:"prices"`
	USD              float64  `flag:"budget-usd"`
	Tokens           int64    `flag:"budget-tokens"`
	FallbackModels   []string `flag:"fallback-model"`
	FallbackAttempts int      `flag:"fallback-attempts"`
}

// Batch is `run --batch`.
type Batch struct {
	Enabled bool          `flag:"batch"`
	Size    int           `flag:"batch-size"`
	Wait    time.Duration `flag:"batch-wait"`
	Poll    time.Duration `flag:"batch-poll"`
	Heal    string        `flag:"batch-heal"`
}

// Console is the operators' console (`ui`, `run --ui-addr`).
type Console struct {
	Addr     string   `flag:"ui-addr"`
	Token    string   `flag:"ui-token"`
	Hosts    []string `flag:"ui-host"`
	ReadOnly bool     `flag:"ui-read-only"`
}

// Filter is the dead-letter filter of dlq list, purge, export and replay.
type Filter struct {
	Schema  string `flag:"schema"`
	Class   string `flag:"class"`
	Path    string `flag:"path"`
	Cluster string `flag:"cluster"`
	Model   string `flag:"model"`
	Since   string `flag:"since"`
	Until   string `flag:"until"`
	Limit   int    `flag:"limit"`
}

// Output is how a command prints.
type Output struct {
	JSON   bool   `flag:"json"`
	Format string `flag:"format"`
}

// Submit is what `submit` does with the lines of its file.
type Submit struct {
	MaxErrors    int  `flag:"max-errors"`
	SkipInvalid  bool `flag:"skip-invalid"`
	Rerun        bool `flag:"rerun"`
	RerunChanged bool `flag:"rerun-changed"`
	// MaxFileBytes bounds each file (image, PDF) of a job.
	MaxFileBytes string `flag:"max-file-bytes"`
	// ChunkChars and ChunkOverlap split long documents into chunk jobs
	// (0: jobs stay whole).
	ChunkChars   int `flag:"chunk-chars"`
	ChunkOverlap int `flag:"chunk-overlap"`
}

// Report is what the failure report and results show.
type Report struct {
	Top         int     `flag:"top"`
	MinJobs     int     `flag:"min-jobs"`
	MaxHealRate float64 `flag:"max-heal-rate"`
	Version     string  `flag:"version"`
	Latest      bool    `flag:"latest"`
}

// Actions is the operators' actions on dead letters (replay, purge).
type Actions struct {
	DryRun   bool     `flag:"dry-run"`
	All      bool     `flag:"all"`
	Before   string   `flag:"before"`
	Replayed bool     `flag:"replayed"`
	IDs      []string `flag:"id"`
	// KeepFiles is purge's --keep-files: a stored file nothing names is
	// deleted once it was stored at least this long ago.
	KeepFiles time.Duration `flag:"keep-files"`
}

// Tools is the settings of sanitize, validate and config show.
type Tools struct {
	Schema string `flag:"schema"`
	// Input is validate's --input: the job's input text, against which
	// x-grounded values are checked.
	Input   string `flag:"input"`
	Explain bool   `flag:"explain"`
	Command string `flag:"command"`
}

// IsSet reports whether the setting name was given (by flag, environment
// variable or file), not left at its default.
func (c *Config) IsSet(name string) bool { return c.set[name] }

// FromContext fills a Config from the running command's flags, after
// Apply put the file's values on them: the one place settings are read by
// their flag's name. A field of a type it cannot fill is a programming
// error: it panics (the package's tests fill every field).
func FromContext(c *cli.Context) *Config {
	cfg := &Config{Command: c.Command.Name, set: map[string]bool{}}
	has := map[string]bool{}
	for _, f := range c.Command.Flags {
		for _, n := range f.Names() {
			has[n] = true // an alias fills its field too: ui's --addr is --ui-addr
		}
	}
	sections := reflect.ValueOf(cfg).Elem()
	for i := 0; i < sections.NumField(); i++ {
		sec := sections.Field(i)
		if sec.Kind() != reflect.Struct {
			continue
		}
		for j := 0; j < sec.NumField(); j++ {
			name := sec.Type().Field(j).Tag.Get("flag")
			if name == "" || !has[name] {
				continue
			}
			if c.IsSet(name) {
				cfg.set[name] = true
			}
			field := sec.Field(j)
			switch field.Interface().(type) {
			case string:
				field.SetString(c.String(name))
			case int:
				field.SetInt(int64(c.Int(name)))
			case int64:
				field.SetInt(c.Int64(name))
			case bool:
				field.SetBool(c.Bool(name))
			case float64:
				field.SetFloat(c.Float64(name))
			case time.Duration:
				field.SetInt(int64(c.Duration(name)))
			case []string:
				// A slice flag, or a repeatable flag of its own (dlq's
				// --id) with the same Value method.
				var list []string
				if l, ok := c.Generic(name).(interface{ Value() []string }); ok {
					list = l.Value()
				}
				field.Set(reflect.ValueOf(list))
			default:
				panic(fmt.Sprintf("config: field for --%s has an unsupported type %s", name, field.Type()))
			}
		}
	}
	return cfg
}

// Resolve is the Config of a command named name with flags, given args
// (flags only), as a run of it would have it: args, then the environment,
// then the file of --config or $PIPELINE_CONFIG (its keys for this
// command; the CLI checks the others), then the defaults. Programs other than the CLI (the bench)
// use it to run what the CLI runs.
func Resolve(name string, flags []cli.Flag, args []string) (*Config, error) {
	var cfg *Config
	if !slices.ContainsFunc(flags, func(f cli.Flag) bool { return f.Names()[0] == FlagName }) {
		flags = append(flags, ConfigFlag())
	}
	app := &cli.App{Name: "pipeline", Writer: io.Discard, ErrWriter: io.Discard, HideHelp: true,
		ExitErrHandler: func(*cli.Context, error) {},
		Commands: []*cli.Command{{Name: name, Flags: flags, HideHelp: true, Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return fmt.Errorf("%s: unexpected argument %q", name, c.Args().First())
			}
			var f *File
			if p := c.String(FlagName); p != "" {
				var err error
				if f, err = Load(p); err != nil {
					return err
				}
			}
			if err := Apply(c, f); err != nil {
				return err
			}
			cfg = FromContext(c)
			return nil
		}}},
	}
	if err := app.Run(append([]string{"pipeline", name}, args...)); err != nil {
		return nil, err
	}
	return cfg, nil
}
