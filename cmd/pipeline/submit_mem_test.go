package main

import (
	"bytes"
	"encoding/json"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/llmpipeline/pipeline/internal/memtest"
)

// TestSubmitMemoryWithTheEmbeddedServer: a submit of 300,000 small lines
// on a fresh data dir starts the embedded nats server in this process,
// whose duplicate index holds every id published within the window (10 s
// here, so that the test waits twice for 10 s, not for 2 minutes). Submit
// keeps it under app.EmbeddedDedupeBudget ids and the heap near what is
// live: the heap's objects, the server's included, stay under 64 MB.
// Unpaced, with the whole file within the window, they peaked at 85 MB.
func TestSubmitMemoryWithTheEmbeddedServer(t *testing.T) {
	if testing.Short() {
		t.Skip("300,000 lines through the embedded server")
	}
	t.Setenv("GOMEMLIMIT", "")
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))
	const n = 300_000
	dir := t.TempDir()
	path := filepath.Join(dir, "jobs.jsonl")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(f, memtest.Lines(n)); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	stop := memtest.PeakHeap()
	var stdout, stderr bytes.Buffer
	code := Main([]string{"pipeline", "submit", "--skip-invalid", "--json", "--duplicate-window", "10s", "--data-dir", filepath.Join(dir, "data"), path}, strings.NewReader(""), &stdout, &stderr)
	peak := stop()
	var got map[string]int
	if code != 0 || json.Unmarshal(stdout.Bytes(), &got) != nil || got["published"] != n-2 || got["rejected"] != 2 {
		t.Fatalf("exit %d, %s (want %d published, the 2 repeats rejected); stderr: %s", code, stdout.Bytes(), n-2, stderr.Bytes())
	}
	const limit = 64 << 20
	if peak > limit {
		t.Errorf("the heap's objects peaked at %d MB over %d lines with the embedded server in the process, want under %d MB", peak>>20, n, limit>>20)
	}
	t.Logf("%d lines, embedded server in the process: the heap's objects peaked at %.1f MB", n, float64(peak)/(1<<20))
}
