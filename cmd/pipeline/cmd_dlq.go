package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/llmpipeline/pipeline/actions"
	"github.com/llmpipeline/pipeline/index"
	"github.com/llmpipeline/pipeline/internal/app"
	"github.com/llmpipeline/pipeline/internal/config"
	"github.com/llmpipeline/pipeline/internal/escape"
	"github.com/llmpipeline/pipeline/internal/sink"
	"github.com/llmpipeline/pipeline/worker"
)

func (e *env) dlqCommand() *cli.Command {
	return &cli.Command{
		Name:  "dlq",
		Usage: "inspect and act on dead letters: list, show, replay, purge, export, rebuild",
		Subcommands: []*cli.Command{
			{
				Name:      "list",
				Usage:     "list dead letters, newest first",
				ArgsUsage: " ",
				Flags:     flags(config.StoreFlags(), config.FilterFlags(), []cli.Flag{jsonFlag(), &cli.BoolFlag{Name: "replayed", Usage: "include dead letters already replayed"}}),
				Action: func(c *cli.Context) error {
					f, err := app.Filter(conf(c).Filter)
					if err != nil {
						return err
					}
					f.IncludeReplayed = conf(c).Actions.Replayed
					st, err := app.OpenStore(conf(c), false)
					if err != nil {
						return err
					}
					defer st.Close()
					entries, err := st.List(c.Context, f)
					if err != nil {
						return withCode(exitRuntime, err)
					}
					if conf(c).Output.JSON {
						enc := jsonEncoder(e.stdout)
						for _, en := range entries {
							if err := enc.Encode(en); err != nil {
								return err
							}
						}
						return nil
					}
					tw := tabwriter.NewWriter(e.stdout, 0, 4, 2, ' ', 0)
					fmt.Fprintln(tw, "JOB\tSCHEMA\tCLASS\tATTEMPTS\tFIRST PATH\tFAILED AT\tREASON")
					for _, en := range entries {
						l := escape.Line // a model wrote the paths and reasons: no control character reaches the terminal
						fmt.Fprintf(tw, "%s\t%s\t%s\t%d\t%s\t%s\t%s\n", l(en.JobID), l(en.Schema), l(string(en.Class)), en.Attempts,
							l(en.FirstPath), en.FailedAt.Local().Format("2006-01-02 15:04:05"), truncate(l(en.Reason), 80))
					}
					return tw.Flush()
				},
			},
			{
				Name:      "show",
				Usage:     "show one job's whole transcript: the job, every attempt's raw output, repairs and diagnostics",
				ArgsUsage: "JOB_ID",
				Flags:     flags(config.StoreFlags(), []cli.Flag{jsonFlag()}),
				Action: func(c *cli.Context) error {
					if c.NArg() != 1 {
						return fail(exitUsage, "show takes one JOB_ID")
					}
					st, err := app.OpenStore(conf(c), false)
					if err != nil {
						return err
					}
					defer st.Close()
					o, err := st.Get(c.Context, c.Args().First())
					if errors.Is(err, index.ErrNotFound) {
						return fail(exitNegative, "job %q is not in the index", c.Args().First())
					}
					if err != nil {
						return withCode(exitRuntime, err)
					}
					if conf(c).Output.JSON {
						enc := jsonEncoder(e.stdout)
						enc.SetIndent("", "  ")
						return enc.Encode(o)
					}
					return index.WriteTranscript(e.stdout, o)
				},
			},
			e.replayCommand(),
			{
				Name:      "purge",
				Usage:     "delete dead letters from the index and their messages (with their bodies) from the DLQ stream",
				ArgsUsage: " ",
				Flags: flags(config.BrokerFlags(), config.StoreFlags(), config.FilterFlags(), []cli.Flag{
					&cli.StringFlag{Name: "before", Usage: "only dead letters older than this (same forms as --until)"},
					&cli.BoolFlag{Name: "dry-run", Usage: "print what would go, delete nothing"},
					&cli.BoolFlag{Name: "all", Usage: "allow purging without any filter"},
					&cli.DurationFlag{Name: "keep-files", Value: actions.DefaultKeepFiles, Usage: "delete a stored file nothing names (no job queued or held in a batch, no result or dead letter on the streams or in the index) only once it was stored this long ago (a submit stores files before it publishes their jobs)"},
				}, config.LogFlags()),
				Action: func(c *cli.Context) error {
					f, err := app.Filter(conf(c).Filter)
					if err != nil {
						return err
					}
					if b := conf(c).Actions.Before; b != "" {
						if f.Until, err = index.ParseTime(b, time.Now()); err != nil {
							return fail(exitUsage, "--before: %w", err)
						}
					}
					if actions.EmptyFilter(f) && !conf(c).Actions.All {
						return fail(exitUsage, "purge needs a filter (--before, --schema, --class, ...) or --all")
					}
					st, err := app.OpenStore(conf(c), false)
					if err != nil {
						return err
					}
					defer st.Close()
					var ids []string
					if conf(c).Actions.DryRun {
						ids, err = actions.Purge(c.Context, st, f, true, conf(c).Actions.All)
					} else {
						conn, _, derr := e.dial(c)
						if derr != nil {
							return derr
						}
						defer conn.Close()
						ids, err = actions.PurgeWithStreams(c.Context, conn, st, f, false, conf(c).Actions.All, conf(c).Actions.KeepFiles)
					}
					if err != nil {
						return withCode(exitRuntime, err)
					}
					verb := "purged"
					if conf(c).Actions.DryRun {
						verb = "would purge"
					}
					fmt.Fprintf(e.stdout, "%s %d dead letters\n", verb, len(ids))
					if conf(c).Actions.DryRun {
						for _, id := range ids {
							fmt.Fprintln(e.stdout, escape.Line(id))
						}
					}
					return nil
				},
			},
			{
				Name:      "export",
				Usage:     "write dead letters as JSONL (the whole outcome with its trace), to stdout",
				ArgsUsage: " ",
				Flags:     flags(config.StoreFlags(), config.FilterFlags()),
				Action: func(c *cli.Context) error {
					f, err := app.Filter(conf(c).Filter)
					if err != nil {
						return err
					}
					st, err := app.OpenStore(conf(c), false)
					if err != nil {
						return err
					}
					defer st.Close()
					n, err := st.Export(c.Context, f, e.stdout)
					if err != nil {
						return withCode(exitRuntime, err)
					}
					fmt.Fprintf(e.stderr, "exported %d dead letters\n", n)
					return nil
				},
			},
			{
				Name:      "rebuild",
				Usage:     "re-create the SQLite index from the RESULTS and DLQ streams",
				ArgsUsage: " ",
				Flags:     flags(config.BrokerFlags(), []cli.Flag{&cli.StringFlag{Name: "db", EnvVars: []string{"PIPELINE_DB"}, Usage: "SQLite index file (default <data-dir>/pipeline.db)"}}, config.LogFlags()),
				Action: func(c *cli.Context) error {
					conn, log, err := e.dial(c)
					if err != nil {
						return err
					}
					defer conn.Close()
					st, err := app.OpenStore(conf(c), true)
					if err != nil {
						return err
					}
					defer st.Close()
					if err := st.Reset(c.Context); err != nil {
						return withCode(exitRuntime, err)
					}
					// The sink reads the streams from their start into the
					// empty index, as it would catch up after a crash.
					if err := sink.New(conn, worker.Index(st, log), sink.Config{Batch: 1000, UntilIdle: true, Logger: log}).Run(c.Context); err != nil {
						return withCode(exitRuntime, fmt.Errorf("rebuilding the index: %w", err))
					}
					if err := c.Context.Err(); err != nil {
						return withCode(exitRuntime, fmt.Errorf("rebuilding the index: %w", err))
					}
					s, err := st.Stats(c.Context, index.Filter{IncludeReplayed: true})
					if err != nil {
						return withCode(exitRuntime, err)
					}
					fmt.Fprintf(e.stdout, "indexed %d outcomes\n", s.Jobs)
					return nil
				},
			},
		},
	}
}

func (e *env) replayCommand() *cli.Command {
	return &cli.Command{
		Name:  "replay",
		Usage: "publish dead-lettered jobs again (by id, filter or cluster), after a fix",
		Description: `Each job is republished as it was submitted, under a new message id (<job id>~r<n>), and its dead
letter is marked replayed; its new outcome is indexed as run n. With --dry-run only the count and
the ids are printed. Failures are printed per job; exit 1 if any job could not be replayed.`,
		ArgsUsage: "[JOB_ID...]",
		Flags: flags(config.BrokerFlags(), config.StoreFlags(), config.FilterFlags(), []cli.Flag{
			&cli.BoolFlag{Name: "dry-run", Usage: "print the count and the ids, publish nothing"},
			&cli.GenericFlag{Name: "id", Value: &idList{}, Usage: "a job id to replay (repeatable; same as JOB_ID arguments)"},
		}, config.LogFlags()),
		Action: func(c *cli.Context) error {
			f, err := app.Filter(conf(c).Filter)
			if err != nil {
				return err
			}
			f.IDs = append(conf(c).Actions.IDs, c.Args().Slice()...)
			if actions.EmptyFilter(f) {
				return fail(exitUsage, "replay needs job ids or a filter (--schema, --class, --cluster, ...)")
			}
			st, err := app.OpenStore(conf(c), false)
			if err != nil {
				return err
			}
			defer st.Close()
			entries, err := actions.Select(c.Context, st, f)
			if err != nil {
				return withCode(exitRuntime, err)
			}
			if err := app.ReplayMatched(f, entries); err != nil {
				return err
			}
			if conf(c).Actions.DryRun {
				fmt.Fprintf(e.stdout, "would replay %d jobs\n", len(entries))
				for _, en := range entries {
					fmt.Fprintln(e.stdout, escape.Line(en.JobID))
				}
				return nil
			}
			conn, _, err := e.dial(c)
			if err != nil {
				return err
			}
			defer conn.Close()
			res := actions.Replay(c.Context, conn, st, entries)
			for _, fl := range res.Failed {
				fmt.Fprintf(e.stderr, "%s: %s\n", escape.Line(fl.JobID), escape.Line(fl.Err.Error()))
			}
			fmt.Fprintf(e.stdout, "replayed %d jobs, %d failed\n", len(res.Replayed), len(res.Failed))
			if len(res.Failed) > 0 {
				return fail(exitNegative, "%d jobs could not be replayed", len(res.Failed))
			}
			return nil
		},
	}
}

// idList is a repeatable flag of job ids taken as given: a job id may hold
// commas and spaces, which a StringSliceFlag would split on or trim.
type idList struct{ ids []string }

func (l *idList) Set(v string) error { l.ids = append(l.ids, v); return nil }
func (l *idList) String() string     { return strings.Join(l.ids, ", ") }

// Value is the ids given (config.Actions.IDs).
func (l *idList) Value() []string { return slices.Clone(l.ids) }

// truncate cuts s to n characters (not bytes: a cut through a character
// would print a byte that is no UTF-8), the last one an ellipsis.
func truncate(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return string(r[:n-1]) + "…"
}
