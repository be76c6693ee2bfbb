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
