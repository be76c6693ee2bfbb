package app

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"image"
	_ "image/gif" // image.DecodeConfig of GIF files
	_ "image/jpeg"
	_ "image/png"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	_ "golang.org/x/image/webp" // image.DecodeConfig of WebP files

	"github.com/llmpipeline/pipeline/internal/payload"
	"github.com/llmpipeline/pipeline/job"
)

// DefaultMaxFileBytes is --max-file-bytes's default: 22 MiB, the largest
// file whose base64 (a third larger: 30.8 MB) fits Anthropic's 32 MB
// request with room for the prompt and the schema. OpenAI takes 50 MB a
// request; a file's bytes travel as base64 to both.
const DefaultMaxFileBytes = 22 << 20

// sniffBytes is how much of a file decides its media type.
const sniffBytes = 512

// fileSource is one file of a submitted job, opened again for each read:
// a file on disk or the bytes of a data URL.
type fileSource struct {
	name string // for messages and the default name
	path string // "" for a data URL
	data []byte // a data URL's bytes
	size int64
}

func (fs fileSource) open() (io.ReadCloser, error) {
	if fs.path == "" {
		return io.NopCloser(bytes.NewReader(fs.data)), nil
	}
	return os.Open(fs.path)
}

// sourceOf resolves the i-th file of a job: a path relative to dir, or a
// data URL. The reason says what is wrong, "" when nothing.
func sourceOf(dir string, i int, f job.File, maxFile int64) (fileSource, string) {
	at := fmt.Sprintf("files[%d]", i)
	if f.URL != "" {
		meta, enc, ok := strings.Cut(strings.TrimPrefix(f.URL, "data:"), ",")
		if !ok || !strings.HasSuffix(meta, ";base64") {
			return fileSource{}, at + ": a data URL must be data:<media type>;base64,<data>"
		}
		if n := int64(base64.StdEncoding.DecodedLen(len(enc))); n > maxFile+2 {
			return fileSource{}, fmt.Sprintf("%s: data URL holds about %d bytes, over --max-file-bytes %d", at, n, maxFile)
		}
		data, err := base64.StdEncoding.DecodeString(enc)
		if err != nil {
			return fileSource{}, fmt.Sprintf("%s: data URL is not valid base64: %v", at, err)
		}
		return fileSource{name: "(data URL)", data: data, size: int64(len(data))}, ""
	}
	p := f.Path
	if !filepath.IsAbs(p) {
		p = filepath.Join(dir, p)
	}
	st, err := os.Stat(p)
	if err != nil {
		return fileSource{}, fmt.Sprintf("%s: file %s: %v", at, f.Path, unwrapPathErr(err))
	}
	if !st.Mode().IsRegular() {
		return fileSource{}, fmt.Sprintf("%s: file %s is not a regular file", at, f.Path)
	}
	return fileSource{name: f.Path, path: p, size: st.Size()}, ""
}

func unwrapPathErr(err error) error {
	if pe, ok := err.(*os.PathError); ok {
		return pe.Err
	}
	return err
}

// checkFiles is the first pass's check of a job's files: each readable,
// at most maxFile bytes, a supported type by its content; all of them
// and the line within maxJob. It reads only the first bytes of each.
func checkFiles(dir string, j job.Job, lineSize, maxFile, maxJob int64) string {
	total := lineSize
	for i, f := range j.Files {
		if f.Stored() {
			return fmt.Sprintf("files[%d]: give the file's \"path\" or a data \"url\"; submit stores it and references it by digest", i)
		}
		src, reason := sourceOf(dir, i, f, maxFile)
		if reason != "" {
			return reason
		}
		if src.size > maxFile {
			return fmt.Sprintf("files[%d]: file %s is %d bytes, over --max-file-bytes %d", i, src.name, src.size, maxFile)
		}
		if src.size == 0 {
			return fmt.Sprintf("files[%d]: file %s is empty", i, src.name)
		}
		head, err := readHead(src)
		if err != nil {
			return fmt.Sprintf("files[%d]: file %s: %v", i, src.name, unwrapPathErr(err))
		}
		if mt, ok := job.Sniff(head); !ok {
			return fmt.Sprintf("files[%d]: file %s is %s by its content, not one of %s", i, src.name, mt, job.SupportedTypes)
		}
		total += src.size
		if src.path == "" {
			// A data URL's text is in lineSize already: the job counts
			// its file once, by its bytes (what submit publishes and
			// stores), not also as the URL's base64.
			total -= int64(len(f.URL))
		}
	}
	if total > maxJob {
		return fmt.Sprintf("job and its files are %d bytes, over --max-job-bytes %d", total, maxJob)
	}
	return ""
}

func readHead(src fileSource) ([]byte, error) {
	r, err := src.open()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	head := make([]byte, sniffBytes)
	n, err := io.ReadFull(r, head)
	if err == io.ErrUnexpectedEOF || err == io.EOF {
		err = nil
	}
	return head[:n], err
}

// fileCache remembers, for one submit, the files it read (by path, size
// and modification time) and the digests it stored, so a file shared by
// many jobs is read and looked up once.
type fileCache struct {
	read   map[fileKey]job.File
	stored map[string]bool
}

type fileKey struct {
	path  string
	size  int64
	mtime int64
}

// store is the publish pass's work on a job's files: each is read (its
// SHA-256, media type, dimensions or pages), stored once in the object
// store by digest, and replaced in j by its reference.
func (c *fileCache) store(ctx context.Context, store *payload.Store, dir string, j *job.Job, maxFile int64) error {
	if c.read == nil {
		c.read, c.stored = map[fileKey]job.File{}, map[string]bool{}
	}
	for i, f := range j.Files {
		src, reason := sourceOf(dir, i, f, maxFile)
		if reason != "" {
			return fmt.Errorf("job %q: %s", j.ID, reason)
		}
		var key fileKey
		if src.path != "" {
			if st, err := os.Stat(src.path); err == nil {
				key = fileKey{src.path, st.Size(), st.ModTime().UnixNano()}
			}
		}
		ref, ok := c.read[key]
		if !ok || key.path == "" {
			var err error
			if ref, err = describe(src); err != nil {
				return fmt.Errorf("job %q: files[%d]: %s: %w", j.ID, i, src.name, err)
			}
			if key.path != "" {
				c.read[key] = ref
			}
		}
		ref.Name = f.Name
		if ref.Name == "" {
			ref.Name = defaultName(f, i, ref.MediaType)
		}
		if !c.stored[ref.SHA256] {
			r, err := src.open()
			if err != nil {
				return fmt.Errorf("job %q: files[%d]: %s: %w", j.ID, i, src.name, err)
			}
			_, err = store.PutFile(ctx, ref.SHA256, ref.MediaType, ref.Bytes, r)
			r.Close()
			if err != nil {
				return fmt.Errorf("job %q: files[%d]: %s: %w", j.ID, i, src.name, err)
			}
			c.stored[ref.SHA256] = true
		}
		j.Files[i] = ref
	}
	return nil
}

// describe reads a file once: its digest, size, media type, and the
// image's dimensions or the PDF's pages.
func describe(src fileSource) (job.File, error) {
	r, err := src.open()
	if err != nil {
		return job.File{}, err
	}
	defer r.Close()
	h := sha256.New()
	var size countWriter
	br := bufio.NewReaderSize(io.TeeReader(r, io.MultiWriter(h, &size)), 64<<10)
	head, _ := br.Peek(sniffBytes)
	mt, ok := job.Sniff(head)
	if !ok {
		return job.File{}, fmt.Errorf("%s by its content, not one of %s", mt, job.SupportedTypes)
	}
	ref := job.File{MediaType: mt}
	if mt == job.MediaPDF {
		ref.Pages, err = countPages(br)
	} else {
		cfg, _, derr := image.DecodeConfig(br)
		if derr == nil {
			ref.Width, ref.Height = cfg.Width, cfg.Height
		}
		_, err = io.Copy(io.Discard, br)
	}
	if err != nil {
		return job.File{}, err
	}
	ref.Bytes = int64(size)
	ref.SHA256 = hex.EncodeToString(h.Sum(nil))
	return ref, nil
}

// countWriter counts the bytes written to it.
type countWriter int64

func (c *countWriter) Write(p []byte) (int, error) { *c += countWriter(len(p)); return len(p), nil }

// pageObject matches a PDF page object's type (not the /Pages tree's).
var pageObject = regexp.MustCompile(`/Type\s*/Page[^s]`)

// countPages counts the page objects of a PDF as it streams by. Pages
// inside compressed object streams are not seen: the count is then 0, and
// the estimates fall back on the file's size.
func countPages(r io.Reader) (int, error) {
	br := bufio.NewReaderSize(r, 64<<10)
	n := 0
	var carry []byte
	buf := make([]byte, 64<<10)
	const maxPageCarry = 4 << 10 // "/Type", whitespace, "/Page" and one byte
	for {
		k, err := br.Read(buf)
		chunk := append(carry, buf[:k]...)
		end := 0
		for _, m := range pageObject.FindAllIndex(chunk, -1) {
			n, end = n+1, m[1]
		}
		// Carry what may begin a match the next read completes: from the
		// last "/Type" past the last match (its whitespace may run on),
		// or the last bytes, which may be a "/Type" cut short. A carry
		// never holds a whole match, so none is counted twice.
		rest := chunk[end:]
		from := max(0, len(rest)-len("/Type")+1)
		if i := bytes.LastIndex(rest, []byte("/Type")); i >= 0 && len(rest)-i <= maxPageCarry {
			from = i
		}
		carry = append(carry[:0:0], rest[from:]...)
		if err == io.EOF {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// defaultName names a file that was given none: its path's base name, or
// for a data URL file<n> with the media type's extension.
func defaultName(f job.File, i int, mediaType string) string {
	if f.Path != "" {
		return filepath.Base(f.Path)
	}
	ext := map[string]string{job.MediaPNG: ".png", job.MediaJPEG: ".jpg", job.MediaGIF: ".gif", job.MediaWebP: ".webp", job.MediaPDF: ".pdf"}[mediaType]
	return fmt.Sprintf("file%d%s", i+1, ext)
}
