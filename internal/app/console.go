package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/llmpipeline/pipeline/index"
	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/config"
	"github.com/llmpipeline/pipeline/internal/exit"
	"github.com/llmpipeline/pipeline/internal/secret"
	"github.com/llmpipeline/pipeline/llm"
	"github.com/llmpipeline/pipeline/schemas"
	"github.com/llmpipeline/pipeline/ui"
)

// ConsoleIndex decides, before anything is created, whether `ui` may serve:
// a data dir with neither a NATS store nor an index holds no pipeline
// data (refused, exit 3: most often a wrong --data-dir). Jobs submitted
// but no index yet: the console serves an empty index (created here) that
// the sink of a later `run` fills.
func ConsoleIndex(cfg *config.Config) (create bool, err error) {
	p := DBPath(cfg)
	if _, err := os.Stat(p); err == nil {
		return false, nil
	}
	if cfg.Store.DB != "" {
		return false, exit.Fail(exit.Runtime, "no index at %s (run 'pipeline run' first, or check --db)", p)
	}
	if err := RequireStore(cfg); err != nil {
		return false, exit.Fail(exit.Runtime, "no pipeline data in %s yet: nothing to show (run `pipeline submit` and `pipeline run` first, or pass --data-dir)", cfg.Broker.DataDir)
	}
	return true, nil
}

// StartConsole serves the console with the settings s until the returned
// function is called. It refuses an address other than loopback without a
// token, and prints the console's URL on stdout. Its schemas are cfg's,
// loaded again for each page that shows them.
func StartConsole(cfg *config.Config, s config.Console, st *index.Store, conn *broker.Conn, breaker func() string, secrets *secret.Redactor, stdout io.Writer, log *slog.Logger) (func(), error) {
	if err := ui.CheckAddr(s.Addr, s.Token); err != nil {
		return nil, exit.Fail(exit.Usage, "%w", err)
	}
	if s.Token != "" {
		secrets.Add(s.Token)
	}
	srv, err := ui.New(ui.Config{
		Store:       st,
		Conn:        conn,
		LoadSchemas: func() (*schemas.Registry, error) { return LoadRegistry(cfg) },
		Secrets:     secrets,
		Token:       s.Token,
		Addr:        s.Addr,
		Hosts:       s.Hosts,
		ReadOnly:    s.ReadOnly,
		Breaker:     breaker,
		Logger:      log,
	})
	if err != nil {
		return nil, exit.WithCode(exit.Runtime, err)
	}
	ln, err := net.Listen("tcp", s.Addr)
	if err != nil {
		return nil, exit.Fail(exit.Usage, "console address %q: %w", s.Addr, err)
	}
	hs := &http.Server{Handler: srv, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := hs.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("console server", "err", err)
		}
	}()
	fmt.Fprintf(stdout, "console: http://%s/\n", ln.Addr())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = hs.Shutdown(ctx) // best effort on the way out
	}, nil
}

// RunConsole serves the console inside `run` (--ui-addr): over the sink's
// index, or, with --sink=false, over the index file the sink of another
// process writes; with this process's breaker.
func RunConsole(cfg *config.Config, st *index.Store, conn *broker.Conn, breaker *llm.Breaker, secrets *secret.Redactor, stdout io.Writer, log *slog.Logger) (func(), error) {
	closeStore := func() {}
	if st == nil {
		var err error
		if st, err = OpenStore(cfg, true); err != nil {
			return nil, err
		}
		closeStore = func() { _ = st.Close() } // read-only use; nothing to lose
	}
	var state func() string
	if breaker != nil {
		state = breaker.State
	}
	stop, err := StartConsole(cfg, cfg.Console, st, conn, state, secrets, stdout, log)
	if err != nil {
		closeStore()
		return nil, err
	}
	return func() { stop(); closeStore() }, nil
}
