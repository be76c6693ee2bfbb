//go:build !race

// The race detector slows the 62 MB read tenfold and adds its own
// memory: the heap is measured without it.

package batch_test

import (
	"runtime"
	"runtime/debug"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/batch"
	"github.com/llmpipeline/pipeline/llm/batchtest"
)

// An output file of 64 MB, all but one line for custom ids no request of
// the batch has, is streamed: those lines are dropped as they are read,
// and the heap grows by far less than the file. Before: every line was
// parsed and kept until the whole file was read (a 300 MB output took
// the run to 359 MB).
func TestBatchOutputFileStreamed(t *testing.T) {
	const lines, size = 16000, 4096 // 64 MB of stray lines
	r := newRig(t, false, func(c *batchtest.Config) { c.Stray, c.StrayBytes = lines, size })
	r.submit("ok-1")
	// The heap's peak is measured with a collection soon after any
	// growth, so it follows what is kept, not the collector's pacing.
	defer debug.SetGCPercent(debug.SetGCPercent(10))
	runtime.GC()
	var base runtime.MemStats
	runtime.ReadMemStats(&base)
	var peak atomic.Uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(2 * time.Millisecond)
		defer t.Stop()
		for {
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			if m.HeapAlloc > peak.Load() {
				peak.Store(m.HeapAlloc)
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	})
	stop := r.start(batch.HealBatch)
	defer stop()
	r.waitEnded("ok-1")
	r.waitRecordEnded(r.srv.Batches()[0]) // the whole file read
	close(done)
	wg.Wait()
	stop()
	r.allSucceeded("ok-1")
	grew := int64(peak.Load()) - int64(base.HeapAlloc)
	file := int64(lines * size)
	t.Logf("output file %d MB: heap %d MB before, peak %d MB (grew %d MB)", file>>20, base.HeapAlloc>>20, peak.Load()>>20, grew>>20)
	if grew > file/4 {
		t.Errorf("the heap grew by %d MB reading a %d MB output file, want under %d MB: the file is not streamed", grew>>20, file>>20, file/4>>20)
	}
}
