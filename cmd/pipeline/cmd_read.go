package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/llmpipeline/pipeline/index"
	"github.com/llmpipeline/pipeline/internal/app"
	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/config"
	"github.com/llmpipeline/pipeline/internal/escape"
	"github.com/llmpipeline/pipeline/internal/queue"
	"github.com/llmpipeline/pipeline/internal/sink"
	"github.com/llmpipeline/pipeline/job"
	"github.com/llmpipeline/pipeline/report"
	"github.com/llmpipeline/pipeline/schemas"
)

func (e *env) resultsCommand() *cli.Command {
	return &cli.Command{
		Name:  "results",
		Usage: "print the results stored on the RESULTS stream, one JSON object per line",
		Description: `Each line: {"job_id","schema","schema_version","attempts","data",...}. Without --json only
job_id, schema, attempts, data and grounding (where the schema's x-grounded values are in the input) are printed; --json prints the whole outcome with its attempt trace,
as stored on the stream. Either way one compact JSON object per line, whatever the model wrote.
--latest leaves out the results of runs a later run of the same job superseded (a rerun or a
replay that ended), so an edited file run again with submit --rerun-changed prints each job once.`,
		ArgsUsage: " ",
		Flags: flags(config.BrokerFlags(), []cli.Flag{jsonFlag(),
			&cli.StringFlag{Name: "schema", Usage: "only results of this schema"},
			&cli.BoolFlag{Name: "latest", Usage: "only each job's latest run: leave out a result whose job ran again later (--rerun, --rerun-changed, dlq replay), as the job ledger says"},
			&cli.BoolFlag{Name: "chunks", Usage: "also the results of the chunk jobs of long documents (without it: the documents, merged, and the ordinary jobs)"},
		}, config.LogFlags()),
		Action: func(c *cli.Context) error {
			if err := app.RequireStore(conf(c)); err != nil {
				return err
			}
			conn, _, err := e.dial(c)
			if err != nil {
				return err
			}
			defer conn.Close()
			filter := broker.SubjectResults + ".>"
			if s := conf(c).Filter.Schema; s != "" {
				filter = broker.SchemaSubject(broker.SubjectResults, s)
			}
			enc := jsonEncoder(e.stdout)
			var line bytes.Buffer
			asJSON := conf(c).Output.JSON // read once: building the Config is not free, and emit runs per result
			chunks := c.Bool("chunks")
			emit := func(m sink.Msg) error {
				if !chunks && app.IsChunkOutcome(m.Data) {
					return nil
				}
				if asJSON {
					// compacted: a message stored by an older worker may
					// hold the model's answer as it was spelled, newlines
					// included
					line.Reset()
					if err := json.Compact(&line, m.Data); err != nil {
						return fmt.Errorf("message on %s: not JSON: %w", m.Subject, err)
					}
					line.WriteByte('\n')
					_, err := e.stdout.Write(escape.JSON(line.Bytes()))
					return err
				}
				o, err := job.DecodeOutcome(m.Data)
				if err != nil {
					return fmt.Errorf("message on %s: %w", m.Subject, err)
				}
				return enc.Encode(struct {
					JobID     string          `json:"job_id"`
					Schema    string          `json:"schema"`
					Attempts  int             `json:"attempts"`
					Data      json.RawMessage `json:"data"`
					Grounding []job.Grounding `json:"grounding,omitempty"`
					Files     []job.File      `json:"files,omitempty"`
					Chunks    *job.ChunkCount `json:"chunks,omitempty"`
					Conflicts []job.Conflict  `json:"conflicts,omitempty"`
				}{o.JobID, o.Schema, o.Attempts, o.Data, o.Grounding, o.Files, o.Chunks, o.Conflicts})
			}
			if conf(c).Report.Latest {
				latest := app.NewLatestFilter(conn, app.LatestBatch, emit)
				err = sink.ReadStream(c.Context, conn, broker.StreamResults, filter, func(m sink.Msg) error { return latest.Add(c.Context, m) })
				if err == nil {
					err = latest.Flush(c.Context)
				}
			} else {
				err = sink.ReadStream(c.Context, conn, broker.StreamResults, filter, emit)
			}
			return withCode(exitRuntime, err)
		},
	}
}

func (e *env) statsCommand() *cli.Command {
	return &cli.Command{
		Name:  "stats",
		Usage: "print job counts from the index: jobs, succeeded, dead-lettered, by attempt, by class, and the cost when a price is known",
		Description: `Before the first 'pipeline run' has indexed an outcome (no index yet), stats reads the jobs
stream instead and says how many jobs are queued: "N jobs queued, no outcomes yet" (--json: the
counts at zero and "queued": N).`,
		ArgsUsage: " ",
		Flags:     flags(config.StoreFlags(), []cli.Flag{jsonFlag()}, config.BrokerFlags(), config.LogFlags()),
		Action: func(c *cli.Context) error {
			if _, err := os.Stat(app.DBPath(conf(c))); errors.Is(err, fs.ErrNotExist) && conf(c).Store.DB == "" {
				return e.printQueued(c)
			}
			st, err := app.OpenStore(conf(c), false)
			if err != nil {
				return err
			}
			defer st.Close()
			return e.printStats(c.Context, st, conf(c).Output.JSON)
		},
	}
}

func (e *env) printStats(ctx context.Context, st *index.Store, asJSON bool) error {
	s, err := st.Stats(ctx, index.Filter{})
	if err != nil {
		return withCode(exitRuntime, fmt.Errorf("reading stats: %w", err))
	}
	if asJSON {
		return jsonEncoder(e.stdout).Encode(s)
	}
	return app.WriteStats(e.stdout, s)
}

// printQueued is stats before any outcome is indexed: the jobs waiting on
// the jobs stream (a data dir without a NATS store is no pipeline data).
func (e *env) printQueued(c *cli.Context) error {
	if err := app.RequireStore(conf(c)); err != nil {
		return err
	}
	conn, _, err := e.dial(c)
	if err != nil {
		return err
	}
	defer conn.Close()
	p, err := queue.Pending(c.Context, conn)
	if err != nil {
		return withCode(exitRuntime, fmt.Errorf("reading the jobs stream: %w", err))
	}
	queued := p.Pending + uint64(p.AckPending)
	if conf(c).Output.JSON {
		return jsonEncoder(e.stdout).Encode(struct {
			index.Stats
			Queued uint64 `json:"queued"`
		}{index.Stats{ByAttempt: map[int]int{}, ByClass: map[job.Class]int{}, BySchema: map[string]index.SchemaStats{}}, queued})
	}
	_, err = fmt.Fprintf(e.stdout, "%s queued, no outcomes yet ('pipeline run' processes them)\n", plural(int(queued), "job"))
	return err
}

func (e *env) reportCommand() *cli.Command {
	return &cli.Command{
		Name:  "report",
		Usage: "cluster failures by schema field and keyword, show the heal funnel and flag impossible schemas",
		Description: `Formats: table (terminal), json (stable: {"generated_at","source","range","totals","clusters_total",
"clusters":[...],"funnel":{...},"lint":[...]}, see docs/report.md), markdown, html (one self-contained file with
charts). Every format opens with what it covers: the index file, the time range of the outcomes, when it
was generated, the totals, and how many clusters it lists of how many.

By default the report covers each schema's latest version (the version of its most recent outcome in the
index); --version all covers every version, --version HASH the one it names (a prefix will do). A
cluster is flagged impossible when it failed in at least --min-jobs distinct jobs with a heal rate at
or below --max-heal-rate, or on three consecutive dead letters with no success in between. A dead letter whose replay succeeded (pipeline dlq
replay) is counted as "replayed, healed" and toward no flag. The static lint of the schemas is included.
When a model's price was known, or a fallback model answered, a "cost and models" section follows the
funnel: the cost, the cost per succeeded job (the failures paid for included), the share spent on
healing, the jobs healed only by a fallback model, and the jobs per model of their final answer.`,
		ArgsUsage: " ",
		Flags: flags(config.StoreFlags(), []cli.Flag{config.SchemasFlag(),
			&cli.StringFlag{Name: "format", Aliases: []string{"f"}, Value: "table", Usage: "table, json, markdown or html"},
			&cli.BoolFlag{Name: "json", Usage: "same as --format json"},
			&cli.StringFlag{Name: "schema", Usage: "only this schema"},
			&cli.StringFlag{Name: "model", Usage: "only the jobs whose final answer came from this model spec (a --model or --fallback-model of the runs): its funnel and clusters"},
			&cli.StringFlag{Name: "version", Value: report.VersionLatest, Usage: "schema versions covered: 'latest' (each schema's latest in the index), 'all' (every version, each row labelled), or a version hash (or its first characters, as the tables show it)"},
			&cli.StringFlag{Name: "since", Usage: "only failures since this time (RFC 3339, a date, or a duration ago like 24h)"},
			&cli.IntFlag{Name: "min-jobs", Value: 3, Usage: "distinct jobs a cluster needs to be flagged impossible"},
			&cli.Float64Flag{Name: "max-heal-rate", Value: 0.10, Usage: "a cluster is flagged impossible when both its heal rate (jobs that still succeeded) and its fix rate (jobs where a later attempt fixed the field) are at or below this"},
			&cli.IntFlag{Name: "top", Value: 20, Usage: "clusters listed, the ones that kill the most jobs first (0 for all); the report says how many there are in all"},
		}, config.SchemaLimitFlags()),
		Action: func(c *cli.Context) error {
			format := conf(c).Output.Format
			if conf(c).Output.JSON {
				format = "json"
			}
			switch format {
			case "table", "json", "markdown", "html":
			default:
				return fail(exitUsage, "--format %q: use table, json, markdown or html", format)
			}
			reg, err := app.LoadSchemas(conf(c), c.App.ErrWriter)
			if err != nil {
				return err
			}
			st, err := app.OpenStore(conf(c), false)
			if err != nil {
				return err
			}
			defer st.Close()
			return e.printReport(c, st, reg, format)
		},
	}
}

func (e *env) printReport(c *cli.Context, st *index.Store, reg *schemas.Registry, format string) error {
	since, err := index.ParseTime(conf(c).Filter.Since, time.Now())
	if err != nil {
		return fail(exitUsage, "--since: %w", err)
	}
	model := conf(c).Filter.Model
	if c.Command.Name != "report" {
		model = "" // demo's --model is the model it runs, not a filter
	}
	opts := report.Options{
		Schema:      conf(c).Filter.Schema,
		Model:       model,
		Version:     conf(c).Report.Version,
		Since:       since,
		MinJobs:     conf(c).Report.MinJobs,
		MaxHealRate: conf(c).Report.MaxHealRate,
		Top:         conf(c).Report.Top,
		Source:      st.Path(),
	}
	for _, f := range reg.Lint() {
		if opts.Schema != "" && f.Schema != opts.Schema {
			continue
		}
		opts.Lint = append(opts.Lint, report.LintFinding{Schema: f.Schema, File: f.File, Path: f.Path, Rule: f.Rule, Message: f.Message, Suggestion: f.Suggestion})
	}
	r, err := report.Build(c.Context, st, opts)
	if err != nil {
		return withCode(exitRuntime, fmt.Errorf("building the report: %w", err))
	}
	w := e.stdout
	if format == "json" {
		w = escape.JSONWriter(w) // Render writes the JSON in one Write
	}
	return withCode(exitRuntime, r.Render(w, format))
}
