package app

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/llmpipeline/pipeline/internal/memtest"
	"github.com/llmpipeline/pipeline/internal/queue"
	"github.com/llmpipeline/pipeline/schemas"
)

// The memory of submit's two passes (JobCheck), on this process's heap:
// these tests measure the whole heap, so none of them is parallel. (They
// lived in cmd/pipeline, whose tests are the long pole of the race run.)

// TestSubmitCheckPassMemoryIsFlat: the first pass keeps a few bytes per job
// id, not the jobs: the heap after it grows far less than the file.
func TestSubmitCheckPassMemoryIsFlat(t *testing.T) {
	reg, err := schemas.Load("")
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "big.jsonl")
	f, err := os.Create(p)
	if err != nil {
		t.Fatal(err)
	}
	input := strings.Repeat("an invoice of some length ", 16)
	const n = 100_000
	for i := range n {
		fmt.Fprintf(f, `{"id":"job-%07d","schema":"invoice","input":"%s %d"}`+"\n", i, input, i)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	fi, _ := os.Stat(p)

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	jc := NewJobCheck(reg, 1<<20)
	defer jc.Close()
	if err := jc.ScanFrom(func() (io.ReadCloser, error) { return os.Open(p) }, func(int, string) {}); err != nil {
		t.Fatal(err)
	}
	runtime.GC()
	runtime.ReadMemStats(&after)
	grew := int64(after.HeapAlloc) - int64(before.HeapAlloc)
	if jc.Valid != n {
		t.Fatalf("%d valid, want %d", jc.Valid, n)
	}
	if grew > fi.Size()/8 {
		t.Errorf("heap grew %d bytes over the check of a %d-byte file (%d jobs): want well under an eighth of it", grew, fi.Size(), n)
	}
	t.Logf("file %d bytes, %d jobs: heap grew %d bytes (%.1f per job)", fi.Size(), n, grew, float64(grew)/n)
	runtime.KeepAlive(jc)
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
	src := func() (io.ReadCloser, error) { return io.NopCloser(memtest.Lines(n)), nil }
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	stop := memtest.PeakHeap()

	jc := NewJobCheck(reg, 1<<20)
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
	if err := jc.ItemsFrom(src, RerunNone, func(it queue.SubmitItem) error {
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
