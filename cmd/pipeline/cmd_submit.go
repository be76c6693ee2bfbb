package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/llmpipeline/pipeline/ingest"
	"github.com/llmpipeline/pipeline/schemas"
)

// maxJobLine bounds one JSONL line (one job).
const maxJobLine = 16 << 20

func (e *env) submitCommand() *cli.Command {
	return &cli.Command{
		Name:      "submit",
		Usage:     "check JSONL jobs and publish them on the jobs stream",
		ArgsUsage: "[FILE|-]",
		Description: `Every line is checked first (valid JSON, required fields id/schema/input, known schema, id not
repeated in the file). Bad lines are reported as FILE:LINE: reason and nothing is published, unless
--skip-invalid. A job id already in the stream within the duplicate window is counted as a duplicate,
not published again. Exit 1 when lines were rejected without --skip-invalid.`,
		Flags: flags(natsFlags(), []cli.Flag{schemasFlag(), jsonFlag(),
			&cli.BoolFlag{Name: "skip-invalid", Usage: "publish the valid lines and report the bad ones"},
			&cli.IntFlag{Name: "max-errors", Value: 50, Usage: "bad lines printed (the rest are counted)"},
		}, logFlags()),
		Action: func(c *cli.Context) error {
			log, err := e.logger(c)
			if err != nil {
				return err
			}
			reg, err := loadSchemas(c)
			if err != nil {
				return err
			}
			in, name, err := e.readInput(c)
			if err != nil {
				return err
			}
			defer in.Close()
			items, bad, err := checkJobs(in, reg)
			if err != nil {
				return fail(exitUsage, "reading %s: %w", name, err)
			}
			for i, b := range bad {
				if i == c.Int("max-errors") {
					fmt.Fprintf(e.stderr, "%s: ... and %d more bad lines\n", name, len(bad)-i)
					break
				}
				fmt.Fprintf(e.stderr, "%s:%d: %s\n", name, b.line, b.reason)
			}
			if len(bad) > 0 && !c.Bool("skip-invalid") {
				e.printSubmit(c, ingest.SubmitStats{}, len(bad))
				return fail(exitNegative, "%d of %d lines rejected, nothing published (fix them, or --skip-invalid)", len(bad), len(bad)+len(items))
			}
			var stats ingest.SubmitStats
			if len(items) > 0 {
				conn, err := e.connect(c.Context, c, log)
				if err != nil {
					return err
				}
				defer conn.Close()
				stats, err = submit(c.Context, conn, items, e.progress("submitted", len(items)))
				if err != nil {
					return withCode(exitRuntime, err)
				}
			}
			e.printSubmit(c, stats, len(bad))
			return nil
		},
	}
}

func (e *env) printSubmit(c *cli.Context, s ingest.SubmitStats, rejected int) {
	if c.Bool("json") {
		b, _ := json.Marshal(map[string]int{"published": s.Published, "duplicates": s.Duplicates, "rejected": rejected})
		fmt.Fprintf(e.stdout, "%s\n", b)
		return
	}
	fmt.Fprintf(e.stdout, "published %d, duplicates %d, rejected %d\n", s.Published, s.Duplicates, rejected)
}

func submit(ctx context.Context, conn *ingest.Conn, items []ingest.SubmitItem, progress func(int)) (ingest.SubmitStats, error) {
	stats, err := conn.Submit(ctx, items, progress)
	if progress != nil {
		progress(-1)
	}
	if err != nil {
		return stats, fmt.Errorf("publishing jobs (%d stored before the error): %w", stats.Published, err)
	}
	return stats, nil
}

// progress returns a callback that draws a progress line on a terminal
// (stderr), or nil when stderr is not a terminal. -1 ends the line.
func (e *env) progress(what string, total int) func(int) {
	if !isTTY(e.stderr) {
		return nil
	}
	return func(done int) {
		if done < 0 {
			fmt.Fprintln(e.stderr)
			return
		}
		fmt.Fprintf(e.stderr, "\r%s %d/%d (%d%%)", what, done, total, done*100/max(total, 1))
	}
}

type badLine struct {
	line   int
	reason string
}

// checkJobs reads JSONL jobs and checks every line: valid job, known
// schema, id not repeated. Blank lines are skipped.
func checkJobs(r io.Reader, reg *schemas.Registry) ([]ingest.SubmitItem, []badLine, error) {
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), maxJobLine)
	var (
		items []ingest.SubmitItem
		bad   []badLine
		seen  = map[string]int{}
		n     int
	)
	for sc.Scan() {
		n++
		line := bytes.TrimSpace(sc.Bytes())
		if len(line) == 0 {
			continue
		}
		j, err := ingest.ParseJob(line)
		if err != nil {
			bad = append(bad, badLine{n, err.Error()})
			continue
		}
		if _, ok := reg.Get(j.Schema); !ok {
			bad = append(bad, badLine{n, fmt.Sprintf("unknown schema %q (known: %v)", j.Schema, reg.IDs())})
			continue
		}
		if first, dup := seen[j.ID]; dup {
			bad = append(bad, badLine{n, fmt.Sprintf("job id %q repeats line %d", j.ID, first)})
			continue
		}
		seen[j.ID] = n
		items = append(items, ingest.SubmitItem{Data: bytes.Clone(line), Schema: j.Schema, MsgID: j.ID})
	}
	if err := sc.Err(); err != nil {
		return nil, nil, fmt.Errorf("line %d: %w", n+1, err)
	}
	return items, bad, nil
}
