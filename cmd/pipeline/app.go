package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"github.com/mattn/go-isatty"
	"github.com/urfave/cli/v2"

	"github.com/llmpipeline/pipeline/internal/app"
	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/clikit"
	"github.com/llmpipeline/pipeline/internal/config"
	"github.com/llmpipeline/pipeline/internal/escape"
	"github.com/llmpipeline/pipeline/internal/exit"
	"github.com/llmpipeline/pipeline/internal/secret"
)

// Exit codes, documented in the README and in `pipeline --help` (package exit).
const (
	exitOK       = exit.OK
	exitNegative = exit.Negative
	exitUsage    = exit.Usage
	exitRuntime  = exit.Runtime
	exitAuth     = exit.Auth
	exitBudget   = exit.Budget
	exitNoCredit = exit.NoCredit
)

// exitError carries an exit code through urfave/cli.
type exitError = exit.Error

func fail(code int, format string, args ...any) error { return exit.Fail(code, format, args...) }

func withCode(code int, err error) error { return exit.WithCode(code, err) }

// Main runs the CLI with the given arguments and streams and returns the
// exit code. Tests call it directly.
func Main(args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return mainContext(context.Background(), args, stdin, stdout, stderr)
}

// mainContext is Main under ctx: cancelling it stops a command as a signal
// would (tests stop `run` this way).
func mainContext(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	app := newApp(stdin, stdout, stderr)
	if len(args) == 2 && (args[1] == "--version" || args[1] == "-version") {
		// The version command under its flag's name. No global --version
		// flag: commands read their own --version (report's schema
		// version), and a global one would answer for them where they
		// have none (demo, which builds a report).
		args = []string{args[0], "version"}
	}
	err := clikit.Run(ctx, app, args)
	if err == nil {
		return exitOK
	}
	code := exitRuntime
	var ee *exitError
	if errors.As(err, &ee) {
		code = ee.Code
	} else if isUsageError(err) {
		code = exitUsage
	}
	// Errors quote what they are about (a job id, a file's line, a
	// provider's message): no control character reaches the terminal.
	fmt.Fprintf(stderr, "pipeline: %s\n", escape.Text(err.Error()))
	return code
}

// plural is "1 finding", "2 findings".
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return strconv.Itoa(n) + " " + noun + "s"
}

// conf is the running command's settings, typed (config.FromContext):
// flags, environment variables and the --config file, resolved.
func conf(c *cli.Context) *config.Config { return config.FromContext(c) }

// isUsageError recognises urfave/cli's own flag and argument errors.
func isUsageError(err error) bool {
	s := err.Error()
	for _, p := range []string{"flag provided but not defined", "invalid value", "flag needs an argument", "Required flag", "No help topic"} {
		if strings.Contains(s, p) {
			return true
		}
	}
	return false
}

// env holds what every command shares: the streams and the resolved settings.
type env struct {
	stdin          io.Reader
	stdout, stderr io.Writer
	// terminal reports whether one of the streams is a terminal: progress
	// is drawn only on one, and a submit reading a terminal says so.
	terminal func(stream any) bool

	// watch holds the NATS connections the running command opened: one
	// that loses the embedded server (its owner went away and it could
	// not take over) cancels the command, which then exits with the
	// reason (exit 3).
	watch app.Watch

	// secrets holds every secret the command knows of; logs and stored
	// outcomes pass through it.
	secrets *secret.Redactor
}

// jsonEncoder writes JSON to w (stdout) as the stored outcomes are written:
// < > & as they are (encoding/json escapes them for HTML by default, so a
// model's "<think>" or "R&D" would print as \u003cthink\u003e and R\u0026D),
// and the controls encoding/json leaves raw (DEL, C1, bidi overrides) as
// \u escapes (escape.JSON): the same values, safe on a terminal.
func jsonEncoder(w io.Writer) *json.Encoder {
	enc := json.NewEncoder(escape.JSONWriter(w))
	enc.SetEscapeHTML(false)
	return enc
}

func newApp(stdin io.Reader, stdout, stderr io.Writer) *cli.App {
	return newAppEnv(&env{stdin: stdin, stdout: stdout, stderr: stderr, terminal: isTTY})
}

// newAppEnv builds the CLI on e (tests set e.terminal to see what a
// terminal would).
func newAppEnv(e *env) *cli.App {
	if e.secrets == nil {
		e.secrets = secret.New()
	}
	stdin, stdout, stderr := e.stdin, e.stdout, e.stderr
	app := &cli.App{
		Name:  "pipeline",
		Usage: "turn unreliable LLM output into validated, structured data, and find the schema fields models cannot satisfy",
		Description: `Jobs (JSONL: {"id","schema","input","instructions"?,"metadata"?}) go onto NATS JetStream with
'pipeline submit'; 'pipeline run' asks a model, sanitizes and validates its answers, heals failures by
feeding the model the exact field diagnostics, and stores results and dead letters; 'pipeline report'
clusters failures by field path. Without --nats-url every command uses (or joins) an embedded NATS
server with its store under --data-dir. 'pipeline demo' shows it all on the built-in simulator.
'pipeline --version' (or 'pipeline version') prints the module version and VCS revision.

Settings: flags, then environment variables, then a YAML file given by --config FILE or
PIPELINE_CONFIG (keys are the long flag names: at the top level for every command, under a
command's name for its own, e.g. 'run:' then 'max-attempts: 3'), then the defaults. An unknown key
or a wrong value in the file is a usage error naming FILE:LINE. 'pipeline config show [--command
NAME] [--json]' prints every setting in effect and where it came from.

Exit codes: 0 success; 1 the answer is no (invalid output, sanitizer refusal, lint findings,
rejected job lines); 2 usage error (bad flag, argument or input); 3 runtime or configuration error
(NATS, SQLite, a schema that does not compile, a model URL or model name the provider does not
know: 404, 405, 501; no job dead-lettered); 4 the model provider rejected the credentials;
5 budget reached (run --budget-usd / --budget-tokens; the jobs not started stay queued);
6 the model provider's account has no credit (429 insufficient_quota, 402 billing_error; the jobs stay queued).`,
		HideVersion:     true, // `pipeline --version` is the version command, see mainContext
		Writer:          stdout,
		ErrWriter:       stderr,
		Reader:          stdin,
		HideHelpCommand: true, // our own help command below: it knows unknown commands
		// urfave/cli adds its --help/-h flag only when the app has no help
		// command of its own, and ours replaces it: without this flag
		// `pipeline --help` was "flag: help requested", exit 2.
		Flags:                []cli.Flag{cli.HelpFlag},
		EnableBashCompletion: false,
		ExitErrHandler:       func(*cli.Context, error) {}, // Main decides the exit code
		OnUsageError: func(_ *cli.Context, err error, _ bool) error {
			return &exitError{Code: exitUsage, Err: err}
		},
		// Bare `pipeline` prints the help on stderr and exits 2; a first
		// argument that is no command is an unknown command (exit 2).
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return fail(exitUsage, "unknown command %q (see 'pipeline --help')", c.Args().First())
			}
			c.App.Writer = e.stderr
			defer func() { c.App.Writer = e.stdout }()
			if err := clikit.Help(func() error { return cli.ShowAppHelp(c) }); err != nil {
				return err
			}
			return fail(exitUsage, "no command given")
		},
		Commands: []*cli.Command{
			e.demoCommand(),
			e.submitCommand(),
			e.runCommand(),
			e.batchesCommand(),
			e.resultsCommand(),
			e.statsCommand(),
			e.reportCommand(),
			e.evalCommand(),
			e.dlqCommand(),
			e.sanitizeCommand(),
			e.validateCommand(),
			e.schemasCommand(),
			e.uiCommand(),
			e.configCommand(),
			e.versionCommand(),
			clikit.HelpCommand(),
		},
	}
	clikit.Wrap(app.Commands, &e.watch, e.stdout, e.stderr)
	return app
}

// Flags shared by several commands. Each is a constructor so every command
// gets its own flag value.

func jsonFlag() cli.Flag {
	return &cli.BoolFlag{Name: "json", Usage: "print JSON (one object per line for lists)"}
}

// flags is the flags of groups, each name once (config.Flags).
func flags(groups ...[]cli.Flag) []cli.Flag { return config.Flags(groups...) }

// logger is the command's logger on stderr (app.Logger), its secrets redacted.
func (e *env) logger(c *cli.Context) (*slog.Logger, error) {
	cfg := conf(c)
	app.LearnSecrets(e.secrets, cfg)
	return app.Logger(cfg.Log, e.stderr, e.secrets)
}

// dial makes the command's logger and connects to NATS with its flags.
func (e *env) dial(c *cli.Context) (*broker.Conn, *slog.Logger, error) {
	log, err := e.logger(c)
	if err != nil {
		return nil, nil, err
	}
	conn, err := e.connect(c.Context, c, log)
	return conn, log, err
}

func (e *env) connect(ctx context.Context, c *cli.Context, log *slog.Logger) (*broker.Conn, error) {
	conn, err := app.Connect(ctx, conf(c), log)
	if err != nil {
		return nil, err
	}
	e.secrets.Add(conn.Secrets()...) // the embedded server's password
	e.watch.Track(ctx, conn)
	return conn, nil
}

// readInput opens the command's FILE argument, or stdin for "-" or none.
func (e *env) readInput(c *cli.Context) (io.ReadCloser, string, error) {
	if c.NArg() > 1 {
		return nil, "", fail(exitUsage, "expected at most one FILE argument, got %d: %q (flags go before FILE)", c.NArg(), c.Args().Slice())
	}
	name := c.Args().First()
	if name == "" || name == "-" {
		return io.NopCloser(e.stdin), "<stdin>", nil
	}
	f, err := os.Open(name)
	if err != nil {
		return nil, "", fail(exitUsage, "opening input: %w", err)
	}
	return f, name, nil
}

// isTTY reports whether stream (a reader or a writer) is a terminal.
func isTTY(stream any) bool {
	f, ok := stream.(*os.File)
	return ok && (isatty.IsTerminal(f.Fd()) || isatty.IsCygwinTerminal(f.Fd()))
}
