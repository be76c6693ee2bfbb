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
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/llmpipeline/pipeline/dlq"
	"github.com/llmpipeline/pipeline/ingest"
	"github.com/llmpipeline/pipeline/internal/app"
	"github.com/llmpipeline/pipeline/internal/config"
	"github.com/llmpipeline/pipeline/llm"
	"github.com/llmpipeline/pipeline/schemas"
	"github.com/llmpipeline/pipeline/ui"
)

func (e *env) uiCommand() *cli.Command {
	return &cli.Command{
		Name:  "ui",
		Usage: "serve the operators' console: overview, clusters, dead letters and their transcripts, schemas; replay and purge",
		Description: `Serves the console over the index and the streams (the embedded server, joined or started, or
--nats-url). Pages: / (overview, refreshes by itself), /clusters, /clusters/ID, /dead-letters (filters
as 'dlq list'), /dead-letters/JOB_ID (the whole transcript), /schemas; /api/overview is the overview
as JSON. Replay and purge do what 'dlq replay' and 'dlq purge' do, after a dry run shown for
confirmation; each is logged at warn level. It binds to loopback by default; any other address
needs --token (16 characters at least). It answers only requests addressed to it: its address, the loopback
names when bound to loopback, and names given with --ui-host. Secrets the process knows are never shown. 'pipeline run --ui-addr' serves the same
console inside the workers' process.`,
		ArgsUsage: " ",
		Flags: flags(config.BrokerFlags(), config.StoreFlags(), []cli.Flag{config.SchemasFlag(),
			&cli.StringFlag{Name: "addr", Aliases: []string{"ui-addr"}, EnvVars: []string{"PIPELINE_UI_ADDR"}, Value: "127.0.0.1:8080", Usage: "address to serve the console on"},
			&cli.StringFlag{Name: "token", Aliases: []string{"ui-token"}, EnvVars: []string{"PIPELINE_UI_TOKEN"}, Usage: config.ConsoleTokenUsage},
			&cli.StringSliceFlag{Name: "ui-host", EnvVars: []string{"PIPELINE_UI_HOST"}, Usage: config.ConsoleHostUsage},
			&cli.BoolFlag{Name: "read-only", Aliases: []string{"ui-read-only"}, EnvVars: []string{"PIPELINE_UI_READ_ONLY"}, Usage: "show everything, allow no replay or purge"},
		}, config.SchemaLimitFlags(), config.LogFlags()),
		Action: func(c *cli.Context) error {
			if c.NArg() > 0 {
				return fail(exitUsage, "ui takes no arguments, got %q", c.Args().First())
			}
			if err := ui.CheckAddr(c.String("addr"), c.String("token")); err != nil {
				return fail(exitUsage, "--addr: %w", err)
			}
			// Nothing is created on a data dir without pipeline data: a wrong
			// --data-dir is said, not served empty.
			createIndex, err := uiIndex(c)
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(c.Context, os.Interrupt, syscall.SIGTERM)
			defer stop()
			conn, log, err := e.dial(c)
			if err != nil {
				return err
			}
			defer conn.Close()
			st, err := app.OpenStore(conf(c), createIndex)
			if err != nil {
				return err
			}
			defer st.Close()
			stopUI, err := e.startUI(c, uiSettings{addr: c.String("addr"), token: c.String("token"), hosts: c.StringSlice("ui-host"), readOnly: c.Bool("read-only")}, st, conn, nil, log)
			if err != nil {
				return err
			}
			<-ctx.Done()
			stopUI()
			return nil
		},
	}
}

// uiSettings are the console's flags, from `ui` or from `run --ui-*`.
type uiSettings struct {
	addr, token string
	hosts       []string
	readOnly    bool
}

// uiIndex decides, before anything is created, whether `ui` may serve:
// a data dir with neither a NATS store nor an index holds no pipeline
// data (refused, exit 3: most often a wrong --data-dir). Jobs submitted
// but no index yet: the console serves an empty index (created here) that
// the sink of a later `run` fills.
func uiIndex(c *cli.Context) (create bool, err error) {
	p := app.DBPath(conf(c))
	if _, err := os.Stat(p); err == nil {
		return false, nil
	}
	if c.String("db") != "" {
		return false, fail(exitRuntime, "no index at %s (run 'pipeline run' first, or check --db)", p)
	}
	if err := app.RequireStore(conf(c)); err != nil {
		return false, fail(exitRuntime, "no pipeline data in %s yet: nothing to show (run `pipeline submit` and `pipeline run` first, or pass --data-dir)", c.String("data-dir"))
	}
	return true, nil
}

// startUI serves the console until the returned function is called. It
// refuses an address other than loopback without a token, and prints the
// console's URL on stdout.
func (e *env) startUI(c *cli.Context, s uiSettings, st *dlq.Store, conn *ingest.Conn, breaker func() string, log *slog.Logger) (func(), error) {
	if err := ui.CheckAddr(s.addr, s.token); err != nil {
		return nil, fail(exitUsage, "%w", err)
	}
	if s.token != "" {
		e.secrets.Add(s.token)
	}
	srv, err := ui.New(ui.Config{
		Store:       st,
		Conn:        conn,
		LoadSchemas: func() (*schemas.Registry, error) { return app.LoadRegistry(conf(c)) },
		Secrets:     e.secrets,
		Token:       s.token,
		Addr:        s.addr,
		Hosts:       s.hosts,
		ReadOnly:    s.readOnly,
		Breaker:     breaker,
		Logger:      log,
	})
	if err != nil {
		return nil, withCode(exitRuntime, err)
	}
	ln, err := net.Listen("tcp", s.addr)
	if err != nil {
		return nil, fail(exitUsage, "console address %q: %w", s.addr, err)
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("console server", "err", err)
		}
	}()
	fmt.Fprintf(e.stdout, "console: http://%s/\n", ln.Addr())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx) // best effort on the way out
	}, nil
}

// runUI serves the console inside `run` (--ui-addr): over the sink's index,
// or, with --sink=false, over the index file the sink of another process
// writes; with this process's breaker.
func (e *env) runUI(c *cli.Context, st *dlq.Store, conn *ingest.Conn, breaker *llm.Breaker, log *slog.Logger) (func(), error) {
	closeStore := func() {}
	if st == nil {
		var err error
		if st, err = app.OpenStore(conf(c), true); err != nil {
			return nil, err
		}
		closeStore = func() { _ = st.Close() } // read-only use; nothing to lose
	}
	var state func() string
	if breaker != nil {
		state = breaker.State
	}
	stop, err := e.startUI(c, uiSettings{addr: c.String("ui-addr"), token: c.String("ui-token"), hosts: c.StringSlice("ui-host"), readOnly: c.Bool("ui-read-only")}, st, conn, state, log)
	if err != nil {
		closeStore()
		return nil, err
	}
	return func() { stop(); closeStore() }, nil
}
