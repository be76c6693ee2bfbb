package ledger_test

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/ledger"
)

// TestChunkEndedDecidesTheLastOnce: the 64 chunks of a document end at
// once in two "processes" (two Documents on one bucket, each gathering its
// callers' records): exactly one caller is told to conclude the document,
// and its state holds every chunk. A chunk recorded again before the
// document is marked concluded (a redelivery: its concluder may have died)
// is told to conclude again (the job ledger keeps one outcome); once it is
// marked concluded, recording a chunk again concludes nothing.
func TestChunkEndedDecidesTheLastOnce(t *testing.T) {
	t.Parallel()
	c := newConn(t)
	const n = 64
	var procs [2]*ledger.Documents
	for i := range procs {
		d, err := ledger.NewDocuments(t.Context(), c)
		if err != nil {
			t.Fatal(err)
		}
		procs[i] = d
	}
	var last atomic.Int32
	var wg sync.WaitGroup
	for k := 1; k <= n; k++ {
		wg.Go(func() {
			doc, isLast, err := procs[k%2].ChunkEnded(t.Context(), "doc", n, k, 0, broker.StreamResults, uint64(k))
			if err != nil {
				t.Error(err)
				return
			}
			if isLast {
				last.Add(1)
				if !doc.Complete() || doc.Succeeded() != n {
					t.Errorf("told to conclude a document that is not complete: %d of %d succeeded", doc.Succeeded(), n)
				}
			}
		})
	}
	wg.Wait()
	if got := last.Load(); got != 1 {
		t.Fatalf("%d callers told to conclude, want 1", got)
	}
	if _, isLast, err := procs[1].ChunkEnded(t.Context(), "doc", n, 3, 0, broker.StreamResults, 3); err != nil || !isLast {
		t.Fatalf("the redelivered chunk 3 of a complete document not yet ended: last %v, err %v; want last", isLast, err)
	}
	doc, ok, err := procs[0].Get(t.Context(), "doc")
	if err != nil || !ok {
		t.Fatalf("Get: %v %v", ok, err)
	}
	for k, ch := range doc.Chunks {
		if ch.Seq != uint64(k+1) || ch.Stream != broker.StreamResults {
			t.Fatalf("chunk %d recorded as %+v", k+1, ch)
		}
	}
	if err := procs[1].Concluded(t.Context(), "doc", 0); err != nil {
		t.Fatal(err)
	}
	if _, isLast, err := procs[0].ChunkEnded(t.Context(), "doc", n, 5, 0, broker.StreamResults, 5); err != nil || isLast {
		t.Fatalf("a chunk recorded again after the document ended: last %v, err %v", isLast, err)
	}
	// A replay reopens it: chunk 7 runs again as run 1, the document as run 1.
	run, err := procs[0].Replay(t.Context(), "doc", map[int]int{7: 1})
	if err != nil || run != 1 {
		t.Fatalf("Replay: run %d, %v; want 1", run, err)
	}
	if _, isLast, _ := procs[1].ChunkEnded(t.Context(), "doc", n, 8, 0, broker.StreamResults, 8); isLast {
		t.Fatal("concluded while chunk 7's new run is pending")
	}
	if _, isLast, err := procs[1].ChunkEnded(t.Context(), "doc", n, 7, 1, broker.StreamResults, 99); err != nil || !isLast {
		t.Fatalf("chunk 7's new run ended: last %v, err %v; want the document to end again", isLast, err)
	}
}
