package app

import (
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"strings"

	"github.com/llmpipeline/pipeline/internal/config"
	"github.com/llmpipeline/pipeline/internal/exit"
	"github.com/llmpipeline/pipeline/schemas"
)

// SchemasMemo is the file, in the data dir, that remembers the --schemas
// directory `submit` and `run` last used: the other commands on that data
// dir (report and its lint, ui, validate, schemas list and lint, and a
// later run) use it unless given --schemas. One line: the directory's
// absolute path.
const SchemasMemo = "schemas-dir"

// SchemaSource is the schema directory a command uses and where it came
// from, for the messages that name it.
type SchemaSource struct {
	Dir        string // "" for the built-in schemas
	Remembered string // the memo file it was read from, or ""
}

// String names the directory and where it came from, for messages.
func (s SchemaSource) String() string {
	switch {
	case s.Dir == "":
		return "the built-in schemas (no --schemas given; pass --schemas DIR for your own)"
	case s.Remembered != "":
		return fmt.Sprintf("%s (the --schemas of an earlier submit or run, remembered in %s; pass --schemas DIR for another)", s.Dir, s.Remembered)
	}
	return s.Dir + " (--schemas)"
}

// remembers reports whether the command's --schemas is remembered for the
// data dir: the commands that put jobs and schemas to work.
func remembers(cfg *config.Config) bool {
	switch cfg.Command {
	case "submit", "run":
		return true
	}
	return false
}

// ResolveSchemas is the command's schema directory: --schemas (or
// $PIPELINE_SCHEMAS) when given, which submit and run then remember in the
// data dir (an empty one forgets: the built-in schemas); else the one
// remembered there; else the built-in schemas.
func ResolveSchemas(cfg *config.Config) (SchemaSource, error) {
	dataDir := cfg.Broker.DataDir // "" for the demo's fresh one
	memo := filepath.Join(dataDir, SchemasMemo)
	if cfg.IsSet("schemas") {
		dir := cfg.Schemas.Dir
		if dir != "" {
			abs, err := filepath.Abs(dir)
			if err != nil {
				return SchemaSource{}, exit.Fail(exit.Usage, "--schemas %q: %w", dir, err)
			}
			dir = abs
		}
		if remembers(cfg) && dataDir != "" {
			if err := remember(cfg, memo, dir); err != nil {
				return SchemaSource{}, err
			}
		}
		return SchemaSource{Dir: dir}, nil
	}
	if dataDir == "" {
		return SchemaSource{}, nil
	}
	b, err := os.ReadFile(memo)
	if errors.Is(err, fs.ErrNotExist) {
		return SchemaSource{}, nil
	}
	if err != nil {
		return SchemaSource{}, exit.Fail(exit.Runtime, "reading the remembered --schemas: %w", err)
	}
	dir := strings.TrimSpace(string(b))
	if dir == "" {
		return SchemaSource{}, nil
	}
	return SchemaSource{Dir: dir, Remembered: memo}, nil
}

// remember writes (or, for the built-in schemas, removes) the data dir's
// memo. A data dir that does not exist is created only for the embedded
// server, which needs it anyway; a worker on --nats-url without one keeps
// nothing.
func remember(cfg *config.Config, memo, dir string) error {
	dataDir := filepath.Dir(memo)
	if _, err := os.Stat(dataDir); err != nil {
		if cfg.Broker.URL != "" || !errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err := os.MkdirAll(dataDir, 0o700); err != nil {
			return exit.Fail(exit.Runtime, "creating --data-dir: %w", err)
		}
	}
	if dir == "" {
		if err := os.Remove(memo); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return exit.Fail(exit.Runtime, "forgetting the remembered --schemas: %w", err)
		}
		return nil
	}
	tmp := memo + ".tmp"
	if err := os.WriteFile(tmp, []byte(dir+"\n"), 0o600); err != nil {
		return exit.Fail(exit.Runtime, "remembering --schemas in %s: %w", memo, err)
	}
	if err := os.Rename(tmp, memo); err != nil {
		return exit.Fail(exit.Runtime, "remembering --schemas in %s: %w", memo, err)
	}
	return nil
}

// SchemaConfig reads the schema limits from the command's flags (their
// environment variables and the configuration file reach them there). A
// command without the flags gets the package's defaults.
func SchemaConfig(cfg *config.Config) (schemas.Config, error) {
	var sc schemas.Config
	if maxBytes := cfg.Schemas.MaxBytes; maxBytes != "" {
		n, err := ParseBytes(maxBytes)
		if err != nil || n <= 0 {
			return sc, exit.Fail(exit.Usage, "--schema-max-bytes %q: want a positive size (e.g. 16MiB)", maxBytes)
		}
		sc.MaxFileBytes = n
	}
	if cfg.IsSet("schema-max-depth") || cfg.Schemas.MaxDepth != 0 {
		if cfg.Schemas.MaxDepth <= 0 {
			return sc, exit.Fail(exit.Usage, "--schema-max-depth %d: want a positive number of levels", cfg.Schemas.MaxDepth)
		}
		sc.MaxDepth = cfg.Schemas.MaxDepth
	}
	return sc, nil
}

// LoadRegistry loads the command's schema directory (ResolveSchemas:
// --schemas, else the one remembered for the data dir, else the built-in
// examples). Files that do not load are in the registry's Broken list; the
// error is for a directory that cannot be read or bad limits.
func LoadRegistry(cfg *config.Config) (*schemas.Registry, error) {
	sc, err := SchemaConfig(cfg)
	if err != nil {
		return nil, err
	}
	src, err := ResolveSchemas(cfg)
	if err != nil {
		return nil, err
	}
	reg, err := schemas.LoadWith(src.Dir, sc)
	if err != nil {
		return nil, exit.WithCode(exit.Runtime, fmt.Errorf("schemas of %s: %w", src, err))
	}
	return reg, nil
}

// LoadSchemas is LoadRegistry for commands that only need the schemas that
// load: each broken file is a warning on stderr, and its schema is unknown.
func LoadSchemas(cfg *config.Config, warn io.Writer) (*schemas.Registry, error) {
	reg, err := LoadRegistry(cfg)
	if err != nil {
		return nil, err
	}
	for _, ce := range reg.Broken() {
		fmt.Fprintf(warn, "pipeline: warning: %v (schema %q is unknown to this command)\n", OneLine(ce.Error()), ce.ID)
	}
	return reg, nil
}

// RefuseBroken is what `run` does with schema files that did not load:
// refuse to start, naming each, unless skip; then a warning per file (the
// workers dead-letter the jobs of a broken schema, naming its error).
func RefuseBroken(reg *schemas.Registry, skip bool, log *slog.Logger) error {
	broken := reg.Broken()
	if len(broken) == 0 {
		return nil
	}
	if !skip {
		var b strings.Builder
		fmt.Fprintf(&b, "%d schema file(s) did not load (fix them, or start anyway with --skip-broken-schemas: their jobs are then dead-lettered):", len(broken))
		for _, ce := range broken {
			fmt.Fprintf(&b, "\n  %s", OneLine(ce.Error()))
		}
		return exit.Fail(exit.Runtime, "%s", b.String())
	}
	for _, ce := range broken {
		log.Warn("schema file did not load; its jobs are dead-lettered", "file", ce.File, "schema", ce.ID, "err", OneLine(ce.Err.Error()))
	}
	return nil
}

// OneLine folds a multi-line error (a compiler's list of causes) into one line.
func OneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
