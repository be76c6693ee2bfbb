package app

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/llmpipeline/pipeline/index"
	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/config"
	"github.com/llmpipeline/pipeline/internal/exit"
	"github.com/llmpipeline/pipeline/internal/sink"
)

// StreamLimits reads the stream limit flags of the command: only those set
// (by flag or env var) change the streams.
func StreamLimits(cfg *config.Config) (broker.StreamLimits, error) {
	var lim broker.StreamLimits
	if cfg.IsSet("stream-max-age") {
		d := cfg.Broker.StreamMaxAge
		if d < 0 {
			return lim, exit.Fail(exit.Usage, "--stream-max-age %v: want 0 (keep all) or a positive duration", d)
		}
		lim.MaxAge = &d
	}
	if cfg.IsSet("stream-max-bytes") {
		n, err := ParseBytes(cfg.Broker.StreamMaxBytes)
		if err != nil {
			return lim, exit.Fail(exit.Usage, "--stream-max-bytes %q: %w", cfg.Broker.StreamMaxBytes, err)
		}
		lim.MaxBytes = &n
	}
	return lim, nil
}

// WarnStreamLoss, after a command applied stream limits without running
// the sink, compares the streams with the index on this data dir (when
// there is one) and warns about outcomes the limits discarded before they
// were indexed. The sink, where it runs, warns about them itself.
func WarnStreamLoss(ctx context.Context, cfg *config.Config, conn *broker.Conn, log *slog.Logger) error {
	if !cfg.IsSet("stream-max-age") && !cfg.IsSet("stream-max-bytes") {
		return nil
	}
	p := DBPath(cfg)
	if _, err := os.Stat(p); err != nil {
		log.Warn("stream limits applied, and no index to compare them with: outcomes the sink has not read yet may be discarded", "index", p)
		return nil
	}
	st, err := index.Open(p)
	if err != nil {
		return exit.WithCode(exit.Runtime, err)
	}
	defer st.Close()
	cur, err := st.Cursors(ctx)
	if err != nil {
		return exit.WithCode(exit.Runtime, err)
	}
	_, err = sink.WarnUnindexedLoss(ctx, conn, cur, log)
	return exit.WithCode(exit.Runtime, err)
}

// Connect connects to NATS with the broker settings of cfg: the URL's
// servers, or the embedded server on the data dir (started, or joined).
func Connect(ctx context.Context, cfg *config.Config, log *slog.Logger) (*broker.Conn, error) {
	ic := broker.Config{
		URL:        cfg.Broker.URL,
		DataDir:    cfg.Broker.DataDir,
		Listen:     cfg.Broker.Listen,
		CredsFile:  cfg.Broker.Creds,
		TLSCert:    cfg.Broker.TLSCert,
		TLSKey:     cfg.Broker.TLSKey,
		TLSCA:      cfg.Broker.TLSCA,
		Replicas:   cfg.Broker.Replicas,
		SyncAlways: cfg.Broker.SyncAlways,
		Logger:     log,
	}
	if cfg.IsSet("duplicate-window") {
		// Unset, the streams keep the window they have (2m when created).
		ic.DuplicateWindow = cfg.Broker.DuplicateWindow
	}
	limits, err := StreamLimits(cfg)
	if err != nil {
		return nil, err
	}
	ic.StreamLimits = limits
	if ic.URL == "" {
		if err := os.MkdirAll(ic.DataDir, 0o700); err != nil {
			return nil, exit.Fail(exit.Runtime, "creating --data-dir: %w", err)
		}
	}
	conn, err := broker.Connect(ctx, ic)
	if err != nil {
		return nil, exit.WithCode(exit.Runtime, fmt.Errorf("connecting to NATS: %w", err))
	}
	return conn, nil
}

// DBPath is the SQLite index file: --db, else pipeline.db in the data dir.
func DBPath(cfg *config.Config) string {
	if p := cfg.Store.DB; p != "" {
		return p
	}
	return filepath.Join(cfg.Broker.DataDir, "pipeline.db")
}

// OpenStore opens the SQLite index. Read-only commands refuse to create an
// index that is not there, so a wrong --data-dir is an error, not an empty report.
func OpenStore(cfg *config.Config, create bool) (*index.Store, error) {
	p := DBPath(cfg)
	if !create {
		if _, err := os.Stat(p); err != nil {
			if cfg.Store.DB == "" {
				return nil, NoData(cfg.Broker.DataDir)
			}
			return nil, exit.Fail(exit.Runtime, "no index at %s (run 'pipeline run' first, or check --db): %w", p, err)
		}
	} else if err := os.MkdirAll(filepath.Dir(p), 0o700); err != nil {
		return nil, exit.Fail(exit.Runtime, "creating %s: %w", filepath.Dir(p), err)
	}
	st, err := index.Open(p)
	if err != nil {
		return nil, exit.WithCode(exit.Runtime, fmt.Errorf("opening index %s: %w", p, err))
	}
	return st, nil
}

// NoData is the error of a read-only command on a data dir without any
// pipeline data (exit 3): most often a wrong --data-dir.
func NoData(dir string) error {
	return exit.Fail(exit.Runtime, "no pipeline data in %s (run `pipeline submit` first, or pass --data-dir)", dir)
}

// RequireStore refuses, before connecting, a read-only command on the
// embedded server of a data dir that holds no NATS store: connecting would
// create one, and an empty answer would hide the wrong --data-dir.
func RequireStore(cfg *config.Config) error {
	if cfg.Broker.URL != "" {
		return nil
	}
	dir := cfg.Broker.DataDir
	if _, err := os.Stat(filepath.Join(dir, "nats")); err != nil {
		return NoData(dir)
	}
	return nil
}
