package main

import (
	"encoding/json"
	"fmt"
	"path/filepath"

	"github.com/urfave/cli/v2"

	"github.com/llmpipeline/pipeline/chunk"
	"github.com/llmpipeline/pipeline/internal/app"
	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/config"
	"github.com/llmpipeline/pipeline/internal/escape"
	"github.com/llmpipeline/pipeline/internal/queue"
	"github.com/llmpipeline/pipeline/job"
)

func (e *env) submitCommand() *cli.Command {
	return &cli.Command{
		Name:      "submit",
		Usage:     "check JSONL jobs and publish them on the jobs stream",
		ArgsUsage: "[FILE|-]",
		Description: `Every line is checked first (valid JSON, required fields id/schema/input, known schema, id not
repeated in the file, at most --max-job-bytes, UTF-8). A job's "files" (paths relative to FILE's directory,
or data URLs) must be PNG, JPEG, WebP, GIF or PDF by their content and at most --max-file-bytes each; they
are stored once by digest in the object store and the job references them (docs/files.md). A leading UTF-8 byte order mark and CRLF
line ends are accepted, and a line that is not UTF-8 (a Latin-1 export) is refused at its first such
byte. Bad lines are reported as FILE:LINE: reason and nothing is published, unless --skip-invalid. The input is read twice, to check it and then to
publish it, so submit's own memory stays flat whatever its size. When submit starts the embedded
server itself, that server's duplicate index (about 94 bytes per job id published within
--duplicate-window) lives in its process: submit then publishes at most 120,000 jobs per window, so
it stays under 100 MB; past that it waits, and says so once (start run first, or use --nats-url, to
publish at full speed); stdin
is first copied to a temporary file
(in $TMPDIR, removed at the end). A job id whose run already ended (the job ledger,
bucket ` + broker.BucketLedger + `, remembers every ended job id on the cluster, beyond the duplicate
window) is counted as already done and not published; --rerun publishes it again as a new run
(message id <job id>~r<n>). A job id whose first and last runs both ran another input (schema, input
or instructions differ; the ledger keeps a digest of them) is counted as changed, named on stderr and
not published;
--rerun-changed publishes those, and only those, as a new run. A job id already in the stream
within the duplicate window is counted as a duplicate, not published again. Exit 1 when lines were
rejected without --skip-invalid.`,
		Flags: flags(config.BrokerFlags(), config.StreamLimitFlags(), []cli.Flag{config.SchemasFlag(), jsonFlag(), config.MaxJobBytesFlag(), config.MaxFileBytesFlag(),
			&cli.BoolFlag{Name: "skip-invalid", Usage: "publish the valid lines and report the bad ones"},
			&cli.BoolFlag{Name: "rerun", Usage: "publish jobs whose run already ended again, as a new run (as 'dlq replay' does); without it they are counted as already done"},
			&cli.BoolFlag{Name: "rerun-changed", Usage: "publish, as a new run, the jobs whose id already ended with another input (an edited line); the unchanged ones stay already done"},
			&cli.IntFlag{Name: "max-errors", Value: 50, Usage: "bad lines printed (the rest are counted)"},
		}, config.SchemaLimitFlags(), config.ChunkFlags(), config.LogFlags()),
		Action: func(c *cli.Context) error {
			log, err := e.logger(c)
			if err != nil {
				return err
			}
			limit, err := app.MaxJobBytes(conf(c))
			if err != nil {
				return err
			}
			reg, err := app.LoadSchemas(conf(c), c.App.ErrWriter)
			if err != nil {
				return err
			}
			open, name, cleanup, err := e.jobSource(c)
			if err != nil {
				return err
			}
			defer cleanup()
			// First pass: check every line, the ids on disk, so memory
			// stays flat whatever the size.
			jc := app.NewJobCheck(reg, limit)
			if jc.MaxFileBytes, err = app.MaxFileBytes(conf(c)); err != nil {
				return err
			}
			if name != "<stdin>" {
				jc.Dir = filepath.Dir(name)
			}
			jc.Chunking = job.Chunking{Chars: conf(c).Submit.ChunkChars, Overlap: conf(c).Submit.ChunkOverlap}
			if err := chunk.Check(jc.Chunking.Chars, jc.Chunking.Overlap); err != nil {
				return fail(exitUsage, "--chunk-chars %d --chunk-overlap %d: %w", jc.Chunking.Chars, jc.Chunking.Overlap, err)
			}
			switch {
			case conf(c).Submit.Rerun:
				jc.Rerun = app.RerunAll
			case conf(c).Submit.RerunChanged:
				jc.Rerun = app.RerunChanged
			}
			if src, err := app.ResolveSchemas(conf(c)); err == nil { // it just resolved without error
				jc.Where = src.String()
			}
			defer jc.Close()
			bad, maxErrors := 0, conf(c).Submit.MaxErrors
			err = jc.ScanFrom(open, func(n int, reason string) {
				if bad < maxErrors {
					fmt.Fprintf(e.stderr, "%s:%d: %s\n", escape.Line(name), n, escape.Line(reason))
				}
				bad++
			})
			if err != nil {
				return fail(exitUsage, "reading %s: %w", name, err)
			}
			if bad > maxErrors {
				fmt.Fprintf(e.stderr, "%s: ... and %d more bad lines\n", name, bad-maxErrors)
			}
			if bad > 0 && !conf(c).Submit.SkipInvalid {
				e.printSubmit(c, queue.SubmitStats{}, bad)
				return fail(exitNegative, "%d of %d lines rejected, nothing published (fix them, or --skip-invalid)", bad, bad+jc.Valid)
			}
			var stats queue.SubmitStats
			if jc.Valid > 0 {
				conn, err := e.connect(c.Context, c, log)
				if err != nil {
					return err
				}
				defer conn.Close()
				if conn.Embedded() {
					// The server's duplicate index lives in this process.
					defer app.LimitSubmitMemory()()
					jc.OnPace = func() {
						log.Warn("pacing: the embedded nats server in this process remembers every job id for the duplicate window; to stay under 100 MB, submit lets it hold at most the budget at once (start 'pipeline run' on the data dir first, or use --nats-url, to publish at full speed)",
							"budget_ids", app.EmbeddedDedupeBudget, "duplicate_window", conn.DuplicateWindow())
					}
				}
				if err := app.WarnStreamLoss(c.Context, conf(c), conn, log); err != nil {
					return err
				}
				if err := app.ReconcileLedger(c.Context, conf(c), conn, nil, log); err != nil {
					return err
				}
				// Second pass: read the input again and publish it.
				stats, err = app.SubmitChecked(c.Context, conn, jc, open, jc.Rerun, e.progress("submitted", jc.Valid))
				if err != nil {
					return withCode(exitRuntime, fmt.Errorf("%s: %w", name, err))
				}
			}
			for i, id := range stats.ChangedIDs {
				if i == maxErrors {
					fmt.Fprintf(e.stderr, "%s: ... and %d more changed jobs\n", name, stats.Changed-i)
					break
				}
				fmt.Fprintf(e.stderr, "%s: job id %q already ended with another input; not published (--rerun-changed runs it again)\n", name, id)
			}
			e.printSubmit(c, stats, bad)
			return nil
		},
	}
}

func (e *env) printSubmit(c *cli.Context, s queue.SubmitStats, rejected int) {
	if conf(c).Output.JSON {
		b, _ := json.Marshal(map[string]int{"published": s.Published, "duplicates": s.Duplicates,
			"already_done": s.AlreadyDone, "changed": s.Changed, "reruns": s.Reruns, "rejected": rejected, "chunks": s.Chunks})
		fmt.Fprintf(e.stdout, "%s\n", b)
		return
	}
	reruns := ""
	if s.Reruns > 0 {
		reruns = fmt.Sprintf(" (%d as a new run)", s.Reruns)
	}
	changed := ""
	if s.Changed > 0 {
		changed = fmt.Sprintf(", changed %d", s.Changed)
	}
	chunks := ""
	if s.Chunks > 0 {
		chunks = fmt.Sprintf(" (%d of them chunks of long documents)", s.Chunks)
	}
	fmt.Fprintf(e.stdout, "published %d%s%s, duplicates %d, already done %d%s, rejected %d\n", s.Published, chunks, reruns, s.Duplicates, s.AlreadyDone, changed, rejected)
}
