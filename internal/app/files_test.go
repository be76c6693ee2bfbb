package app

import (
	"bytes"
	"image"
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmpipeline/pipeline/job"
)

// TestDescribeFiles: a file's digest, size and media type by content, an
// image's size and a PDF's pages (counted across read boundaries).
func TestDescribeFiles(t *testing.T) {
	dir := t.TempDir()
	var pngBuf bytes.Buffer
	if err := png.Encode(&pngBuf, image.NewGray(image.Rect(0, 0, 33, 21))); err != nil {
		t.Fatal(err)
	}
	var pdf bytes.Buffer
	pdf.WriteString("%PDF-1.7\n<< /Type /Pages /Count 3 >>\n")
	for i := range 3 {
		pdf.WriteString(strings.Repeat("%", 70000+i) + "\n<< /Type /Page /Parent 2 0 R >>\n")
	}
	for name, data := range map[string][]byte{"scan.jpg": pngBuf.Bytes(), "doc.bin": pdf.Bytes()} {
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	src, reason := sourceOf(dir, 0, job.File{Path: "scan.jpg"}, DefaultMaxFileBytes)
	if reason != "" {
		t.Fatal(reason)
	}
	f, err := describe(src)
	if err != nil || f.MediaType != job.MediaPNG || f.Width != 33 || f.Height != 21 || f.Bytes != int64(pngBuf.Len()) || len(f.SHA256) != 64 {
		t.Errorf("describe(scan.jpg, a PNG) = %+v, %v", f, err)
	}
	src, _ = sourceOf(dir, 0, job.File{Path: "doc.bin"}, DefaultMaxFileBytes)
	if f, err = describe(src); err != nil || f.MediaType != job.MediaPDF || f.Pages != 3 || f.Bytes != int64(pdf.Len()) {
		t.Errorf("describe(doc.bin, a 3-page PDF) = %+v, %v", f, err)
	}
	if got := defaultName(job.File{URL: "data:x"}, 1, job.MediaPDF); got != "file2.pdf" {
		t.Errorf("defaultName of a data URL = %q", got)
	}
}
