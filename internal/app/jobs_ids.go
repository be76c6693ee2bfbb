package app

// Finding repeated job ids in bounded memory. The first pass of submit
// must know, before publishing anything, whether an id repeats an earlier
// line; a map of every id grows with the file (tens of bytes per line, so
// hundreds of MB at ten million). Instead the ids go to disk: in sorted
// runs of idRunLen records (hash, id, line), merged once at the end of the
// pass, so memory holds one run and a read buffer per run, and a record
// per repeated line (its line and the line it repeats). The accepted lines
// are also written in order (line, hash, id) to a sequence file: the
// report of bad lines walks it to name the repeated ids in line order, and
// the second pass reads it alongside the input to check each line is the
// one the first pass accepted.

import (
	"bufio"
	"container/heap"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
)

// idRunLen is the number of ids sorted in memory before a run is written.
const idRunLen = 1 << 16

// idRec is one accepted line's id.
type idRec struct {
	h    uint64
	line int
	id   string
}

func cmpRec(a, b idRec) int {
	switch {
	case a.h != b.h:
		if a.h < b.h {
			return -1
		}
		return 1
	case a.id != b.id:
		return strings.Compare(a.id, b.id)
	}
	return a.line - b.line
}

// repeat is a line whose id an earlier line has.
type repeat struct{ line, first int }

// idSpill holds the ids of the first pass on disk.
type idSpill struct {
	dir      string
	runs     *os.File
	runW     *bufio.Writer
	bounds   []int64 // the end offset of each run in runs
	off      int64
	buf      []idRec
	seq      *os.File
	seqW     *bufio.Writer
	errs     *os.File // the refused lines, created at the first
	errW     *bufio.Writer
	scratch  [3 * binary.MaxVarintLen64]byte
	repeated []repeat // sorted by line, after merge
}

func newIDSpill() (*idSpill, error) {
	dir, err := os.MkdirTemp("", "pipeline-submit-ids-*")
	if err != nil {
		return nil, fmt.Errorf("creating a temporary directory for the job ids: %w", err)
	}
	s := &idSpill{dir: dir}
	if s.runs, err = os.Create(dir + "/runs"); err == nil {
		s.seq, err = os.Create(dir + "/seq")
	}
	if err != nil {
		s.close()
		return nil, fmt.Errorf("creating the job ids' files in %s: %w", dir, err)
	}
	s.runW, s.seqW = bufio.NewWriterSize(s.runs, 64<<10), bufio.NewWriterSize(s.seq, 64<<10)
	return s, nil
}

// close removes the files; safe twice.
func (s *idSpill) close() {
	for _, f := range []*os.File{s.runs, s.seq, s.errs} {
		if f != nil {
			f.Close()
		}
	}
	if s.dir != "" {
		os.RemoveAll(s.dir)
		s.dir = ""
	}
}

// writeRec writes (a, b, id) to w.
func (s *idSpill) writeRec(w *bufio.Writer, a, b uint64, id string) (int, error) {
	n := binary.PutUvarint(s.scratch[:], a)
	n += binary.PutUvarint(s.scratch[n:], b)
	n += binary.PutUvarint(s.scratch[n:], uint64(len(id)))
	if _, err := w.Write(s.scratch[:n]); err != nil {
		return 0, err
	}
	m, err := w.WriteString(id)
	return n + m, err
}

// readRec reads what writeRec wrote.
func readRec(r *bufio.Reader) (a, b uint64, id string, err error) {
	if a, err = binary.ReadUvarint(r); err != nil {
		return 0, 0, "", err
	}
	if b, err = binary.ReadUvarint(r); err != nil {
		return 0, 0, "", noEOF(err)
	}
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return 0, 0, "", noEOF(err)
	}
	p := make([]byte, n)
	if _, err := io.ReadFull(r, p); err != nil {
		return 0, 0, "", noEOF(err)
	}
	return a, b, string(p), nil
}

func noEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// add records an accepted line's id.
func (s *idSpill) add(h uint64, line int, id string) error {
	if _, err := s.writeRec(s.seqW, uint64(line), h, id); err != nil {
		return fmt.Errorf("writing the job ids to %s: %w", s.dir, err)
	}
	s.buf = append(s.buf, idRec{h, line, id})
	if len(s.buf) == idRunLen {
		return s.flushRun()
	}
	return nil
}

func (s *idSpill) flushRun() error {
	if len(s.buf) == 0 {
		return nil
	}
	slices.SortFunc(s.buf, cmpRec)
	for _, r := range s.buf {
		n, err := s.writeRec(s.runW, r.h, uint64(r.line), r.id)
		if err != nil {
			return fmt.Errorf("writing the job ids to %s: %w", s.dir, err)
		}
		s.off += int64(n)
	}
	s.bounds = append(s.bounds, s.off)
	clear(s.buf)
	s.buf = s.buf[:0]
	return nil
}

// runReader reads one sorted run.
type runReader struct {
	r   *bufio.Reader
	cur idRec
}

type runHeap []*runReader

func (h runHeap) Len() int           { return len(h) }
func (h runHeap) Less(i, j int) bool { return cmpRec(h[i].cur, h[j].cur) < 0 }
func (h runHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *runHeap) Push(x any)        { *h = append(*h, x.(*runReader)) }
func (h *runHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

func (rr *runReader) next() (bool, error) {
	h, line, id, err := readRec(rr.r)
	if errors.Is(err, io.EOF) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	rr.cur = idRec{h, int(line), id}
	return true, nil
}

// finish merges the runs and finds the repeated lines.
func (s *idSpill) finish() error {
	if err := s.flushRun(); err != nil {
		return err
	}
	s.buf = nil
	if err := s.runW.Flush(); err != nil {
		return fmt.Errorf("writing the job ids to %s: %w", s.dir, err)
	}
	if err := s.seqW.Flush(); err != nil {
		return fmt.Errorf("writing the job ids to %s: %w", s.dir, err)
	}
	var h runHeap
	start := int64(0)
	for _, end := range s.bounds {
		rr := &runReader{r: bufio.NewReaderSize(io.NewSectionReader(s.runs, start, end-start), 8<<10)}
		start = end
		ok, err := rr.next()
		if err != nil {
			return fmt.Errorf("reading the job ids in %s: %w", s.dir, err)
		}
		if ok {
			h = append(h, rr)
		}
	}
	heap.Init(&h)
	var prev idRec
	first, have := 0, false
	for h.Len() > 0 {
		rr := h[0]
		cur := rr.cur
		if have && cur.h == prev.h && cur.id == prev.id {
			s.repeated = append(s.repeated, repeat{cur.line, first})
		} else {
			first = cur.line
		}
		prev, have = cur, true
		ok, err := rr.next()
		if err != nil {
			return fmt.Errorf("reading the job ids in %s: %w", s.dir, err)
		}
		if ok {
			heap.Fix(&h, 0)
		} else {
			heap.Pop(&h)
		}
	}
	slices.SortFunc(s.repeated, func(a, b repeat) int { return a.line - b.line })
	return nil
}

// seqReader reads the accepted lines in order.
type seqReader struct {
	r *bufio.Reader
}

func (s *idSpill) sequence() (*seqReader, error) {
	if _, err := s.seq.Seek(0, io.SeekStart); err != nil {
		return nil, fmt.Errorf("reading the job ids in %s: %w", s.dir, err)
	}
	return &seqReader{r: bufio.NewReaderSize(s.seq, 64<<10)}, nil
}

// next returns the next accepted line; ok is false after the last.
func (q *seqReader) next() (line int, h uint64, id string, ok bool, err error) {
	l, h, id, err := readRec(q.r)
	if errors.Is(err, io.EOF) {
		return 0, 0, "", false, nil
	}
	if err != nil {
		return 0, 0, "", false, fmt.Errorf("reading the job ids: %w", err)
	}
	return int(l), h, id, true, nil
}

// bad records a refused line of the first pass, in line order.
func (s *idSpill) bad(line int, reason string) error {
	if s.errs == nil {
		f, err := os.Create(s.dir + "/errors")
		if err != nil {
			return fmt.Errorf("creating the bad lines' file in %s: %w", s.dir, err)
		}
		s.errs, s.errW = f, bufio.NewWriterSize(f, 64<<10)
	}
	if _, err := s.writeRec(s.errW, uint64(line), 0, reason); err != nil {
		return fmt.Errorf("writing the bad lines to %s: %w", s.dir, err)
	}
	return nil
}

// report calls bad with every refused line, in line order: the lines
// refused on their own and the repeats.
func (s *idSpill) report(bad func(n int, reason string)) error {
	var errs *bufio.Reader
	if s.errs != nil {
		if err := s.errW.Flush(); err != nil {
			return fmt.Errorf("writing the bad lines to %s: %w", s.dir, err)
		}
		if _, err := s.errs.Seek(0, io.SeekStart); err != nil {
			return fmt.Errorf("reading the bad lines in %s: %w", s.dir, err)
		}
		errs = bufio.NewReaderSize(s.errs, 64<<10)
	}
	seq, err := s.sequence()
	if err != nil {
		return err
	}
	nextErr := func() (int, string, bool, error) {
		if errs == nil {
			return 0, "", false, nil
		}
		l, _, reason, err := readRec(errs)
		if errors.Is(err, io.EOF) {
			return 0, "", false, nil
		}
		if err != nil {
			return 0, "", false, fmt.Errorf("reading the bad lines in %s: %w", s.dir, err)
		}
		return int(l), reason, true, nil
	}
	el, reason, eok, err := nextErr()
	if err != nil {
		return err
	}
	for _, r := range s.repeated {
		for eok && el < r.line {
			bad(el, reason)
			if el, reason, eok, err = nextErr(); err != nil {
				return err
			}
		}
		// The repeated line's id, from the sequence of accepted lines.
		for {
			line, _, id, ok, err := seq.next()
			if err != nil {
				return err
			}
			if !ok {
				return fmt.Errorf("reading the job ids in %s: line %d is missing", s.dir, r.line)
			}
			if line == r.line {
				bad(r.line, fmt.Sprintf("job id %q repeats line %d", id, r.first))
				break
			}
		}
	}
	for eok {
		bad(el, reason)
		if el, reason, eok, err = nextErr(); err != nil {
			return err
		}
	}
	return nil
}
