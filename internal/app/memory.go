package app

import (
	"os"
	"runtime/debug"
	"runtime/metrics"
	"time"
)

// submitMemoryLimit is the Go runtime's soft memory limit while submit
// hosts the embedded nats server in its own process, as long as what is
// live fits well below it.
//
// That server keeps, for the duplicate window (--duplicate-window, 2m by
// default), an index entry for every job id published: about 94 bytes of
// live heap per id (its map slot, the entry, the id string, the ordered
// array; measured with pprof at 1M ids: 94 MB). Submit keeps that index
// under EmbeddedDedupeBudget ids (dedupePace), so about 35 MB is live at
// most. With the default GC (GOGC=100) the heap grows to twice what is live
// before a collection; at 56 MiB, with the binary's own 35 MB of mapped
// pages beside it, a 1M-line submit peaks at 85 to 99 MB of RSS (118 MB
// with a limit of 100 MiB).
const submitMemoryLimit = 56 << 20

// LimitSubmitMemory keeps the heap near what is live while submit hosts
// the embedded server, unless the user chose a limit (GOMEMLIMIT), and
// returns what restores the previous limit. The limit is
// submitMemoryLimit, raised to 1.5 times the live heap once that is over
// two thirds of it: a fixed limit below what is live (a larger job, a
// user's GOMEMLIMIT aside) would have the collector run back to back, at
// half the CPU, for nothing it can free.
func LimitSubmitMemory() (restore func()) {
	if os.Getenv("GOMEMLIMIT") != "" {
		return func() {}
	}
	prev := debug.SetMemoryLimit(submitMemoryLimit)
	stop, done := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(done)
		live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
			}
			metrics.Read(live)
			if live[0].Value.Kind() != metrics.KindUint64 {
				return
			}
			n := int64(live[0].Value.Uint64())
			debug.SetMemoryLimit(max(submitMemoryLimit, n+n/2))
		}
	}()
	return func() {
		close(stop)
		<-done
		debug.SetMemoryLimit(prev)
	}
}
