package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/internal/app"
	"github.com/llmpipeline/pipeline/internal/queue"
	"github.com/llmpipeline/pipeline/schemas"
)

// linesReader generates n small job lines on the fly; every line whose
// number is a multiple of 100,003 repeats the id of line 7.
type linesReader struct {
	i, n int
	buf  []byte
}

func (r *linesReader) Read(p []byte) (int, error) {
	for len(r.buf) < len(p) && r.i < r.n {
		id := fmt.Sprintf("job-%08d", r.i)
		if r.i > 0 && (r.i+1)%100_003 == 0 {
			id = "job-00000006"
		}
		r.buf = fmt.Appendf(r.buf, `{"id":%q,"schema":"invoice","input":"Invoice %d from ACME, total 12.50 EUR"}`+"\n", id, r.i)
		r.i++
	}
	if len(r.buf) == 0 {
		return 0, io.EOF
	}
	n := copy(p, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

// peakHeap samples the heap's objects every few milliseconds until stop
// is called, which returns the highest figure seen.
func peakHeap() (stop func() uint64) {
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var mu sync.Mutex
	var peak uint64
	done, quit := make(chan struct{}), make(chan struct{})
	read := func() {
		metrics.Read(sample)
		mu.Lock()
		peak = max(peak, sample[0].Value.Uint64())
		mu.Unlock()
	}
	go func() {
		defer close(done)
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			read()
			select {
			case <-quit:
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 {
		close(quit)
		<-done
		read()
		mu.Lock()
		defer mu.Unlock()
		return peak
	}
}

// TestSubmitMemoryIsFlat: both passes of submit over 1M small lines
// (generated on the fly, 9 of them repeats) keep the heap flat: the ids
// go to disk, not into a map that grows with the file. The GC runs at a
// low percentage so the heap's objects are close to what is live.
func TestSubmitMemoryIsFlat(t *testing.T) {
	if testing.Short() {
		t.Skip("1M lines")
	}
	reg, err := schemas.Load("")
	if err != nil {
		t.Fatal(err)
	}
	const n = 1_000_000
	src := func() (io.ReadCloser, error) { return io.NopCloser(&linesReader{n: n}), nil }
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	stop := peakHeap()

	jc := app.NewJobCheck(reg, 1<<20)
	defer jc.Close()
	var bad []string
	if err := jc.ScanFrom(src, func(n int, reason string) {
		if len(bad) < 100 {
			bad = append(bad, fmt.Sprintf("%d: %s", n, reason))
		}
	}); err != nil {
		t.Fatal(err)
	}
	published := 0
	if err := jc.ItemsFrom(src, app.RerunNone, func(it queue.SubmitItem) error {
		published++
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	peak := stop()
	grew := int64(peak) - int64(base.HeapAlloc)
	if len(bad) != 9 || bad[0] != `100003: job id "job-00000006" repeats line 7` || jc.Valid != n-9 || published != n-9 {
		t.Fatalf("%d valid, %d published, refused %q; want %d, the 9 repeats", jc.Valid, published, bad, n-9)
	}
	const limit = 24 << 20
	if grew > limit {
		t.Errorf("the heap grew %d MB over both passes of %d lines, want under %d MB", grew>>20, n, limit>>20)
	}
	t.Logf("%d lines: the heap's objects peaked %.1f MB above the start", n, float64(grew)/(1<<20))
}

// TestSubmitMemoryWithTheEmbeddedServer: a submit of 300,000 small lines
// on a fresh data dir starts the embedded nats server in this process,
// whose duplicate index then holds every id published (the whole file is
// within the 2m window). Its heap, the server's included, stays under
// 100 MB (85 MB measured): the collector runs before the heap doubles
// what is live. Without limitSubmitMemory it peaked at 111 MB.
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
	if _, err := io.Copy(f, &linesReader{n: n}); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	stop := peakHeap()
	var stdout, stderr bytes.Buffer
	code := Main([]string{"pipeline", "submit", "--skip-invalid", "--json", "--data-dir", filepath.Join(dir, "data"), path}, strings.NewReader(""), &stdout, &stderr)
	peak := stop()
	var got map[string]int
	if code != 0 || json.Unmarshal(stdout.Bytes(), &got) != nil || got["published"] != n-2 || got["rejected"] != 2 {
		t.Fatalf("exit %d, %s (want %d published, the 2 repeats rejected); stderr: %s", code, stdout.Bytes(), n-2, stderr.Bytes())
	}
	const limit = 100 << 20
	if peak > limit {
		t.Errorf("the heap's objects peaked at %d MB over %d lines with the embedded server in the process, want under %d MB", peak>>20, n, limit>>20)
	}
	t.Logf("%d lines, embedded server in the process: the heap's objects peaked at %.1f MB", n, float64(peak)/(1<<20))
}
