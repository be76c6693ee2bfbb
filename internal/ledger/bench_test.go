package ledger

import (
	"strconv"
	"strings"
	"testing"

	"github.com/llmpipeline/pipeline/job"
)

// BenchmarkInputDigest is the ledger's digest of a job, per job in the
// workers' settle and per line in submit: its B/op stays flat whatever
// the input's size (the input is hashed through a pooled buffer).
func BenchmarkInputDigest(b *testing.B) {
	for _, size := range []int{300, 1 << 20} {
		j := job.Job{ID: "bench-0000001", Schema: "invoice", Input: strings.Repeat("x", size)}
		b.Run(strconv.Itoa(size), func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(size))
			for b.Loop() {
				_ = InputDigest(j)
			}
		})
	}
}
