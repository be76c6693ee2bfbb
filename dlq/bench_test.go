package dlq

import (
	"strconv"
	"testing"
)

// BenchmarkWrite measures the sink's batch insert with realistic outcomes
// (2 attempts, 3 diagnostics each): outcomes/s is the figure to watch.
func BenchmarkWrite(b *testing.B) {
	for _, batch := range []int{100, 500} {
		b.Run("batch="+strconv.Itoa(batch), func(b *testing.B) {
			s := openTemp(b)
			pool := make([]Outcome, batch*b.N)
			for i := range pool {
				pool[i] = realistic(i)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if err := s.Write(b.Context(), pool[i*batch:(i+1)*batch]); err != nil {
					b.Fatal(err)
				}
			}
			rows := 0 // outcome + payload + attempts + failures
			for i := range pool {
				rows += 2 + len(pool[i].Trace)
				for _, a := range pool[i].Trace {
					rows += len(a.Diagnostics)
				}
			}
			b.ReportMetric(float64(len(pool))/b.Elapsed().Seconds(), "outcomes/s")
			b.ReportMetric(float64(rows)/b.Elapsed().Seconds(), "rows/s")
		})
	}
}
