package sim

import (
	"strconv"
	"testing"
)

// BenchmarkSimComplete is the simulator at zero latency on the invoice
// schema with the demo's fault rates (first turns).
func BenchmarkSimComplete(b *testing.B) {
	s := loadSchema(b, "invoice")
	cfg := DefaultConfig()
	cfg.Latency = 0
	sim := newTestSim(b, cfg)
	req := firstTurn(s, "")
	ids := make([]string, 1024)
	for i := range ids {
		ids[i] = "inv-" + strconv.Itoa(i)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; b.Loop(); i++ {
		req.JobID = ids[i%len(ids)]
		if _, err := sim.Complete(b.Context(), req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkSimCompleteParallel is the same from every core at once, the
// shape of a load test (the schema cache is shared).
func BenchmarkSimCompleteParallel(b *testing.B) {
	s := loadSchema(b, "invoice")
	cfg := DefaultConfig()
	cfg.Latency = 0
	sim := newTestSim(b, cfg)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		req := firstTurn(s, "")
		i := 0
		for pb.Next() {
			i++
			req.JobID = "inv-" + strconv.Itoa(i)
			if _, err := sim.Complete(b.Context(), req); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkSimHealTurn is a heal turn: reread the previous answer, fix the
// named paths, write it again.
func BenchmarkSimHealTurn(b *testing.B) {
	s := loadSchema(b, "invoice")
	sim := newTestSim(b, Config{WrongTypeRate: 1, MissingRequiredRate: 1, FixRate: 1})
	first := firstTurn(s, "inv-1")
	out := complete(b, sim, first).Content
	req := healTurn(first, out, feedback(s.diagnostics(b, out)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := sim.Complete(b.Context(), req); err != nil {
			b.Fatal(err)
		}
	}
}
