package app

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/maphash"
	"io"
	"strings"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/config"
	"github.com/llmpipeline/pipeline/internal/exit"
	"github.com/llmpipeline/pipeline/internal/ledger"
	"github.com/llmpipeline/pipeline/internal/payload"
	"github.com/llmpipeline/pipeline/internal/queue"
	"github.com/llmpipeline/pipeline/job"
	"github.com/llmpipeline/pipeline/schemas"
)

// submitBatch and submitBatchBytes bound one queue.Submit call of the
// publish pass, so the jobs in memory at a time: large enough for the
// publishes to stay pipelined, small enough to stay flat (at 10,000, the
// batch, its messages and its ledger look-ups held 21 MB of a 1M-line
// submit's live heap; at 2,500, 8 MB).
const (
	submitBatch      = 2_500
	submitBatchBytes = 16 << 20
)

// maxChangedShown bounds the changed job ids a submit keeps to name.
const maxChangedShown = 1000

// Opener opens the job input again for each pass.
type Opener func() (io.ReadCloser, error)

// BytesSource is an Opener over bytes in memory (the demo's examples).
func BytesSource(b []byte) Opener {
	return func() (io.ReadCloser, error) { return io.NopCloser(bytes.NewReader(b)), nil }
}

// JobCheck checks job lines. The first pass (scan) writes each accepted
// line's id to disk (see idSpill) and finds the repeated ids there, so its
// memory stays flat whatever the number of lines: a sorted run of ids, a
// read buffer per run, and a few bytes per repeated line. The second pass
// (publish) checks every line again against the ids the first accepted,
// and takes the first line of each id. Close removes the files.
type JobCheck struct {
	reg   *schemas.Registry
	limit int64
	seed  maphash.Seed
	ids   *idSpill
	Valid int // lines that passed the first pass

	toldEncoding bool // the first pass gave the hint to convert a non-UTF-8 file

	Where string // where reg was loaded from, as an unknown schema's message names it (schemaSource)

	// Chunking splits the jobs longer than Chunking.Chars characters into
	// chunk jobs (a job's own "chunking" overrides it); zero keeps them whole.
	Chunking job.Chunking
	// Rerun is the second pass's rerun mode: a document that would be
	// split is refused with one (checkChunking).
	Rerun RerunMode
	// Dir is the directory a job's file paths are relative to (the jobs
	// file's; "" for the current directory, as for stdin).
	Dir string
	// MaxFileBytes bounds each file of a job (0: DefaultMaxFileBytes).
	MaxFileBytes int64

	// OnPace, if set, is called once when the publish pass first waits
	// for the embedded server in this process to forget the oldest job ids
	// (EmbeddedDedupeBudget).
	OnPace func()

	stored fileCache // the files the publish pass read and stored
}

func (jc *JobCheck) maxFile() int64 {
	if jc.MaxFileBytes > 0 {
		return jc.MaxFileBytes
	}
	return DefaultMaxFileBytes
}

// NewJobCheck checks jobs against the schemas of reg, a line at most limit bytes.
func NewJobCheck(reg *schemas.Registry, limit int64) *JobCheck {
	return &JobCheck{reg: reg, limit: limit, seed: maphash.MakeSeed()}
}

// Close removes the first pass's files; safe twice.
func (jc *JobCheck) Close() {
	if jc.ids != nil {
		jc.ids.close()
	}
}

// parse checks one line on its own: size, JSON, fields, schema. It returns
// the job and its bytes, nil bytes for a blank line, or why it is refused.
func (jc *JobCheck) parse(raw []byte, size int64) (job.Job, []byte, string) {
	if size > jc.limit {
		return job.Job{}, nil, fmt.Sprintf("job is %d bytes, over --max-job-bytes %d", size, jc.limit)
	}
	line := bytes.TrimSpace(raw)
	if len(line) == 0 {
		return job.Job{}, nil, ""
	}
	j, err := job.Parse(line)
	if err != nil {
		return j, nil, err.Error()
	}
	if i := invalidUTF8At(line); i >= 0 {
		// The parser reads such bytes as U+FFFD, as encoding/json does: the
		// model would see "M\ufffdller" for "Müller". JSON is UTF-8 (RFC
		// 8259, 8.1), so the line is refused rather than changed.
		return j, nil, fmt.Sprintf("%s at byte %d (0x%02X)", notUTF8, i, line[i])
	}
	if _, ok := jc.reg.Get(j.Schema); !ok {
		if jc.Where != "" {
			return j, nil, fmt.Sprintf("unknown schema %q in %s; known there: %v", j.Schema, jc.Where, jc.reg.IDs())
		}
		return j, nil, fmt.Sprintf("unknown schema %q (known: %v)", j.Schema, jc.reg.IDs())
	}
	if len(j.Files) > 0 {
		if reason := checkFiles(jc.Dir, j, size, jc.maxFile(), jc.limit); reason != "" {
			return j, nil, reason
		}
	}
	if why := jc.checkChunking(j); why != "" {
		return j, nil, why
	}
	return j, line, ""
}

// ScanFrom is the first pass over open's input: bad is called with every
// refused line's number and reason, in line order, once the input is read.
func (jc *JobCheck) ScanFrom(open Opener, bad func(n int, reason string)) error {
	jc.Close()
	ids, err := newIDSpill()
	if err != nil {
		return err
	}
	jc.ids, jc.Valid = ids, 0
	r, err := open()
	if err != nil {
		return err
	}
	defer r.Close()
	first := true // before the first line that is not blank
	err = readLines(r, jc.limit, func(n int, raw []byte, size int64) error {
		j, line, reason := jc.parse(raw, size)
		if first && reason != "" {
			reason += firstLineHint(raw)
		}
		if !jc.toldEncoding && strings.HasPrefix(reason, notUTF8) {
			jc.toldEncoding = true
			reason += "; JSON Lines are UTF-8: save the file as UTF-8 (a Latin-1 or Windows-1252 export converts with: iconv -f windows-1252 -t utf-8 FILE)"
		}
		first = first && reason == "" && line == nil
		switch {
		case reason != "":
			return ids.bad(n, reason)
		case line == nil: // blank
		default:
			jc.Valid++
			return ids.add(maphash.String(jc.seed, j.ID), n, j.ID)
		}
		return nil
	})
	if err != nil {
		return err
	}
	if err := ids.finish(); err != nil {
		return err
	}
	jc.Valid -= len(ids.repeated)
	return ids.report(bad)
}

// notUTF8 starts the refusal of a line that is not UTF-8.
const notUTF8 = "not UTF-8"

// invalidUTF8At is the offset of the first byte of b that is not part of
// a UTF-8 character, -1 when b is UTF-8.
func invalidUTF8At(b []byte) int {
	if utf8.Valid(b) {
		return -1
	}
	for i := 0; i < len(b); {
		r, n := utf8.DecodeRune(b[i:])
		if r == utf8.RuneError && n == 1 {
			return i
		}
		i += n
	}
	return -1
}

// firstLineHint is a hint for a first line that is refused because the
// input is not JSON Lines in UTF-8: one JSON document over several lines
// (pretty-printed, or a JSON array of jobs), or UTF-16 text (what Windows
// PowerShell 5 redirects to a file). It says how to convert it. A JSON
// Lines file whose first line is cut short gets none.
func firstLineHint(raw []byte) string {
	line := bytes.TrimSpace(raw)
	switch {
	case len(line) == 0:
		return ""
	case bytes.HasPrefix(line, []byte{0xff, 0xfe}) || bytes.HasPrefix(line, []byte{0xfe, 0xff}):
		return "; the file is UTF-16 (it starts with a UTF-16 byte order mark): submit reads UTF-8 (convert it with: iconv -f utf-16 -t utf-8 FILE)"
	case line[0] == '[':
		return "; the input is a JSON array: submit reads JSON Lines, one job object per line (convert it with: jq -c '.[]' FILE)"
	case string(line) == "{": // how pretty-printers start an object
		return "; the object goes on past this line: submit reads JSON Lines, one job object per line (convert a pretty-printed file with: jq -c . FILE)"
	}
	return ""
}

// RerunMode says which jobs whose run already ended submit publishes again,
// as a new run.
type RerunMode int

const (
	RerunNone    RerunMode = iota // none: a job that ended is not run again
	RerunChanged                  // those whose input changed since their last run
	RerunAll                      // all of them
)

// ItemsFrom is the second pass: each is called with every line the first
// pass accepted, in order. A line that is not what the first pass saw
// (the file changed in between) is an error.
func (jc *JobCheck) ItemsFrom(open Opener, rerun RerunMode, each func(queue.SubmitItem) error) error {
	return jc.itemsFrom(context.Background(), nil, open, rerun, each)
}

// itemsFrom is ItemsFrom that stores the jobs' files in store (see
// storeFiles) and hands on each job with its files' references; without
// a store, a job with files is an error.
func (jc *JobCheck) itemsFrom(ctx context.Context, store *payload.Store, open Opener, rerun RerunMode, each func(queue.SubmitItem) error) error {
	if jc.ids == nil {
		return errors.New("the input was not checked first")
	}
	seq, err := jc.ids.sequence()
	if err != nil {
		return err
	}
	repeats := jc.ids.repeated
	r, err := open()
	if err != nil {
		return err
	}
	defer r.Close()
	seen := 0
	err = readLines(r, jc.limit, func(n int, raw []byte, size int64) error {
		j, line, reason := jc.parse(raw, size)
		if reason != "" || line == nil {
			return nil // refused (and reported) by the first pass
		}
		at, h, id, ok, err := seq.next()
		switch {
		case err != nil:
			return err
		case !ok || at != n || id != j.ID || h != maphash.String(jc.seed, j.ID):
			return fmt.Errorf("line %d changed since it was checked (job id %q is new)", n, j.ID)
		case len(repeats) > 0 && repeats[0].line == n:
			repeats = repeats[1:]
			return nil // a repeat, refused by the first pass
		}
		seen++
		chunks, err := jc.chunkItems(j, rerun)
		if err != nil {
			return fmt.Errorf("line %d: %w", n, err)
		}
		for _, it := range chunks {
			if err := each(it); err != nil {
				return err
			}
		}
		if chunks != nil {
			return nil
		}
		data := bytes.Clone(line)
		var files []string
		if len(j.Files) > 0 {
			if store == nil {
				return fmt.Errorf("line %d: job %q has files, and no object store to put them in", n, j.ID)
			}
			if err := jc.stored.store(ctx, store, jc.Dir, &j, jc.maxFile()); err != nil {
				return fmt.Errorf("line %d: %w", n, err)
			}
			if data, err = jsonv2.Marshal(j); err != nil {
				return fmt.Errorf("line %d: encoding job %q with its files: %w", n, j.ID, err)
			}
			for _, f := range j.Files {
				files = append(files, f.SHA256)
			}
		}
		return each(queue.SubmitItem{Data: data, Schema: j.Schema, MsgID: j.ID, JobID: j.ID, Input: ledger.InputDigest(j),
			Rerun: rerun == RerunAll, RerunChanged: rerun == RerunChanged, Files: files})
	})
	if err == nil && seen != jc.Valid {
		err = fmt.Errorf("the input changed since it was checked: %d jobs now, %d then", seen, jc.Valid)
	}
	return err
}

// SubmitChecked publishes what the first pass accepted, reading the input
// again, submitBatch jobs at a time. progress, if not nil, gets the count
// published so far, and -1 at the end. When conn hosts the embedded server
// in this process, it publishes at most EmbeddedDedupeBudget jobs per
// duplicate window (dedupePace).
func SubmitChecked(ctx context.Context, conn *broker.Conn, jc *JobCheck, open Opener, rerun RerunMode, progress func(int)) (queue.SubmitStats, error) {
	var total queue.SubmitStats
	var batch []queue.SubmitItem
	done, size := 0, 0
	var pace *dedupePace
	if conn.Embedded() {
		pace = newDedupePace(dedupeBudget, conn.DuplicateWindow(), jc.OnPace)
	}
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if pace != nil {
			if err := pace.wait(ctx, len(batch)); err != nil {
				return err
			}
		}
		var prog func(int)
		if progress != nil {
			base := done
			prog = func(n int) { progress(base + n) }
		}
		s, err := queue.Submit(ctx, conn, batch, prog)
		if pace != nil {
			pace.stored(s.Published)
		}
		total.Published += s.Published
		total.Duplicates += s.Duplicates
		total.AlreadyDone += s.AlreadyDone
		total.Reruns += s.Reruns
		total.Chunks += s.Chunks
		total.Changed += s.Changed
		if room := maxChangedShown - len(total.ChangedIDs); room > 0 {
			total.ChangedIDs = append(total.ChangedIDs, s.ChangedIDs[:min(room, len(s.ChangedIDs))]...)
		}
		done += len(batch)
		clear(batch) // let the published jobs go
		batch, size = batch[:0], 0
		return err
	}
	err := jc.itemsFrom(ctx, conn.Payloads(), open, rerun, func(it queue.SubmitItem) error {
		batch = append(batch, it)
		size += len(it.Data)
		if len(batch) < submitBatch && size < submitBatchBytes {
			return nil
		}
		return flush()
	})
	if err == nil {
		err = flush()
	}
	if progress != nil {
		progress(-1)
	}
	if err != nil {
		return total, fmt.Errorf("publishing jobs (%d stored before the error): %w", total.Published, err)
	}
	return total, nil
}

var utf8BOM = []byte("\ufeff")

// readLines calls fn with every line of r (its number from 1, its bytes
// without the line break, and its size) until fn returns an error. A line
// longer than limit is not held in memory: fn gets its size and only a
// prefix of it.
func readLines(r io.Reader, limit int64, fn func(n int, line []byte, size int64) error) error {
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
		if n == 1 && bytes.HasPrefix(buf, utf8BOM) {
			// Written by some Windows tools: a mark of the encoding, not
			// part of the first job.
			buf = buf[len(utf8BOM):]
			size -= int64(len(utf8BOM))
		}
		// The line break is not the job's.
		brk := len(last) - len(bytes.TrimRight(last, "\r\n"))
		size -= int64(brk)
		line := buf
		if int64(len(buf)) == size+int64(brk) {
			line = buf[:size]
		}
		if err := fn(n, line, size); err != nil {
			return err
		}
		if eof {
			return nil
		}
	}
}

// MaxJobBytes reads --max-job-bytes.
func MaxJobBytes(cfg *config.Config) (int64, error) {
	n, err := ParseBytes(cfg.Workers.MaxJobBytes)
	if err != nil || n <= 0 {
		return 0, exit.Fail(exit.Usage, "--max-job-bytes %q: a positive size (e.g. 64MiB, 500KB, or bytes)", cfg.Workers.MaxJobBytes)
	}
	return n, nil
}

// MaxFileBytes reads --max-file-bytes.
func MaxFileBytes(cfg *config.Config) (int64, error) {
	if cfg.Submit.MaxFileBytes == "" {
		return DefaultMaxFileBytes, nil
	}
	n, err := ParseBytes(cfg.Submit.MaxFileBytes)
	if err != nil || n <= 0 {
		return 0, exit.Fail(exit.Usage, "--max-file-bytes %q: a positive size (e.g. 32MiB, 5MB, or bytes)", cfg.Submit.MaxFileBytes)
	}
	return n, nil
}
