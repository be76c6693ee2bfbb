package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/urfave/cli/v2"
)

// schemasMemo is the file, in the data dir, that remembers the --schemas
// directory `submit` and `run` last used: the other commands on that data
// dir (report and its lint, ui, validate, schemas list and lint, and a
// later run) use it unless given --schemas. One line: the directory's
// absolute path.
const schemasMemo = "schemas-dir"

// schemaSource is the schema directory a command uses and where it came
// from, for the messages that name it.
type schemaSource struct {
	dir        string // "" for the built-in schemas
	remembered string // the memo file it was read from, or ""
}

func (s schemaSource) String() string {
	switch {
	case s.dir == "":
		return "the built-in schemas (no --schemas given; pass --schemas DIR for your own)"
	case s.remembered != "":
		return fmt.Sprintf("%s (the --schemas of an earlier submit or run, remembered in %s; pass --schemas DIR for another)", s.dir, s.remembered)
	}
	return s.dir + " (--schemas)"
}

// remembers reports whether the command's --schemas is remembered for the
// data dir: the commands that put jobs and schemas to work.
func remembers(c *cli.Context) bool {
	switch c.Command.Name {
	case "submit", "run":
		return true
	}
	return false
}

// resolveSchemas is the command's schema directory: --schemas (or
// $PIPELINE_SCHEMAS) when given, which submit and run then remember in the
// data dir (an empty one forgets: the built-in schemas); else the one
// remembered there; else the built-in schemas.
func resolveSchemas(c *cli.Context) (schemaSource, error) {
	dataDir := c.String("data-dir") // "" for the demo's fresh one
	memo := filepath.Join(dataDir, schemasMemo)
	if c.IsSet("schemas") {
		dir := c.String("schemas")
		if dir != "" {
			abs, err := filepath.Abs(dir)
			if err != nil {
				return schemaSource{}, fail(exitUsage, "--schemas %q: %w", dir, err)
			}
			dir = abs
		}
		if remembers(c) && dataDir != "" {
			if err := remember(c, memo, dir); err != nil {
				return schemaSource{}, err
			}
		}
		return schemaSource{dir: dir}, nil
	}
	if dataDir == "" {
		return schemaSource{}, nil
	}
	b, err := os.ReadFile(memo)
	if errors.Is(err, fs.ErrNotExist) {
		return schemaSource{}, nil
	}
	if err != nil {
		return schemaSource{}, fail(exitRuntime, "reading the remembered --schemas: %w", err)
	}
	dir := strings.TrimSpace(string(b))
	if dir == "" {
		return schemaSource{}, nil
	}
	return schemaSource{dir: dir, remembered: memo}, nil
}

// remember writes (or, for the built-in schemas, removes) the data dir's
// memo. A data dir that does not exist is created only for the embedded
// server, which needs it anyway; a worker on --nats-url without one keeps
// nothing.
func remember(c *cli.Context, memo, dir string) error {
	dataDir := filepath.Dir(memo)
	if _, err := os.Stat(dataDir); err != nil {
		if c.String("nats-url") != "" || !errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err := os.MkdirAll(dataDir, 0o700); err != nil {
			return fail(exitRuntime, "creating --data-dir: %w", err)
		}
	}
	if dir == "" {
		if err := os.Remove(memo); err != nil && !errors.Is(err, fs.ErrNotExist) {
			return fail(exitRuntime, "forgetting the remembered --schemas: %w", err)
		}
		return nil
	}
	tmp := memo + ".tmp"
	if err := os.WriteFile(tmp, []byte(dir+"\n"), 0o600); err != nil {
		return fail(exitRuntime, "remembering --schemas in %s: %w", memo, err)
	}
	if err := os.Rename(tmp, memo); err != nil {
		return fail(exitRuntime, "remembering --schemas in %s: %w", memo, err)
	}
	return nil
}
