// Package memtest is for tests that measure memory: the peak of this
// process's heap while a test runs, and job lines made on the fly so that
// the input itself takes no memory.
package memtest

import (
	"fmt"
	"io"
	"runtime/metrics"
	"sync"
	"time"
)

// Lines generates n small job lines on the fly (invoice jobs, ids
// job-00000000 on); every line whose number is a multiple of 100,003
// repeats the id of line 7.
func Lines(n int) io.Reader { return &linesReader{n: n} }

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

// PeakHeap samples the heap's objects every few milliseconds until stop
// is called, which returns the highest figure seen.
func PeakHeap() (stop func() uint64) {
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
