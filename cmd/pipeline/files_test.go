package main

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
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/llm/batchtest"
)

// receiptPNG is a small real PNG: a scanned receipt's stand-in.
func receiptPNG(t *testing.T) []byte {
	t.Helper()
	img := image.NewGray(image.Rect(0, 0, 120, 200))
	for y := 20; y < 180; y += 12 {
		for x := 10; x < 110; x++ {
			img.Set(x, y, color.Gray{Y: 40})
		}
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// bigPDF is a PDF of n bytes or a little more, one page.
func bigPDF(n int) []byte {
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n2 0 obj << /Type /Pages /Kids [3 0 R] /Count 1 >> endobj\n3 0 obj << /Type /Page /Parent 2 0 R >> endobj\n")
	line := "% invoice INV-7 total 12.50 EUR, padding to make the file large........\n"
	for b.Len() < n {
		b.WriteString(line)
	}
	b.WriteString("%%EOF\n")
	return b.Bytes()
}

func writeFile(t *testing.T, dir, name string, data []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
		t.Fatal(err)
	}
}

func sha(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// storedFiles lists the digests in the data dir's object store.
func storedFiles(t *testing.T, dataDir string) []string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := broker.Connect(ctx, broker.Config{DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	files, err := c.Payloads().Files(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// TestSubmitRefusesBadFiles: a missing file, a text file named .png, a
// file over --max-file-bytes and a job over --max-job-bytes with its
// files are refused with FILE:LINE and the file's name; nothing is
// published.
func TestSubmitRefusesBadFiles(t *testing.T) {
	t.Parallel()
	dataDir, dir := t.TempDir(), t.TempDir()
	writeFile(t, dir, "receipt.png", receiptPNG(t))
	writeFile(t, dir, "notes.png", []byte("just some notes, not an image at all\n"))
	writeFile(t, dir, "big.pdf", bigPDF(300<<10))
	lines := []string{
		`{"id":"ok","schema":"invoice","files":["receipt.png"]}`,
		`{"id":"missing","schema":"invoice","files":["nowhere.png"]}`,
		`{"id":"text","schema":"invoice","files":[{"path":"notes.png","name":"Notes"}]}`,
		`{"id":"big","schema":"invoice","files":["big.pdf"]}`,
		`{"id":"url","schema":"invoice","files":[{"url":"data:image/png;base64,aGVsbG8="}]}`,
	}
	jobs := filepath.Join(dir, "jobs.jsonl")
	writeFile(t, dir, "jobs.jsonl", []byte(strings.Join(lines, "\n")+"\n"))
	out, errs, code := runCLI(t, "", "submit", "--data-dir", dataDir, "--json", "--max-file-bytes", "200KiB", jobs)
	if code == 0 {
		t.Fatalf("submit exit 0 with bad files; stderr:\n%s", errs)
	}
	for _, want := range []string{
		jobs + ":2: files[0]: file nowhere.png: no such file or directory",
		jobs + ":3: files[0]: file notes.png is text/plain by its content, not one of PNG, JPEG, WebP or GIF images, or PDF",
		jobs + fmt.Sprintf(":4: files[0]: file big.pdf is %d bytes, over --max-file-bytes %d", len(bigPDF(300<<10)), 200<<10),
		jobs + ":5: files[0]: file (data URL) is text/plain by its content",
	} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errs)
		}
	}
	if strings.Contains(errs, ":1:") {
		t.Errorf("the good line was refused:\n%s", errs)
	}
	var sub map[string]int
	if err := json.Unmarshal([]byte(out), &sub); err != nil || sub["published"] != 0 || sub["rejected"] != 4 {
		t.Errorf("submit printed %q, want 0 published and 4 rejected", out)
	}
	// A job whose files make it bigger than --max-job-bytes.
	writeFile(t, dir, "one.jsonl", []byte(`{"id":"big2","schema":"invoice","files":["big.pdf"]}`+"\n"))
	_, errs, code = runCLI(t, "", "submit", "--data-dir", dataDir, "--max-job-bytes", "100KiB", filepath.Join(dir, "one.jsonl"))
	if code == 0 || !strings.Contains(errs, "one.jsonl:1: job and its files are") || !strings.Contains(errs, "over --max-job-bytes 102400") {
		t.Errorf("a job over --max-job-bytes with its files: exit %d, stderr:\n%s", code, errs)
	}
	if files := storedFiles(t, dataDir); len(files) != 0 {
		t.Errorf("refused submits stored files: %v", files)
	}
}

// TestFilesSubmitThenRun: a 3 MiB PDF (over the broker's 1 MiB message
// limit) and a receipt PNG shared by 100 jobs: each file is stored once,
// every job ends once, and the results name each file (name, media type,
// bytes, sha256) without its bytes.
func TestFilesSubmitThenRun(t *testing.T) {
	t.Parallel()
	dataDir, dir := t.TempDir(), t.TempDir()
	pngData, pdfData := receiptPNG(t), bigPDF(3<<20)
	writeFile(t, dir, "receipt.png", pngData)
	if err := os.Mkdir(filepath.Join(dir, "docs"), 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "docs"), "contract.pdf", pdfData)
	var b strings.Builder
	for i := range 100 {
		fmt.Fprintf(&b, `{"id":"r-%03d","schema":"invoice","input":"receipt %d","files":["receipt.png"]}`+"\n", i, i)
	}
	fmt.Fprintf(&b, `{"id":"contract","schema":"invoice","files":[{"path":"docs/contract.pdf","name":"Contract 2024"}]}`+"\n")
	writeFile(t, dir, "jobs.jsonl", []byte(b.String()))

	out := mustCLI(t, "", "submit", "--data-dir", dataDir, "--json", filepath.Join(dir, "jobs.jsonl"))
	var sub map[string]int
	if err := json.Unmarshal([]byte(out), &sub); err != nil || sub["published"] != 101 {
		t.Fatalf("submit: %q, want 101 published", out)
	}
	files := storedFiles(t, dataDir)
	if len(files) != 2 || !(files[0] == sha(pngData) || files[1] == sha(pngData)) {
		t.Fatalf("stored files %v, want the PNG and the PDF once each", files)
	}
	mustCLI(t, "", "run", "--data-dir", dataDir, "--until-idle", "--model", "sim", "--sim-latency", "0", "--concurrency", "8")

	seen := map[string]int{}
	results := mustCLI(t, "", "results", "--data-dir", dataDir, "--json")
	for _, line := range strings.Split(strings.TrimSpace(results), "\n") {
		if len(line) > 64<<10 {
			t.Fatalf("a result line is %d bytes: it holds a file's bytes", len(line))
		}
		var r struct {
			JobID string `json:"job_id"`
			Files []struct {
				Name      string `json:"name"`
				MediaType string `json:"media_type"`
				Bytes     int64  `json:"bytes"`
				SHA256    string `json:"sha256"`
			} `json:"files"`
		}
		if err := json.Unmarshal([]byte(line), &r); err != nil {
			t.Fatal(err)
		}
		seen[r.JobID]++
		if len(r.Files) != 1 {
			t.Errorf("result %s names %d files, want 1", r.JobID, len(r.Files))
			continue
		}
		f := r.Files[0]
		if r.JobID == "contract" {
			if f.Name != "Contract 2024" || f.MediaType != "application/pdf" || f.Bytes != int64(len(pdfData)) || f.SHA256 != sha(pdfData) {
				t.Errorf("contract's file = %+v", f)
			}
		} else if f.Name != "receipt.png" || f.MediaType != "image/png" || f.Bytes != int64(len(pngData)) || f.SHA256 != sha(pngData) {
			t.Errorf("%s's file = %+v", r.JobID, f)
		}
	}
	dead := jsonLines(t, mustCLI(t, "", "dlq", "list", "--data-dir", dataDir, "--json"))
	for _, d := range dead {
		seen[d["job_id"].(string)]++
	}
	if len(seen) != 101 {
		t.Errorf("%d jobs ended, want 101", len(seen))
	}
	for id, n := range seen {
		if n != 1 {
			t.Errorf("job %s ended %d times", id, n)
		}
	}
}

// TestFilesPurgeAndReplay: purging the last dead letter that names a file
// deletes the file; a file other jobs still name stays, and a replay
// after a purge of other jobs runs with its files.
func TestFilesPurgeAndReplay(t *testing.T) {
	t.Parallel()
	dataDir, dir := t.TempDir(), t.TempDir()
	pngData, pdfData := receiptPNG(t), bigPDF(50<<10)
	writeFile(t, dir, "shared.png", pngData)
	writeFile(t, dir, "solo.pdf", pdfData)
	writeFile(t, dir, "jobs.jsonl", []byte(`{"id":"t1","schema":"ticket","files":["shared.png"]}
{"id":"s1","schema":"shipment","files":["shared.png","solo.pdf"]}
{"id":"i1","schema":"invoice","input":"see the receipt","files":["shared.png"]}
`))
	common := []string{"--data-dir", dataDir}
	mustCLI(t, "", append(append([]string{"submit"}, common...), filepath.Join(dir, "jobs.jsonl"))...)
	mustCLI(t, "", append([]string{"run", "--until-idle", "--sim-latency", "0", "--sim-force", "truncated"}, common...)...)
	if dead := jsonLines(t, mustCLI(t, "", append([]string{"dlq", "list", "--json"}, common...)...)); len(dead) != 3 {
		t.Fatalf("%d dead letters, want 3", len(dead))
	}
	show := mustCLI(t, "", append(append([]string{"dlq", "show", "--json"}, common...), "s1")...)
	var shown struct {
		Files []map[string]any `json:"files"`
	}
	if err := json.Unmarshal([]byte(show), &shown); err != nil {
		t.Fatalf("dlq show --json: %v: %s", err, truncateStr(show, 300))
	}
	if len(shown.Files) != 2 || shown.Files[1]["name"] != "solo.pdf" || shown.Files[1]["media_type"] != "application/pdf" ||
		shown.Files[1]["sha256"] != sha(pdfData) || shown.Files[1]["bytes"] != float64(len(pdfData)) || shown.Files[0]["name"] != "shared.png" {
		t.Errorf("dlq show s1 names files %v, want shared.png and solo.pdf with media type, bytes and sha256", shown.Files)
	}
	if strings.Contains(show, base64.StdEncoding.EncodeToString(pdfData[:300])) {
		t.Errorf("dlq show holds the file's bytes")
	}
	text := mustCLI(t, "", append(append([]string{"dlq", "show"}, common...), "s1")...)
	if !strings.Contains(text, fmt.Sprintf("file 2    solo.pdf (application/pdf, %d bytes, sha256 %s)", len(pdfData), sha(pdfData))) {
		t.Errorf("dlq show s1 does not name solo.pdf:\n%s", truncateStr(text, 600))
	}
	has := func(digest string) bool {
		for _, d := range storedFiles(t, dataDir) {
			if d == digest {
				return true
			}
		}
		return false
	}
	mustCLI(t, "", append([]string{"dlq", "purge", "--schema", "shipment", "--keep-files", "0s"}, common...)...)
	if has(sha(pdfData)) {
		t.Errorf("solo.pdf is still stored after its last dead letter was purged")
	}
	if !has(sha(pngData)) {
		t.Fatalf("shared.png was deleted while other dead letters name it")
	}
	mustCLI(t, "", append([]string{"dlq", "purge", "--schema", "ticket", "--keep-files", "0s"}, common...)...)
	if !has(sha(pngData)) {
		t.Fatalf("shared.png was deleted while i1 still names it")
	}
	out := mustCLI(t, "", append([]string{"dlq", "replay", "--schema", "invoice"}, common...)...)
	if !strings.Contains(out, "replayed 1 jobs, 0 failed") {
		t.Fatalf("replay: %q", out)
	}
	mustCLI(t, "", append([]string{"run", "--until-idle", "--sim-latency", "0", "--sim-fault-scale", "0"}, common...)...)
	results := jsonLines(t, mustCLI(t, "", append([]string{"results", "--json"}, common...)...))
	if len(results) != 1 || results[0]["job_id"] != "i1" || results[0]["status"] != "succeeded" {
		t.Fatalf("results after the replay: %v", results)
	}
	files, _ := results[0]["files"].([]any)
	if len(files) != 1 || files[0].(map[string]any)["sha256"] != sha(pngData) {
		t.Errorf("the replayed result names files %v, want shared.png", files)
	}
	if !has(sha(pngData)) {
		t.Errorf("shared.png is gone while i1's result names it")
	}
}

func truncateStr(s string, n int) string {
	if len(s) > n {
		return s[:n] + "..."
	}
	return s
}

// TestReadmeReceipt runs the README's scanned-receipt quickstart (with the
// simulator): examples/receipt.png is a real PNG that submit accepts, and
// its result names it.
func TestReadmeReceipt(t *testing.T) {
	t.Parallel()
	dataDir, dir := t.TempDir(), t.TempDir()
	png, err := os.ReadFile(filepath.Join("..", "..", "examples", "receipt.png"))
	if err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "receipt.png", png)
	if err := os.Mkdir(filepath.Join(dir, "schemas"), 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, filepath.Join(dir, "schemas"), "receipt.json", []byte(`{"type": "object", "required": ["merchant", "total", "currency"],
 "properties": {"merchant": {"type": "string"}, "date": {"type": "string", "format": "date"},
                "total": {"type": "number"}, "currency": {"type": "string"}}}`))
	writeFile(t, dir, "receipts.jsonl", []byte(`{"id": "r-1", "schema": "receipt", "files": ["receipt.png"]}`+"\n"))
	mustCLI(t, "", "submit", "--data-dir", dataDir, "--schemas", filepath.Join(dir, "schemas"), filepath.Join(dir, "receipts.jsonl"))
	mustCLI(t, "", "run", "--data-dir", dataDir, "--until-idle", "--sim-latency", "0", "--sim-fault-scale", "0")
	res := jsonLines(t, mustCLI(t, "", "results", "--data-dir", dataDir, "--json"))
	if len(res) != 1 {
		t.Fatalf("%d results, want 1", len(res))
	}
	files, _ := res[0]["files"].([]any)
	if len(files) != 1 || files[0].(map[string]any)["media_type"] != "image/png" || files[0].(map[string]any)["sha256"] != sha(png) {
		t.Errorf("the receipt's result names files %v", files)
	}
}

// TestFilesMissingFromTheStore: a job whose file is gone from the object
// store (deleted behind the pipeline's back) is dead-lettered invalid_job
// naming the file, without a model call.
func TestFilesMissingFromTheStore(t *testing.T) {
	t.Parallel()
	dataDir, dir := t.TempDir(), t.TempDir()
	pngData := receiptPNG(t)
	writeFile(t, dir, "receipt.png", pngData)
	writeFile(t, dir, "jobs.jsonl", []byte(`{"id":"gone","schema":"invoice","files":["receipt.png"]}`+"\n"))
	mustCLI(t, "", "submit", "--data-dir", dataDir, filepath.Join(dir, "jobs.jsonl"))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := broker.Connect(ctx, broker.Config{DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Payloads().DeleteFile(ctx, sha(pngData)); err != nil {
		t.Fatal(err)
	}
	c.Close()
	mustCLI(t, "", "run", "--data-dir", dataDir, "--until-idle", "--sim-latency", "0")
	dead := jsonLines(t, mustCLI(t, "", "dlq", "list", "--data-dir", dataDir, "--json"))
	if len(dead) != 1 || dead[0]["class"] != "invalid_job" || !strings.Contains(fmt.Sprint(dead[0]["reason"]), `"receipt.png" (sha256 `+sha(pngData)) {
		t.Fatalf("dead letters %v, want gone as invalid_job naming receipt.png", dead)
	}
	if n, _ := dead[0]["attempts"].(float64); n != 0 {
		t.Errorf("%v model calls for a job whose file is missing, want 0", n)
	}
}

// TestFilesBatchRun: run --batch carries a job's files in its batch lines
// as the synchronous calls do (OpenAI image_url parts with the file's
// whole data URL, before the task text), and the results name them.
func TestFilesBatchRun(t *testing.T) {
	t.Parallel()
	wantTestKeys(t)
	pngData := receiptPNG(t)
	want := "data:image/png;base64," + base64.StdEncoding.EncodeToString(pngData)
	var calls, good atomic.Int32
	answer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		var req struct {
			Messages []struct {
				Content json.RawMessage `json:"content"`
			} `json:"messages"`
		}
		var parts []struct {
			Type     string `json:"type"`
			Text     string `json:"text"`
			ImageURL *struct {
				URL string `json:"url"`
			} `json:"image_url"`
		}
		if json.NewDecoder(r.Body).Decode(&req) == nil && len(req.Messages) > 1 && json.Unmarshal(req.Messages[1].Content, &parts) == nil &&
			len(parts) == 2 && parts[0].ImageURL != nil && parts[0].ImageURL.URL == want && parts[1].Type == "text" {
			good.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4o-mini",
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
				"message": map[string]any{"role": "assistant", "content": validTicket}}},
			"usage": map[string]any{"prompt_tokens": 900, "completion_tokens": 40, "total_tokens": 940},
		})
	})
	srv := batchtest.New(batchtest.Config{Answer: answer, Key: "sk-test"})
	t.Cleanup(srv.Close)
	dataDir, dir := t.TempDir(), t.TempDir()
	writeFile(t, dir, "receipt.png", pngData)
	var b strings.Builder
	for i := range 3 {
		fmt.Fprintf(&b, `{"id":"b-%d","schema":"ticket","input":"ticket %d","files":["receipt.png"]}`+"\n", i, i)
	}
	writeFile(t, dir, "jobs.jsonl", []byte(b.String()))
	mustCLI(t, "", "submit", "--data-dir", dataDir, filepath.Join(dir, "jobs.jsonl"))
	mustCLI(t, "", "run", "--data-dir", dataDir, "--until-idle", "--model", "openai:gpt-4o-mini", "--llm-url", srv.URL+"/v1",
		"--max-attempts", "1", "--batch", "--batch-wait", "50ms", "--batch-poll", "50ms")
	if srv.Creates() == 0 {
		t.Fatal("no batch was created")
	}
	if calls.Load() != 3 || good.Load() != 3 {
		t.Errorf("%d batch lines answered, %d with the image as an image_url part before the text; want 3 and 3", calls.Load(), good.Load())
	}
	results := jsonLines(t, mustCLI(t, "", "results", "--data-dir", dataDir, "--json"))
	dead := jsonLines(t, mustCLI(t, "", "dlq", "list", "--data-dir", dataDir, "--json"))
	if len(results)+len(dead) != 3 {
		t.Fatalf("%d results and %d dead letters, want 3 jobs ended", len(results), len(dead))
	}
	for _, r := range results {
		if files, _ := r["files"].([]any); len(files) != 1 {
			t.Errorf("result %v names %d files", r["job_id"], len(files))
		}
	}
}
