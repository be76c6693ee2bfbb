package main

import (
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"text/tabwriter"

	"github.com/urfave/cli/v2"

	"github.com/llmpipeline/pipeline/internal/app"
	"github.com/llmpipeline/pipeline/internal/config"
	"github.com/llmpipeline/pipeline/internal/escape"
	"github.com/llmpipeline/pipeline/sanitize"
	"github.com/llmpipeline/pipeline/schemas"
)

// shortVersion is a schema version as the report prints it: the first 8
// characters of the hash.
func shortVersion(v string) string {
	if len(v) > 8 {
		return v[:8]
	}
	return v
}

// maxRawInput bounds what sanitize and validate read.
const maxRawInput = 64 << 20

func (e *env) readAll(c *cli.Context) ([]byte, error) {
	in, name, err := e.readInput(c)
	if err != nil {
		return nil, err
	}
	defer in.Close()
	b, err := io.ReadAll(io.LimitReader(in, maxRawInput+1))
	if err != nil {
		return nil, fail(exitUsage, "reading %s: %w", name, err)
	}
	if len(b) > maxRawInput {
		return nil, fail(exitUsage, "%s is larger than %d MB", name, maxRawInput>>20)
	}
	return b, nil
}

func (e *env) sanitizeCommand() *cli.Command {
	return &cli.Command{
		Name:  "sanitize",
		Usage: "clean raw model output into JSON (code fences, prose, comments, trailing commas, quotes, ...)",
		Description: `Prints the cleaned JSON on stdout. --explain prints the stages applied on stderr. It never invents
data: truncated output and text without JSON are refused.
Exit codes: 0 cleaned; 1 refused (stderr says "truncated" or "no JSON"); 2 unreadable input.`,
		ArgsUsage: "[FILE|-]",
		Flags:     []cli.Flag{&cli.BoolFlag{Name: "explain", Usage: "print the stages applied on stderr"}},
		Action: func(c *cli.Context) error {
			raw, err := e.readAll(c)
			if err != nil {
				return err
			}
			res, err := sanitize.Clean(raw)
			if conf(c).Tools.Explain {
				if len(res.Stages) == 0 && err == nil {
					fmt.Fprintln(e.stderr, "stages: none (already valid JSON)")
				} else {
					fmt.Fprintf(e.stderr, "stages: %s\n", strings.Join(res.Stages, ", "))
				}
			}
			if err != nil {
				return fail(exitNegative, "refused: %w", err)
			}
			_, err = fmt.Fprintf(e.stdout, "%s\n", res.JSON)
			return err
		},
	}
}

func (e *env) validateCommand() *cli.Command {
	return &cli.Command{
		Name:  "validate",
		Usage: "sanitize and validate a raw model output against a schema; print the diagnostics as the model sees them",
		Description: `Other schema files of --schemas that do not load do not matter, only --schema's own file and
the files it references.
The schema's x-rules apply once the JSON Schema is satisfied, and its x-grounded values are looked
for in the text of --input when it is given (without it, grounding is skipped), as the workers do.
Exit codes: 0 valid; 1 invalid (diagnostics on stdout) or no usable JSON; 2 usage error;
3 the schema cannot be loaded (the error names the file and why).`,
		ArgsUsage: "[FILE|-]",
		Flags: flags([]cli.Flag{config.SchemasFlag(), config.DataDirFlag(), jsonFlag(),
			&cli.StringFlag{Name: "schema", Required: true, Usage: "schema id"},
			&cli.IntFlag{Name: "max-diagnostics", Value: 20, Usage: "diagnostics shown (the rest are counted)"},
			&cli.StringFlag{Name: "input", Usage: "the job's input text (a file): x-grounded values must occur in it", TakesFile: true},
		}, config.SchemaLimitFlags()),
		Action: func(c *cli.Context) error {
			reg, err := app.LoadRegistry(conf(c))
			if err != nil {
				return err
			}
			sc, ok := reg.Get(conf(c).Tools.Schema)
			if !ok {
				if ce, broken := reg.BrokenSchema(conf(c).Tools.Schema); broken {
					return fail(exitRuntime, "--schema %q: %w", conf(c).Tools.Schema, ce)
				}
				src, _ := app.ResolveSchemas(conf(c)) // it just resolved without error
				return fail(exitUsage, "--schema %q: unknown schema in %s (known: %s)", conf(c).Tools.Schema, src, strings.Join(reg.IDs(), ", "))
			}
			var in *schemas.Input
			if name := conf(c).Tools.Input; name != "" {
				text, err := readTextFile(name)
				if err != nil {
					return err
				}
				in = schemas.NewInput(text)
			}
			raw, err := e.readAll(c)
			if err != nil {
				return err
			}
			v := app.Validate(sc, raw, in, conf(c).Heal.MaxDiagnostics)
			if conf(c).Output.JSON {
				if err := jsonEncoder(e.stdout).Encode(v); err != nil {
					return err
				}
			} else {
				if len(v.Repairs) > 0 {
					fmt.Fprintf(e.stderr, "repairs: %s\n", strings.Join(v.Repairs, ", "))
				}
				switch {
				case v.Valid:
					fmt.Fprintf(e.stdout, "valid against %s@%s", sc.ID, sc.Version)
					if len(v.Grounding) > 0 {
						fmt.Fprintf(e.stdout, " (%d values grounded in the input)", len(v.Grounding))
					}
					fmt.Fprintln(e.stdout)
				case v.Error != "":
					fmt.Fprintf(e.stdout, "%s: %s\n", v.Class, escape.Line(v.Error))
				default:
					// the received values quote the input: no control character reaches the terminal
					fmt.Fprintln(e.stdout, escape.Text(schemas.Lines(v.Diagnostics, v.Omitted)))
				}
			}
			if !v.Valid {
				return &exitError{Code: exitNegative, Err: fmt.Errorf("invalid against %s (%s)", sc.ID, v.Class)}
			}
			return nil
		},
	}
}

// readTextFile reads validate's --input.
func readTextFile(name string) (string, error) {
	f, err := os.Open(name)
	if err != nil {
		return "", fail(exitUsage, "--input: %w", err)
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, maxRawInput+1))
	if err != nil {
		return "", fail(exitUsage, "--input: reading %s: %w", name, err)
	}
	if len(b) > maxRawInput {
		return "", fail(exitUsage, "--input: %s is larger than %d MB", name, maxRawInput>>20)
	}
	return string(b), nil
}

func (e *env) schemasCommand() *cli.Command {
	return &cli.Command{
		Name:  "schemas",
		Usage: "list the schemas, or lint them for contradictions no output can satisfy",
		Subcommands: []*cli.Command{
			{
				Name:  "list",
				Usage: "list schema ids with their version hash and file; files that do not load are listed as broken, with why",
				Description: `A header, then one line per schema file: id, version (its first 8 characters, as the report
shows it, or "broken"), file, and for a broken file its error; with
--json one object per line: {"id","version","file","uses"?} or {"id","file","broken":true,"error"}.
"uses" lists the other files of the directory a schema references (its version covers them).
Exit 0 even with broken files ('pipeline schemas lint' exits 1 for them).`,
				ArgsUsage: " ",
				Flags:     flags([]cli.Flag{config.SchemasFlag(), config.DataDirFlag(), jsonFlag()}, config.SchemaLimitFlags()),
				Action: func(c *cli.Context) error {
					reg, err := app.LoadRegistry(conf(c))
					if err != nil {
						return err
					}
					type row struct {
						ID      string   `json:"id"`
						Version string   `json:"version,omitempty"`
						File    string   `json:"file"`
						Uses    []string `json:"uses,omitempty"`
						Broken  bool     `json:"broken,omitempty"`
						Error   string   `json:"error,omitempty"`
					}
					var rows []row
					for _, id := range reg.IDs() {
						s, _ := reg.Get(id)
						rows = append(rows, row{ID: s.ID, Version: s.Version, File: s.File, Uses: s.Uses})
					}
					for _, ce := range reg.Broken() {
						rows = append(rows, row{ID: ce.ID, File: ce.File, Broken: true, Error: app.OneLine(ce.Err.Error())})
					}
					sort.SliceStable(rows, func(i, j int) bool { return rows[i].File < rows[j].File })
					if conf(c).Output.JSON {
						for _, r := range rows {
							b, err := json.Marshal(r)
							if err != nil {
								return err
							}
							fmt.Fprintf(e.stdout, "%s\n", escape.JSON(b))
						}
						return nil
					}
					// The version as the report shows it (its first 8
					// characters); --json has it whole.
					tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
					fmt.Fprintln(tw, "ID\tVERSION\tFILE\tERROR")
					for _, r := range rows {
						version := shortVersion(r.Version)
						if r.Broken {
							version = "broken"
						}
						fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", escape.Line(r.ID), version, escape.Line(r.File), escape.Line(r.Error))
					}
					if err := tw.Flush(); err != nil {
						return err
					}
					return nil
				},
			},
			{
				Name:  "lint",
				Usage: "check schemas for contradictions (minimum > maximum, empty enum, a required property forbidden, ...)",
				Description: `DIR defaults to --schemas (else the one remembered for --data-dir, else the built-in examples). A file that does not even load is
reported too: bad_file_name (the name cannot be a schema id), over_limit (--schema-max-bytes,
--schema-max-depth), invalid_json, duplicate_id, bad_ref (a $ref outside the directory) or
compile_error. Exit 1 when there are findings.`,
				ArgsUsage: "[DIR]",
				Flags:     flags([]cli.Flag{config.SchemasFlag(), config.DataDirFlag(), jsonFlag()}, config.SchemaLimitFlags()),
				Action: func(c *cli.Context) error {
					src, err := app.ResolveSchemas(conf(c))
					if err != nil {
						return err
					}
					dir := src.Dir
					if c.NArg() > 1 {
						return fail(exitUsage, "lint takes at most one DIR")
					}
					if c.NArg() == 1 {
						dir = c.Args().First()
					}
					cfg, err := app.SchemaConfig(conf(c))
					if err != nil {
						return err
					}
					reg, err := schemas.LoadWith(dir, cfg)
					if err != nil && c.NArg() == 0 {
						return withCode(exitRuntime, fmt.Errorf("schemas of %s: %w", src, err))
					}
					if err != nil {
						return withCode(exitRuntime, err)
					}
					findings := reg.Lint()
					for _, f := range findings {
						if conf(c).Output.JSON {
							b, _ := json.Marshal(f)
							fmt.Fprintf(e.stdout, "%s\n", escape.JSON(b))
							continue
						}
						l := escape.Line
						fmt.Fprintf(e.stdout, "%s: %s%s: [%s] %s\n    suggestion: %s\n", l(cmp.Or(f.File, f.Schema)), "#", l(f.Path), f.Rule, l(f.Message), l(f.Suggestion))
					}
					if len(findings) > 0 {
						return fail(exitNegative, "%s", plural(len(findings), "finding"))
					}
					if !conf(c).Output.JSON {
						fmt.Fprintln(e.stdout, "no findings")
					}
					return nil
				},
			},
		},
	}
}
