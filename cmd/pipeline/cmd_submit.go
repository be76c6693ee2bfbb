package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/urfave/cli/v2"

	"github.com/llmpipeline/pipeline/ingest"
	"github.com/llmpipeline/pipeline/schemas"
)

// defaultMaxJobBytes is --max-job-bytes' default.
const defaultMaxJobBytes = "64MiB"

// maxJobBytesFlag bounds one job, on submit (a longer line is rejected) and
// on run (a bigger message is dead-lettered invalid_job).
func maxJobBytesFlag() cli.Flag {
	return &cli.StringFlag{Name: "max-job-bytes", EnvVars: []string{"PIPELINE_MAX_JOB_BYTES"}, Value: defaultMaxJobBytes,
		Usage: "largest job accepted (e.g. 64MiB, 500KB, or bytes): submit rejects a longer line with its line number before publishing anything; a worker dead-letters a bigger message as invalid_job. Jobs, results and dead letters over the server's max payload travel through the object store " + ingest.BucketPayloads}
}

// maxJobBytes reads --max-job-bytes.
func maxJobBytes(c *cli.Context) (int64, error) {
	n, err := parseBytes(c.String("max-job-bytes"))
	if err != nil || n <= 0 {
		return 0, fail(exitUsage, "--max-job-bytes %q: a positive size (e.g. 64MiB, 500KB, or bytes)", c.String("max-job-bytes"))
	}
	return n, nil
}

func (e *env) submitCommand() *cli.Command {
	return &cli.Command{
		Name:      "submit",
		Usage:     "check JSONL jobs and publish them on the jobs stream",
		ArgsUsage: "[FILE|-]",
		Description: `Every line is checked first (valid JSON, required fields id/schema/input, known schema, id not
repeated in the file, at most --max-job-bytes). Bad lines are reported as FILE:LINE: reason and
nothing is published, unless --skip-invalid. A job id whose run already ended (the job ledger,
bucket ` + ingest.BucketLedger + `, remembers every ended job id on the cluster, beyond the duplicate
window) is counted as already done and not published; --rerun publishes it again as a new run
(message id <job id>~r<n>). A job id already in the stream within the duplicate window is counted
as a duplicate, not published again. Exit 1 when lines were rejected without --skip-invalid.`,
		Flags: flags(natsFlags(), []cli.Flag{schemasFlag(), jsonFlag(), maxJobBytesFlag(),
			&cli.BoolFlag{Name: "skip-invalid", Usage: "publish the valid lines and report the bad ones"},
			&cli.BoolFlag{Name: "rerun", Usage: "publish jobs whose run already ended again, as a new run (as 'dlq replay' does); without it they are counted as already done"},
			&cli.IntFlag{Name: "max-errors", Value: 50, Usage: "bad lines printed (the rest are counted)"},
		}, logFlags()),
		Action: func(c *cli.Context) error {
			log, err := e.logger(c)
			if err != nil {
				return err
			}
			limit, err := maxJobBytes(c)
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
			items, bad, err := checkJobs(in, reg, limit, c.Bool("rerun"))
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
		b, _ := json.Marshal(map[string]int{"published": s.Published, "duplicates": s.Duplicates,
			"already_done": s.AlreadyDone, "reruns": s.Reruns, "rejected": rejected})
		fmt.Fprintf(e.stdout, "%s\n", b)
		return
	}
	reruns := ""
	if s.Reruns > 0 {
		reruns = fmt.Sprintf(" (%d as a new run)", s.Reruns)
	}
	fmt.Fprintf(e.stdout, "published %d%s, duplicates %d, already done %d, rejected %d\n", s.Published, reruns, s.Duplicates, s.AlreadyDone, rejected)
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

// checkJobs reads JSONL jobs and checks every line: at most limit bytes,
// valid job, known schema, id not repeated. Blank lines are skipped. Every
// item carries its job id, so Submit consults the job ledger; rerun asks
// for a new run of the jobs that ended.
func checkJobs(r io.Reader, reg *schemas.Registry, limit int64, rerun bool) ([]ingest.SubmitItem, []badLine, error) {
	var (
		items []ingest.SubmitItem
		bad   []badLine
		seen  = map[string]int{}
	)
	err := readLines(r, limit, func(n int, raw []byte, size int64) {
		if size > limit {
			bad = append(bad, badLine{n, fmt.Sprintf("job is %d bytes, over --max-job-bytes %d", size, limit)})
			return
		}
		line := bytes.TrimSpace(raw)
		if len(line) == 0 {
			return
		}
		j, err := ingest.ParseJob(line)
		if err != nil {
			bad = append(bad, badLine{n, err.Error()})
			return
		}
		if _, ok := reg.Get(j.Schema); !ok {
			bad = append(bad, badLine{n, fmt.Sprintf("unknown schema %q (known: %v)", j.Schema, reg.IDs())})
			return
		}
		if first, dup := seen[j.ID]; dup {
			bad = append(bad, badLine{n, fmt.Sprintf("job id %q repeats line %d", j.ID, first)})
			return
		}
		seen[j.ID] = n
		items = append(items, ingest.SubmitItem{Data: bytes.Clone(line), Schema: j.Schema, MsgID: j.ID, JobID: j.ID, Rerun: rerun})
	})
	if err != nil {
		return nil, nil, err
	}
	return items, bad, nil
}

// readLines calls fn with every line of r (its number from 1, its bytes
// without the line break, and its size). A line longer than limit is not
// held in memory: fn gets its size and only a prefix of it.
func readLines(r io.Reader, limit int64, fn func(n int, line []byte, size int64)) error {
	br := bufio.NewReaderSize(r, 64<<10)
	var buf []byte
	for n := 1; ; n++ {
		buf = buf[:0]
		var size int64
		var last []byte // the line's last chunk: it holds the line break
		eof := false
		for {
			chunk, err := br.ReadSlice('\n')
			size += int64(len(chunk))
			if int64(len(buf)) <= limit {
				buf = append(buf, chunk...)
			}
			last = chunk
			if errors.Is(err, bufio.ErrBufferFull) {
				continue
			}
			if errors.Is(err, io.EOF) {
				eof = true
				break
			}
			if err != nil {
				return fmt.Errorf("line %d: %w", n, err)
			}
			break
		}
		if eof && size == 0 {
			return nil
		}
		// The line break is not the job's.
		brk := len(last) - len(bytes.TrimRight(last, "\r\n"))
		size -= int64(brk)
		line := buf
		if int64(len(buf)) == size+int64(brk) {
			line = buf[:size]
		}
		fn(n, line, size)
		if eof {
			return nil
		}
	}
}
