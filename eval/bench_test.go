package eval_test

import (
	"bufio"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/eval"
	"github.com/llmpipeline/pipeline/index"
	"github.com/llmpipeline/pipeline/job"
)

// benchIndex is an index of n results (one in 20 a dead letter) and a
// labelled file of the n ids, each record with 6 scalars, a nested object,
// a multiset and an array of objects; one value in ten differs.
func benchIndex(b *testing.B, n int) (*index.Store, string) {
	b.Helper()
	dir := b.TempDir()
	st, err := index.Open(filepath.Join(dir, "pipeline.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	f, err := os.Create(filepath.Join(dir, "labels.jsonl"))
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriter(f)
	now := time.Now()
	batch := make([]job.Outcome, 0, 1000)
	for i := range n {
		id := fmt.Sprintf("job-%07d", i)
		total := fmt.Sprintf("%d.50", i%1000)
		data := fmt.Sprintf(`{"invoice_number":"INV-%d","vendor":{"name":"Acme GmbH","vat":"DE%09d"},"date":"2026-01-%02d","currency":"EUR","total":%s,"paid":true,"tags":["office","paper","q1"],"lines":[{"sku":"A-1","qty":2,"price":10},{"sku":"B-2","qty":1,"price":%s}]}`,
			i, i, 1+i%28, total, total)
		expTotal := total
		if i%10 == 0 {
			expTotal = "1.25"
		}
		fmt.Fprintf(w, `{"id":%q,"expected":{"invoice_number":"inv-%d","vendor":{"name":"ACME  GmbH","vat":"DE%09d"},"date":"2026-01-%02d","currency":"EUR","total":%s,"paid":true,"tags":["q1","office","paper"],"lines":[{"sku":"A-1","qty":2,"price":10.0},{"sku":"B-2","qty":1,"price":%s}]}}`+"\n",
			id, i, i, 1+i%28, expTotal, total)
		o := job.Outcome{JobID: id, Schema: "invoice", SchemaVersion: "v1", Model: "openai:m", Status: job.StatusSucceeded,
			Attempts: 1, Data: []byte(data), StartedAt: now, FinishedAt: now}
		if i%20 == 7 {
			o.Status, o.Class, o.Data = job.StatusDeadLettered, job.ClassExhausted, nil
		}
		batch = append(batch, o)
		if len(batch) == cap(batch) || i == n-1 {
			if err := st.Write(b.Context(), batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	if err := f.Close(); err != nil {
		b.Fatal(err)
	}
	return st, f.Name()
}

func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// peakHeap samples the live heap every millisecond until stop is called,
// and returns its peak.
func peakHeap() (stop func() uint64) {
	s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	var peak uint64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(s)
			peak = max(peak, s[0].Value.Uint64())
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() uint64 { close(done); wg.Wait(); return peak }
}

// BenchmarkRun scores labelled files of 10,000 and 100,000 records against
// the index: the time per eval and the peak live heap during it (flat: it
// does not grow with the file but for the set of its ids).
//
//	go test -run '^$' -bench BenchmarkRun -benchtime 1x ./eval
func BenchmarkRun(b *testing.B) {
	for _, n := range []int{10_000, 100_000} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			st, file := benchIndex(b, n)
			runtime.GC()
			b.ResetTimer()
			var peak uint64
			cpu0 := cpuTime(b)
			for range b.N {
				stop := peakHeap()
				res, err := eval.Run(b.Context(), st, file, eval.Options{})
				peak = max(peak, stop())
				if err != nil {
					b.Fatal(err)
				}
				if res.Records != n || res.Overall.Wrong == 0 {
					b.Fatalf("records %d, overall %+v", res.Records, res.Overall)
				}
			}
			b.ReportMetric(float64(n)/(b.Elapsed().Seconds()/float64(b.N)), "records/s")
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
			// CPU seconds of the process per eval (user + system, every
			// core): what the eval costs whatever else the machine runs
			b.ReportMetric((cpuTime(b)-cpu0).Seconds()/float64(b.N), "cpu-s/op")
		})
	}
}
