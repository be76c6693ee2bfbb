package main

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/poll"
	"github.com/llmpipeline/pipeline/internal/queue"
	"github.com/llmpipeline/pipeline/internal/sink"
	"github.com/llmpipeline/pipeline/llm/batchtest"
)

// TestFilesPurgeKeepsUnindexedOutcomes: b1's dead letter is on the DLQ
// stream but not yet in the index (run --sink=false: a sink elsewhere,
// behind or down); purging a1, which shares b1's file, keeps the file,
// and once the sink caught up b1's replay ends as a result. Before: the
// purge deleted shared.png and the replay failed ("no longer in the
// object store").
func TestFilesPurgeKeepsUnindexedOutcomes(t *testing.T) {
	t.Parallel()
	dataDir, dir := t.TempDir(), t.TempDir()
	pngData := receiptPNG(t)
	writeFile(t, dir, "shared.png", pngData)
	writeFile(t, dir, "a.jsonl", []byte(`{"id":"a1","schema":"ticket","files":["shared.png"]}`+"\n"))
	writeFile(t, dir, "b.jsonl", []byte(`{"id":"b1","schema":"invoice","files":["shared.png"]}`+"\n"))
	common := []string{"--data-dir", dataDir}
	mustCLI(t, "", append(append([]string{"submit"}, common...), filepath.Join(dir, "a.jsonl"))...)
	mustCLI(t, "", append([]string{"run", "--until-idle", "--sim-latency", "0", "--sim-force", "truncated"}, common...)...)
	mustCLI(t, "", append(append([]string{"submit"}, common...), filepath.Join(dir, "b.jsonl"))...)
	mustCLI(t, "", append([]string{"run", "--until-idle", "--sink=false", "--sim-latency", "0", "--sim-force", "truncated"}, common...)...)
	mustCLI(t, "", append([]string{"dlq", "purge", "--schema", "ticket", "--keep-files", "0s"}, common...)...)
	if !slices.Contains(storedFiles(t, dataDir), sha(pngData)) {
		t.Fatalf("shared.png deleted while b1's dead letter (on the DLQ stream, not yet indexed) names it")
	}
	mustCLI(t, "", append([]string{"run", "--until-idle", "--sim-latency", "0", "--concurrency", "0"}, common...)...)
	if out := mustCLI(t, "", append([]string{"dlq", "replay", "--schema", "invoice"}, common...)...); !strings.Contains(out, "replayed 1 jobs, 0 failed") {
		t.Fatalf("replay of b1: %q", out)
	}
}

// TestFilesPurgeKeepsBatchHeldJobs: b1 is held by batch mode (acked on
// JOBS, its item in PIPELINE_BATCHES, its batch in progress at the
// provider) when a purge of d1, which shares its file, runs; the file
// stays and b1's answer ends as a result. Before: the purge deleted the
// file and the paid answer ended as an invalid_job dead letter.
func TestFilesPurgeKeepsBatchHeldJobs(t *testing.T) {
	t.Parallel()
	wantTestKeys(t)
	srv := batchtest.New(batchtest.Config{Answer: validTicketAnswer(), Key: "sk-test", Hold: true})
	t.Cleanup(srv.Close)
	dataDir, dir := t.TempDir(), t.TempDir()
	pngData := receiptPNG(t)
	writeFile(t, dir, "shared.png", pngData)
	writeFile(t, dir, "d.jsonl", []byte(`{"id":"d1","schema":"invoice","files":["shared.png"]}`+"\n"))
	writeFile(t, dir, "b.jsonl", []byte(`{"id":"b1","schema":"ticket","input":"ticket 1","files":["shared.png"]}`+"\n"))
	common := []string{"--data-dir", dataDir}
	mustCLI(t, "", append(append([]string{"submit"}, common...), filepath.Join(dir, "d.jsonl"))...)
	mustCLI(t, "", append([]string{"run", "--until-idle", "--sim-latency", "0", "--sim-force", "truncated"}, common...)...)
	mustCLI(t, "", append(append([]string{"submit"}, common...), filepath.Join(dir, "b.jsonl"))...)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out, errs syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- mainContext(ctx, []string{"pipeline", "run", "--data-dir", dataDir, "--model", "openai:gpt-4o-mini", "--llm-url", srv.URL + "/v1",
			"--max-attempts", "1", "--batch", "--batch-wait", "50ms", "--batch-poll", "50ms"}, strings.NewReader(""), &out, &errs)
	}()
	// Held: the batch is at the provider and b1 is off the work queue.
	err := poll.Wait(t, 60*time.Second, func() error {
		if len(srv.Batches()) == 0 {
			return errNotYet
		}
		if n := streamMsgs(t, dataDir, broker.StreamJobs); n != 0 {
			return errNotYet
		}
		return nil
	})
	if err != nil {
		t.Fatalf("b1 not held in a batch: %v\n%s", err, errs.String())
	}
	mustCLI(t, "", append([]string{"dlq", "purge", "--schema", "invoice", "--keep-files", "0s"}, common...)...)
	if !slices.Contains(storedFiles(t, dataDir), sha(pngData)) {
		t.Errorf("shared.png deleted while b1, held in a batch, names it")
	}
	srv.SetHold(false)
	for _, id := range srv.Batches() {
		srv.Release(id)
	}
	err = poll.Wait(t, 60*time.Second, func() error {
		if len(jsonLines(t, mustCLI(t, "", append([]string{"results", "--json"}, common...)...))) == 1 {
			return nil
		}
		return errNotYet
	})
	cancel()
	<-done
	if err != nil {
		t.Fatalf("b1 has no result: %v; dead letters %v\n%s", err,
			jsonLines(t, mustCLI(t, "", append([]string{"dlq", "list", "--json"}, common...)...)), errs.String())
	}
}

// TestFilesPurgeSweepsUnnamed: a file whose last run retention removed
// from the index, and whose message left the DLQ stream (a stream
// limit), is deleted by the next purge; so is a file submit stored again
// for a job it then did not publish (already done). A file stored less
// than --keep-files ago stays. Before: both stayed stored for ever (a
// purge looked only at the files of the runs it purged).
func TestFilesPurgeSweepsUnnamed(t *testing.T) {
	t.Parallel()
	dataDir, dir := t.TempDir(), t.TempDir()
	pngData, pdfData := receiptPNG(t), bigPDF(50<<10)
	writeFile(t, dir, "a.png", pngData)
	writeFile(t, dir, "b.pdf", pdfData)
	writeFile(t, dir, "a.jsonl", []byte(`{"id":"a1","schema":"ticket","files":["a.png"]}`+"\n"))
	writeFile(t, dir, "b.jsonl", []byte(`{"id":"b1","schema":"ticket","files":["b.pdf"]}`+"\n"))
	common := []string{"--data-dir", dataDir}
	mustCLI(t, "", append(append([]string{"submit"}, common...), filepath.Join(dir, "a.jsonl"))...)
	mustCLI(t, "", append([]string{"run", "--until-idle", "--sim-latency", "0", "--sim-force", "truncated"}, common...)...)
	mustCLI(t, "", append(append([]string{"submit"}, common...), filepath.Join(dir, "b.jsonl"))...)
	mustCLI(t, "", append([]string{"run", "--until-idle", "--sim-latency", "0", "--sim-force", "truncated"}, common...)...)
	// Retention keeps one row: a1's goes from the index, not its message.
	mustCLI(t, "", append([]string{"run", "--until-idle", "--concurrency", "0", "--dlq-max-rows", "1"}, common...)...)
	if dead := jsonLines(t, mustCLI(t, "", append([]string{"dlq", "list", "--json"}, common...)...)); len(dead) != 1 || dead[0]["job_id"] != "b1" {
		t.Fatalf("dead letters after retention: %v, want b1", dead)
	}
	// Stored just now: --keep-files (default 1h) keeps them.
	mustCLI(t, "", append([]string{"dlq", "purge", "--all"}, common...)...)
	if got := storedFiles(t, dataDir); len(got) != 2 {
		t.Fatalf("stored after a purge within --keep-files: %d files, want 2", len(got))
	}
	// a1's message is still on DLQ (a rebuild brings it back): kept.
	mustCLI(t, "", append([]string{"dlq", "purge", "--all", "--keep-files", "0s"}, common...)...)
	if got := storedFiles(t, dataDir); !slices.Equal(got, []string{sha(pngData)}) {
		t.Fatalf("stored after purge --all: %v, want a.png only (a1's dead letter is still on the DLQ stream)", got)
	}
	deleteFromStream(t, dataDir, broker.StreamDLQ, "a1")
	mustCLI(t, "", append([]string{"dlq", "purge", "--all", "--keep-files", "0s"}, common...)...)
	if got := storedFiles(t, dataDir); len(got) != 0 {
		t.Fatalf("stored once nothing names a.png: %v, want none", got)
	}
	// Already done: submit does not publish a1 again; its file goes.
	if out := mustCLI(t, "", append(append([]string{"submit", "--json"}, common...), filepath.Join(dir, "a.jsonl"))...); !strings.Contains(out, `"published":0`) {
		t.Fatalf("second submit of a1: %s", out)
	}
	mustCLI(t, "", append([]string{"dlq", "purge", "--all", "--keep-files", "0s"}, common...)...)
	if got := storedFiles(t, dataDir); len(got) != 0 {
		t.Errorf("stored after submit of an already-done job and a purge: %v, want none", got)
	}
}

// validTicketAnswer answers every request with a valid ticket, as OpenAI's
// chat completions endpoint does.
func validTicketAnswer() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4o-mini",
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
				"message": map[string]any{"role": "assistant", "content": validTicket}}},
			"usage": map[string]any{"prompt_tokens": 900, "completion_tokens": 40, "total_tokens": 940},
		})
	})
}

var errNotYet = errorString("not yet")

type errorString string

func (e errorString) Error() string { return string(e) }

// streamMsgs is the number of messages stream holds.
func streamMsgs(t *testing.T, dataDir, stream string) uint64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c, err := broker.Connect(ctx, broker.Config{DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	s, err := c.JetStream().Stream(ctx, stream)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return info.State.Msgs
}

// deleteFromStream deletes the message of msgID from stream, as its
// limits would.
func deleteFromStream(t *testing.T, dataDir, stream, msgID string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c, err := broker.Connect(ctx, broker.Config{DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if n, err := sink.DeleteOutcomes(ctx, c, stream, []string{msgID}); err != nil || n != 1 {
		t.Fatalf("deleting %s from %s: %d, %v", msgID, stream, n, err)
	}
}

// TestFilesDataURLNotInDeadLetter: a job with a data-URL file published
// straight on pipeline.jobs.<schema> (not through submit, which stores
// files) is dead-lettered as invalid_job naming the file, and the dead
// letter holds the file's name, never its base64. Before: the dead
// letter's job held the whole data URL.
func TestFilesDataURLNotInDeadLetter(t *testing.T) {
	t.Parallel()
	dataDir := t.TempDir()
	pngData := receiptPNG(t)
	b64 := base64.StdEncoding.EncodeToString(pngData)
	line := `{"id":"x1","schema":"ticket","files":[{"url":"data:image/png;base64,` + b64 + `","name":"scan"}]}`
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	c, err := broker.Connect(ctx, broker.Config{DataDir: dataDir})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := queue.Submit(ctx, c, []queue.SubmitItem{{Data: []byte(line), Schema: "ticket", MsgID: "x1"}}, nil); err != nil {
		t.Fatal(err)
	}
	c.Close()
	mustCLI(t, "", "run", "--data-dir", dataDir, "--until-idle", "--sim-latency", "0")
	show := mustCLI(t, "", "dlq", "show", "--data-dir", dataDir, "--json", "x1")
	if strings.Contains(show, b64[:64]) {
		t.Errorf("the dead letter holds the file's base64 (%d bytes shown)", len(show))
	}
	var dl struct {
		Class  string `json:"class"`
		Reason string `json:"reason"`
		Job    struct {
			Files []map[string]any `json:"files"`
		} `json:"job"`
	}
	if err := json.Unmarshal([]byte(show), &dl); err != nil {
		t.Fatalf("dlq show --json: %v: %s", err, truncateStr(show, 300))
	}
	if dl.Class != "invalid_job" || !strings.Contains(dl.Reason, `"scan"`) || len(dl.Job.Files) != 1 || dl.Job.Files[0]["name"] != "scan" {
		t.Errorf("dead letter: class %q, reason %q, job files %v; want invalid_job naming \"scan\", the file by its name", dl.Class, dl.Reason, dl.Job.Files)
	}
}

// TestFilesDefaultLimitFitsTheRequest: by default submit refuses a 23 MiB
// PDF, whose base64 (32.2 MB) would not fit Anthropic's 32 MB request,
// naming the file and the flag, and takes a 21 MiB one. Before: the
// default was 32 MiB, and such a file was published to fail at the call.
func TestFilesDefaultLimitFitsTheRequest(t *testing.T) {
	t.Parallel()
	dataDir, dir := t.TempDir(), t.TempDir()
	writeFile(t, dir, "big.pdf", bigPDF(23<<20))
	writeFile(t, dir, "ok.pdf", bigPDF(21<<20))
	writeFile(t, dir, "big.jsonl", []byte(`{"id":"p1","schema":"invoice","files":["big.pdf"]}`+"\n"))
	writeFile(t, dir, "ok.jsonl", []byte(`{"id":"p2","schema":"invoice","files":["ok.pdf"]}`+"\n"))
	_, errOut, code := runCLI(t, "", "submit", "--data-dir", dataDir, "--max-job-bytes", "64MiB", filepath.Join(dir, "big.jsonl"))
	if code == 0 || !strings.Contains(errOut, "big.jsonl:1") || !strings.Contains(errOut, "big.pdf") || !strings.Contains(errOut, "--max-file-bytes") {
		t.Errorf("submit of a 23 MiB PDF: exit %d, %q; want refused, naming big.jsonl:1, big.pdf and --max-file-bytes", code, errOut)
	}
	if out := mustCLI(t, "", "submit", "--data-dir", dataDir, "--max-job-bytes", "64MiB", "--json", filepath.Join(dir, "ok.jsonl")); !strings.Contains(out, `"published":1`) {
		t.Errorf("submit of a 21 MiB PDF: %s", out)
	}
}

// TestFilesDataURLCountedOnce: a job with a 30,000-byte PDF as a data URL
// (a 40 KB line) is within --max-job-bytes 60000: the job counts the file
// once, by its bytes. Before: the URL's base64 and the file's bytes were
// both counted (70 KB), and the job was refused.
func TestFilesDataURLCountedOnce(t *testing.T) {
	t.Parallel()
	dataDir, dir := t.TempDir(), t.TempDir()
	pdf := bigPDF(30000)
	line := `{"id":"u1","schema":"invoice","files":[{"url":"data:application/pdf;base64,` + base64.StdEncoding.EncodeToString(pdf) + `"}]}` + "\n"
	writeFile(t, dir, "u.jsonl", []byte(line))
	out, errOut, code := runCLI(t, "", "submit", "--data-dir", dataDir, "--json", "--max-job-bytes", "60000", filepath.Join(dir, "u.jsonl"))
	if code != 0 || !strings.Contains(out, `"published":1`) {
		t.Fatalf("submit of a %d-byte line with a %d-byte file under --max-job-bytes 60000: exit %d, %s %s", len(line), len(pdf), code, out, errOut)
	}
	_, errOut, code = runCLI(t, "", "submit", "--data-dir", dataDir, "--max-job-bytes", "30000", filepath.Join(dir, "u.jsonl"))
	if code == 0 || !strings.Contains(errOut, "u.jsonl:1") {
		t.Errorf("submit under --max-job-bytes 30000: exit %d, %q; want refused naming u.jsonl:1", code, errOut)
	}
}
