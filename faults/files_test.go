package faults

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"image"
	"image/color"
	"image/png"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// filesScenarios are the scenarios of jobs with files (images, PDFs).
func filesScenarios() []scenario {
	return []scenario{
		{"kill -9 worker with file jobs in flight", scenarioFilesKill9},
		{"8 jobs of 20 MB PDFs at -c 8", scenarioFilesMemory},
	}
}

// filePDF is a one-page PDF of n bytes or a little more, distinct by tag.
func filePDF(tag string, n int) []byte {
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n2 0 obj << /Type /Pages /Kids [3 0 R] /Count 1 >> endobj\n3 0 obj << /Type /Page /Parent 2 0 R >> endobj\n")
	fmt.Fprintf(&b, "%% %s\n", tag)
	line := bytes.Repeat([]byte("% scanned contract page, padding......................................\n"), 1024)
	for b.Len() < n {
		b.Write(line)
	}
	b.WriteString("%%EOF\n")
	return b.Bytes()
}

func filePNG(t *testing.T) []byte {
	t.Helper()
	img := image.NewGray(image.Rect(0, 0, 64, 96))
	for x := range 64 {
		img.Set(x, 40, color.Gray{Y: 30})
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

func digestHex(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// fileJobs writes n ticket jobs into dir, each naming the shared PNG and
// one of pdfs PDFs of pdfBytes each (jobs i and i+pdfs share one); it
// returns the jobs and the files' digests.
func fileJobs(t *testing.T, dir string, n, pdfs, pdfBytes int) ([]job, map[string]bool) {
	t.Helper()
	digests := map[string]bool{}
	pngData := filePNG(t)
	if err := os.WriteFile(filepath.Join(dir, "receipt.png"), pngData, 0o644); err != nil {
		t.Fatal(err)
	}
	digests[digestHex(pngData)] = true
	for k := range pdfs {
		data := filePDF(fmt.Sprint("doc ", k), pdfBytes)
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("doc-%d.pdf", k)), data, 0o644); err != nil {
			t.Fatal(err)
		}
		digests[digestHex(data)] = true
	}
	var jobs []job
	for i := range n {
		files := []any{"receipt.png", map[string]string{"path": fmt.Sprintf("doc-%d.pdf", i%pdfs), "name": fmt.Sprintf("Contract %d", i%pdfs)}}
		if pdfs == 0 {
			files = files[:1]
		}
		j := job{ID: fmt.Sprintf("file-%03d", i), Schema: "ticket"}
		j.line, _ = json.Marshal(map[string]any{"id": j.ID, "schema": j.Schema, "input": "see the attached scan", "files": files})
		jobs = append(jobs, j)
	}
	return jobs, digests
}

// storedDigests lists the files in the object store of the data dir's
// embedded server.
func storedDigests(t *testing.T, dir string) map[string]bool {
	t.Helper()
	conn := openEmbedded(t, dir)
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	list, err := conn.Payloads().Files(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]bool{}
	for _, d := range list {
		out[d] = true
	}
	return out
}

// kill -9 of a worker with jobs that name files in flight: every job ends
// once after a second run, and every file is still in the object store
// (nothing deletes a file a job names).
func scenarioFilesKill9(t *testing.T) row {
	dir := t.TempDir()
	jobs, digests := fileJobs(t, dir, 120, 10, 200<<10)
	env := childEnv()
	submitFile(t, env, writeJobs(t, dir, jobs), "--data-dir", dir)

	run1 := pipeline(t, "run-1", env, runArgs("--data-dir", dir)...)
	nc, js := connectJS(t, embeddedURL(t, run1, dir))
	waitStored(t, run1, js, 30)
	run1.kill9(t)
	nc.Close()

	run2 := pipeline(t, "run-2", env, runArgs("--data-dir", dir, "--until-idle")...)
	run2.mustSucceed(t)
	a := auditEmbedded(t, dir)
	r := a.check(t, "", ids(jobs))
	for id, class := range a.classes {
		if class == "invalid_job" || class == "request_error" {
			t.Errorf("job %s dead-lettered as %s: its files were not read", id, class)
		}
	}
	stored := storedDigests(t, dir)
	lost := 0
	for d := range digests {
		if !stored[d] {
			lost++
			t.Errorf("file %s lost from the object store", d)
		}
	}
	r.Note = fmt.Sprintf("120 jobs naming a shared PNG and 10 PDFs of 200 KiB; killed after >= 30 outcomes; %d of %d files in the object store after%s",
		len(digests)-lost, len(digests), stranded(run2))
	return r
}

// pdfProvider speaks the OpenAI chat-completions wire format: it reads
// each request as the API would (the task turn's content parts), checks
// the PDF's file part holds the whole file as a data URL, and answers
// with a ticket.
type pdfProvider struct {
	srv     *httptest.Server
	calls   atomic.Int64
	badPart atomic.Int64
}

func newPDFProvider(t *testing.T, pdfBytes int) *pdfProvider {
	t.Helper()
	p := &pdfProvider{}
	wantData := len("data:application/pdf;base64,") + base64.StdEncoding.EncodedLen(pdfBytes)
	p.srv = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		p.calls.Add(1)
		var req struct {
			Messages []struct {
				Role    string          `json:"role"`
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
		}
		if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
			http.Error(w, `{"error":{"message":"bad json"}}`, http.StatusBadRequest)
			return
		}
		var parts []struct {
			Type string `json:"type"`
			File *struct {
				Filename string `json:"filename"`
				FileData string `json:"file_data"`
			} `json:"file"`
		}
		ok := len(req.Messages) >= 2 && json.Unmarshal(req.Messages[1].Content, &parts) == nil && len(parts) == 2 &&
			parts[0].File != nil && len(parts[0].File.FileData) == wantData
		if !ok {
			p.badPart.Add(1)
		}
		_, _ = io.WriteString(w, `{"id":"chatcmpl-1","object":"chat.completion","model":"m","choices":[{"index":0,"finish_reason":"stop",`+
			`"message":{"role":"assistant","content":"{\"subject\":\"Contract\",\"priority\":\"low\",\"category\":\"other\"}"}}],`+
			`"usage":{"prompt_tokens":30000,"completion_tokens":20,"total_tokens":30020}}`)
	}))
	t.Cleanup(p.srv.Close)
	return p
}

// 8 jobs, each with its own 20 MB PDF, at -c 8 against an OpenAI-speaking
// provider: every call carries its whole PDF (27 MB of base64), and the
// run's peak RSS stays under 256 MB: a file is read from the object store
// and base64-encoded as the request is written, never held whole.
func scenarioFilesMemory(t *testing.T) row {
	const rssLimitMB, pdfBytes = 256, 20 << 20
	dir := t.TempDir()
	var jobs []job
	for i := range 8 {
		data := filePDF(fmt.Sprint("big ", i), pdfBytes)[:pdfBytes]
		name := fmt.Sprintf("big-%d.pdf", i)
		if err := os.WriteFile(filepath.Join(dir, name), data, 0o644); err != nil {
			t.Fatal(err)
		}
		j := job{ID: fmt.Sprintf("big-%d", i), Schema: "ticket"}
		j.line, _ = json.Marshal(map[string]any{"id": j.ID, "schema": j.Schema, "files": []string{name}})
		jobs = append(jobs, j)
	}
	prov := newPDFProvider(t, pdfBytes)
	env := childEnv("OPENAI_API_KEY=" + testKey)
	submitFile(t, env, writeJobs(t, dir, jobs), "--data-dir", dir)
	run, peakRSS := pipelineMeasured(t, "run", env, "run", "--model", "openai:fault-model", "--llm-url", prov.srv.URL+"/v1",
		"--ack-wait", ackWait, "--concurrency", "8", "--max-attempts", "1", "--log-level", logLevel(),
		"--data-dir", dir, "--until-idle")
	run.mustSucceed(t)
	peakMB := peakRSS()
	if peakMB >= rssLimitMB {
		t.Errorf("peak RSS %d MB with 8 PDFs of 20 MB at -c 8, want < %d MB", peakMB, rssLimitMB)
	}
	if n := prov.badPart.Load(); n > 0 {
		t.Errorf("%d calls without the whole PDF as a file part", n)
	}
	a := auditEmbedded(t, dir)
	r := a.check(t, "", ids(jobs))
	r.Note = fmt.Sprintf("-c 8, 8 PDFs of 20 MiB (27 MiB of base64 per call), embedded server in the run process: %d calls, each with its whole PDF; peak RSS %d MB (limit %d)",
		prov.calls.Load(), peakMB, rssLimitMB)
	return r
}
