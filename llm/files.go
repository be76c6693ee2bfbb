package llm

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"sync"

	"github.com/llmpipeline/pipeline/model"
)

// A request whose conversation holds files (images, PDFs) is encoded with
// a mark where each file's base64 goes, and sent as a wire: the JSON
// around the marks, and each file read from its store and base64-encoded
// as the body is written. No file is ever held whole: a call holds a read
// buffer per file, whatever its size, and a transport retry reads it
// again.

// wire is a request body: data with the files' base64 spliced in.
type wire struct {
	data    []byte
	splices []splice // in order of at
}

// splice is one file whose base64 goes at offset at of data.
type splice struct {
	at   int
	file model.File
}

// bytesWire is a body of bytes alone.
func bytesWire(b []byte) wire { return wire{data: b} }

// size is the body's length.
func (w wire) size() int64 {
	n := int64(len(w.data))
	for _, s := range w.splices {
		n += int64(base64.StdEncoding.EncodedLen(int(s.file.Size)))
	}
	return n
}

// reader writes the body; each file is opened when the body reaches it.
func (w wire) reader(ctx context.Context) io.ReadCloser {
	rs := make([]io.Reader, 0, 2*len(w.splices)+1)
	b := &wireBody{}
	prev := 0
	for _, s := range w.splices {
		rs = append(rs, bytes.NewReader(w.data[prev:s.at]), &b64Reader{ctx: ctx, file: s.file, body: b})
		prev = s.at
	}
	rs = append(rs, bytes.NewReader(w.data[prev:]))
	b.Reader = io.MultiReader(rs...)
	return b
}

// wireBody closes the files its readers opened. The transport may close a
// request's body from another goroutine than the one reading it.
type wireBody struct {
	io.Reader
	mu     sync.Mutex
	open   []io.Closer
	closed bool
}

// track keeps c to close with the body; a body closed already closes c.
func (b *wireBody) track(c io.Closer) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		c.Close()
		return errors.New("request body closed")
	}
	b.open = append(b.open, c)
	return nil
}

func (b *wireBody) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	var errs []error
	for _, c := range b.open {
		errs = append(errs, c.Close())
	}
	b.open, b.closed = nil, true
	return errors.Join(errs...)
}

// b64Reader reads a file from its store as base64 (standard alphabet,
// padded), checking it is file.Size bytes long.
type b64Reader struct {
	ctx  context.Context
	file model.File
	body *wireBody
	src  io.Reader
	n    int64
	in   [3 << 10]byte
	out  [4 << 10]byte
	pend []byte
	done bool
}

func (r *b64Reader) Read(p []byte) (int, error) {
	for len(r.pend) == 0 {
		if r.done {
			return 0, io.EOF
		}
		if r.src == nil {
			if r.file.Open == nil {
				return 0, fmt.Errorf("file %s (sha256 %s) has no store to be read from", r.file.Name, r.file.SHA256)
			}
			rc, err := r.file.Open(r.ctx)
			if err != nil {
				return 0, err
			}
			if err := r.body.track(rc); err != nil {
				return 0, err
			}
			r.src = rc
		}
		k, err := io.ReadFull(r.src, r.in[:])
		r.n += int64(k)
		if r.n > r.file.Size {
			return 0, &fileError{fmt.Errorf("file %s (sha256 %s) is longer than its %d bytes", r.file.Name, r.file.SHA256, r.file.Size)}
		}
		if k > 0 {
			base64.StdEncoding.Encode(r.out[:], r.in[:k])
			r.pend = r.out[:base64.StdEncoding.EncodedLen(k)]
		}
		switch {
		case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
			if r.n != r.file.Size {
				return 0, &fileError{fmt.Errorf("file %s (sha256 %s) is %d bytes, not its %d", r.file.Name, r.file.SHA256, r.n, r.file.Size)}
			}
			r.done = true
		case err != nil:
			return 0, fmt.Errorf("reading file %s: %w", r.file.Name, err)
		}
	}
	n := copy(p, r.pend)
	r.pend = r.pend[n:]
	return n, nil
}

// fileError is a file that is not what its job says (another size): no
// retry reads it better, so the call fails as a request error.
type fileError struct{ err error }

func (e *fileError) Error() string { return e.err.Error() }
func (e *fileError) Unwrap() error { return e.err }

// fileMarks stand, in an encoded request, where each file's base64 goes:
// a random nonce makes them text no message holds.
type fileMarks struct {
	nonce string
	files []model.File
}

func newFileMarks() *fileMarks { return &fileMarks{nonce: rand.Text()} }

// mark is the mark of f, the next file of the request.
func (m *fileMarks) mark(f model.File) string {
	m.files = append(m.files, f)
	return m.text(len(m.files) - 1)
}

func (m *fileMarks) text(i int) string {
	return "@pipeline-file-" + m.nonce + "-" + strconv.Itoa(i) + "@"
}

// splice cuts the marks out of data and returns the wire that puts the
// files' base64 in their place.
func (m *fileMarks) splice(data []byte) (wire, error) {
	if len(m.files) == 0 {
		return bytesWire(data), nil
	}
	type at struct{ pos, i, n int }
	ats := make([]at, 0, len(m.files))
	for i := range m.files {
		t := m.text(i)
		pos := bytes.Index(data, []byte(t))
		if pos < 0 {
			return wire{}, fmt.Errorf("encoding the request: file %d is not in it", i)
		}
		ats = append(ats, at{pos, i, len(t)})
	}
	sort.Slice(ats, func(a, b int) bool { return ats[a].pos < ats[b].pos })
	out := make([]byte, 0, len(data))
	w := wire{splices: make([]splice, 0, len(ats))}
	prev := 0
	for _, a := range ats {
		out = append(out, data[prev:a.pos]...)
		w.splices = append(w.splices, splice{at: len(out), file: m.files[a.i]})
		prev = a.pos + a.n
	}
	w.data = append(out, data[prev:]...)
	return w, nil
}

// hasFiles reports whether a turn of msgs holds files.
func hasFiles(msgs []model.Message) bool {
	for i := range msgs {
		if len(msgs[i].Files) > 0 {
			return true
		}
	}
	return false
}

// dataURLPrefix is what goes before a file's base64 in a data URL.
func dataURLPrefix(f model.File) string { return "data:" + f.MediaType + ";base64," }
