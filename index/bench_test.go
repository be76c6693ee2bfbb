package index

import (
	"fmt"
	"syscall"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/job"
)

// cpuTime is the CPU time (user + system) this process used so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// mixed is the outcome mix of a healthy run (as in the demo): 70% valid at
// the first call, 25% healed at the second, 5% dead-lettered after two.
func mixed(i int) job.Outcome {
	at := t0.Add(time.Duration(i) * time.Millisecond)
	id := fmt.Sprintf("job-%07d", i)
	switch i % 20 {
	case 0:
		return realistic(i)
	case 1, 2, 3, 4, 5:
		return outcome(id, false, 2, at, diag(fmt.Sprintf("/items/%d/price", i%4), "type", `"3"`), diag("/currency", "enum", `"eur"`))
	default:
		return outcome(id, false, 1, at)
	}
}

// BenchmarkWrite measures the sink's batch insert. "dead" writes dead
// letters of 2 attempts with 3 diagnostics each; "mixed" the mix of a
// healthy run (see mixed). outcomes/s is the figure to watch; rows/s
// counts the rows the tables gained, B/outcome the file's growth and
// cpu-µs/outcome the process's CPU time per outcome (steadier than the wall
// clock on a shared machine).
func BenchmarkWrite(b *testing.B) {
	for _, w := range []struct {
		name string
		gen  func(int) job.Outcome
	}{{"dead", realistic}, {"mixed", mixed}} {
		for _, batch := range []int{100, 500} {
			b.Run(fmt.Sprintf("%s/batch=%d", w.name, batch), func(b *testing.B) {
				s := openTemp(b)
				pool := make([]job.Outcome, batch*b.N)
				for i := range pool {
					pool[i] = w.gen(i)
				}
				b.ReportAllocs()
				b.ResetTimer()
				cpu0 := cpuTime(b)
				for i := 0; i < b.N; i++ {
					if err := s.Write(b.Context(), pool[i*batch:(i+1)*batch]); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				cpu := cpuTime(b) - cpu0
				secs := b.Elapsed().Seconds()
				rows := 0
				for _, t := range []string{"outcomes", "payloads", "attempts", "failures"} {
					var n int
					if err := s.r.QueryRow("SELECT COUNT(*) FROM " + t).Scan(&n); err != nil {
						b.Fatal(err)
					}
					rows += n
				}
				var pages, size int
				if err := s.w.QueryRow("PRAGMA page_count").Scan(&pages); err != nil {
					b.Fatal(err)
				}
				if err := s.w.QueryRow("PRAGMA page_size").Scan(&size); err != nil {
					b.Fatal(err)
				}
				b.ReportMetric(float64(len(pool))/secs, "outcomes/s")
				b.ReportMetric(float64(rows)/secs, "rows/s")
				b.ReportMetric(float64(pages*size)/float64(len(pool)), "B/outcome")
				b.ReportMetric(float64(cpu.Microseconds())/float64(len(pool)), "cpu-µs/outcome")
			})
		}
	}
}

// BenchmarkSink measures the sink's side of the store as it runs: batches
// of RESULTS/DLQ messages (as the workers encode them, the mix of a healthy
// run) decoded with job.DecodeOutcome and written with Write. cpu-µs/outcome is
// the process's CPU time per outcome, decoding included.
func BenchmarkSink(b *testing.B) {
	const batch = 500
	s := openTemp(b)
	msgs := make([][]byte, batch*b.N)
	for i := range msgs {
		msgs[i] = message(b, mixed(i))
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime(b)
	outs := make([]job.Outcome, 0, batch)
	for i := 0; i < b.N; i++ {
		outs = outs[:0]
		for _, m := range msgs[i*batch : (i+1)*batch] {
			o, err := job.DecodeOutcome(m)
			if err != nil {
				b.Fatal(err)
			}
			outs = append(outs, o)
		}
		if err := s.Write(b.Context(), outs); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	cpu := cpuTime(b) - cpu0
	b.ReportMetric(float64(len(msgs))/b.Elapsed().Seconds(), "outcomes/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(len(msgs)), "cpu-µs/outcome")
}

// BenchmarkWriteHandedOver is the sink's write as it runs on the CPU-bound
// path: batches of 500 first-pass successes handed over by the workers of
// the same process (the Outcome as built, with the message it was encoded
// into: nothing decoded or encoded again), with the stream cursor.
func BenchmarkWriteHandedOver(b *testing.B) {
	const batch = 500
	s := openTemp(b)
	outs := make([]job.Outcome, batch*b.N)
	for i := range outs {
		outs[i] = outcome(fmt.Sprintf("job-%07d", i), false, 1, t0.Add(time.Duration(i)*time.Millisecond))
		msg, err := job.EncodeOutcome(&outs[i])
		if err != nil {
			b.Fatal(err)
		}
		outs[i].Encoded = msg
	}
	b.ReportAllocs()
	b.ResetTimer()
	cpu0 := cpuTime(b)
	for i := 0; i < b.N; i++ {
		if err := s.WriteWithCursors(b.Context(), outs[i*batch:(i+1)*batch], map[string]uint64{"RESULTS": uint64((i + 1) * batch)}); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	cpu := cpuTime(b) - cpu0
	b.ReportMetric(float64(len(outs))/b.Elapsed().Seconds(), "outcomes/s")
	b.ReportMetric(float64(cpu.Microseconds())/float64(len(outs)), "cpu-µs/outcome")
}
