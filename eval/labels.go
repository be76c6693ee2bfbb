package eval

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// maxLine is the longest line of a labelled file.
const maxLine = 64 << 20

// label is one line of a labelled file.
type label struct {
	line     int
	id       string
	expected jsontext.Value // a JSON object
	tree     object         // expected, decoded (when scoring)
}

// ErrFile is wrapped by the errors of a labelled file that cannot be read
// (no such file, a directory, a line over 64 MiB).
var ErrFile = errors.New("reading the labelled file")

// LineError is a line of a labelled file that is not a label: FILE:LINE
// and what is wrong with it.
type LineError struct {
	File string
	Line int
	Msg  string
}

func (e *LineError) Error() string { return fmt.Sprintf("%s:%d: %s", e.File, e.Line, e.Msg) }

// parseLabel reads one line: {"id": JOB_ID, "expected": OBJECT}; other
// members are ignored.
func parseLabel(file string, n int, line []byte) (label, error) {
	var l struct {
		ID       jsontext.Value `json:"id"`
		Expected jsontext.Value `json:"expected"`
	}
	fail := func(format string, args ...any) (label, error) {
		return label{}, &LineError{File: file, Line: n, Msg: fmt.Sprintf(format, args...)}
	}
	if k := firstByte(line); k != '{' {
		return fail(`not a JSON object: want {"id": JOB_ID, "expected": OBJECT}`)
	}
	if err := jsonv2.Unmarshal(line, &l); err != nil {
		return fail("not a JSON object: %v", err)
	}
	if len(l.ID) == 0 {
		return fail(`no "id"`)
	}
	if l.ID.Kind() != '"' {
		return fail(`"id" is %s, want a string (the job id)`, l.ID)
	}
	var id string
	if err := jsonv2.Unmarshal(l.ID, &id); err != nil || id == "" {
		return fail(`"id" is %s, want a non-empty string (the job id)`, l.ID)
	}
	if len(l.Expected) == 0 {
		return fail(`job %q: no "expected"`, id)
	}
	if l.Expected.Kind() != '{' {
		return fail(`job %q: "expected" is %s, want a JSON object`, id, kindName(l.Expected.Kind()))
	}
	return label{line: n, id: id, expected: l.Expected}, nil
}

func firstByte(b []byte) byte {
	b = bytes.TrimLeft(b, " \t\r\n")
	if len(b) == 0 {
		return 0
	}
	return b[0]
}

func kindName(k jsontext.Kind) string {
	switch k {
	case '"':
		return "a string"
	case '0':
		return "a number"
	case 't', 'f':
		return "a boolean"
	case 'n':
		return "null"
	case '[':
		return "an array"
	}
	return "not JSON"
}

// lines calls fn with each non-blank line of the file at path and its
// number; every byte read is also written to tee, when set.
func lines(path string, tee io.Writer, fn func(n int, line []byte) error) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("%w: %w", ErrFile, err)
	}
	defer f.Close()
	var r io.Reader = f
	if tee != nil {
		r = io.TeeReader(f, tee)
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 0, 64<<10), maxLine)
	n := 0
	for sc.Scan() {
		n++
		line := sc.Bytes()
		if n == 1 {
			line = bytes.TrimPrefix(line, []byte("\xef\xbb\xbf")) // a byte order mark, as submit accepts
		}
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		if err := fn(n, line); err != nil {
			return err
		}
	}
	if err := sc.Err(); err != nil {
		return fmt.Errorf("%w: %s after line %d: %w", ErrFile, path, n, err)
	}
	return nil
}

// check reads the whole labelled file once: every line must be a label and
// every id labelled once. It returns the file's digest (sha256:<hex>) and
// how many labels it holds. Nothing is scored when it fails.
func check(path string) (string, int, error) {
	h := sha256.New()
	seen := make(map[string]int32)
	count := 0
	err := lines(path, h, func(n int, line []byte) error {
		l, err := parseLabel(path, n, line)
		if err != nil {
			return err
		}
		if first, ok := seen[l.id]; ok {
			return &LineError{File: path, Line: n, Msg: fmt.Sprintf("job %q is labelled twice: first at line %d", l.id, first)}
		}
		seen[l.id] = int32(n)
		count++
		return nil
	})
	if err != nil {
		return "", 0, err
	}
	return "sha256:" + hex.EncodeToString(h.Sum(nil)), count, nil
}
