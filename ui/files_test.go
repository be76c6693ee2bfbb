package ui_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/job"
)

// TestTranscriptFiles: the transcript names the job's files and links to
// each, served from the object store with its media type, inline for an
// image and as an attachment for a PDF.
func TestTranscriptFiles(t *testing.T) {
	f := newFixture(t, nil)
	png := []byte("\x89PNG\r\n\x1a\n" + strings.Repeat("p", 100))
	pdf := []byte("%PDF-1.4\n" + strings.Repeat("d", 5000))
	var files []job.File
	for _, c := range []struct {
		name, mt string
		data     []byte
	}{{"receipt.png", job.MediaPNG, png}, {"contract 2024.pdf", job.MediaPDF, pdf}} {
		sum := sha256.Sum256(c.data)
		d := hex.EncodeToString(sum[:])
		if _, err := f.conn.Payloads().PutFile(t.Context(), d, c.mt, int64(len(c.data)), bytes.NewReader(c.data)); err != nil {
			t.Fatal(err)
		}
		files = append(files, job.File{Name: c.name, MediaType: c.mt, Bytes: int64(len(c.data)), SHA256: d})
	}
	o := job.Outcome{JobID: "scan-1", Schema: "invoice", SchemaVersion: "v1aaaaaaaaaa", Status: job.StatusDeadLettered, Class: job.ClassSchema,
		Reason: "r", Attempts: 1, Job: jobJSON("scan-1", "invoice"), Files: files,
		StartedAt: time.Unix(1700000000, 0), FinishedAt: time.Unix(1700000001, 0)}
	if err := f.st.Write(t.Context(), []job.Outcome{o}); err != nil {
		t.Fatal(err)
	}
	page := f.get(t, "/dead-letters/scan-1", http.StatusOK)
	mustContain(t, "scan-1's page", text(page), "Files", "receipt.png", "image/png", "contract 2024.pdf", "application/pdf", files[1].SHA256)
	for i, c := range []struct {
		data                   []byte
		contentType, dispoWant string
	}{{png, "image/png", `inline; filename=receipt.png`}, {pdf, "application/pdf", `attachment; filename="contract 2024.pdf"`}} {
		link := "/files/" + files[i].SHA256 + "?name="
		if !strings.Contains(page, link) {
			t.Fatalf("the page has no link %s", link)
		}
		resp, err := f.c.Get(f.srv.URL + "/files/" + files[i].SHA256 + "?name=" + strings.ReplaceAll(files[i].Name, " ", "%20"))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK || !bytes.Equal(body, c.data) {
			t.Errorf("file %d: %d, %d bytes; want 200 and its %d bytes", i, resp.StatusCode, len(body), len(c.data))
		}
		if got := resp.Header.Get("Content-Type"); got != c.contentType {
			t.Errorf("file %d: Content-Type %q, want %q", i, got, c.contentType)
		}
		if got := resp.Header.Get("Content-Disposition"); got != c.dispoWant {
			t.Errorf("file %d: Content-Disposition %q, want %q", i, got, c.dispoWant)
		}
	}
	f.get(t, "/files/"+strings.Repeat("0", 64), http.StatusNotFound)
	f.get(t, "/files/nothex", http.StatusBadRequest)
}
