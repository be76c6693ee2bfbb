package app

import (
	"io"
	"log/slog"

	"github.com/llmpipeline/pipeline/internal/config"
	"github.com/llmpipeline/pipeline/internal/exit"
	"github.com/llmpipeline/pipeline/internal/secret"
)

// Logger is the logger of the Log settings on w (stderr), every record
// passing through red.
func Logger(cfg config.Log, w io.Writer, red *secret.Redactor) (*slog.Logger, error) {
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(cfg.Level)); err != nil {
		return nil, exit.Fail(exit.Usage, "--log-level %q: use debug, info, warn or error", cfg.Level)
	}
	opts := &slog.HandlerOptions{Level: lvl}
	var h slog.Handler
	switch cfg.Format {
	case "text", "":
		h = slog.NewTextHandler(w, opts)
	case "json":
		h = slog.NewJSONHandler(w, opts)
	default:
		return nil, exit.Fail(exit.Usage, "--log-format %q: use text or json", cfg.Format)
	}
	return slog.New(red.Handler(h)), nil
}
