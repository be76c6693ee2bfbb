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

// TestNewRunBeforeConcluded: the concluder of run 0 stored the document's
// outcome and died before marking it concluded; a replay of a failed chunk
// (or a rerun of one) then starts run 1, whose end concludes run 1 — not
// run 0 again, which would mark the document ended without merging the new
// chunk. The old concluder's Concluded(0) changes nothing.
func TestNewRunBeforeConcluded(t *testing.T) {
	t.Parallel()
	c := newConn(t)
	d, err := ledger.NewDocuments(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	end := func(id string, k, run int, stream string, seq uint64) (ledger.Document, bool) {
		t.Helper()
		doc, last, err := d.ChunkEnded(t.Context(), id, 3, k, run, stream, seq)
		if err != nil {
			t.Fatal(err)
		}
		return doc, last
	}
	for _, id := range []string{"replayed", "rerun"} {
		for k := 1; k <= 3; k++ {
			end(id, k, 0, broker.StreamDLQ, uint64(k))
		}
	}
	run, err := d.Replay(t.Context(), "replayed", map[int]int{2: 1})
	if err != nil || run != 1 {
		t.Fatalf("Replay: run %d, %v; want run 1", run, err)
	}
	if err := d.Concluded(t.Context(), "replayed", 0); err != nil {
		t.Fatal(err)
	}
	doc, last := end("replayed", 2, 1, broker.StreamResults, 20)
	if !last || doc.Run != 1 || doc.Ended {
		t.Errorf("replayed chunk ended: last %v, document run %d ended %v; want last, run 1, not ended", last, doc.Run, doc.Ended)
	}
	doc, last = end("rerun", 2, 1, broker.StreamResults, 21)
	if !last || doc.Run != 1 {
		t.Errorf("rerun chunk ended: last %v, document run %d; want last, run 1", last, doc.Run)
	}
}

// TestRerunOfEveryChunkIsOneRun: every chunk of a concluded-or-not
// document reruns as run 1: the document's run moves once, to 1.
func TestRerunOfEveryChunkIsOneRun(t *testing.T) {
	t.Parallel()
	c := newConn(t)
	d, err := ledger.NewDocuments(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	for k := 1; k <= 3; k++ {
		if _, _, err := d.ChunkEnded(t.Context(), "doc", 3, k, 0, broker.StreamResults, uint64(k)); err != nil {
			t.Fatal(err)
		}
	}
	for k := 1; k <= 3; k++ {
		doc, _, err := d.ChunkEnded(t.Context(), "doc", 3, k, 1, broker.StreamResults, uint64(10+k))
		if err != nil || doc.Run != 1 {
			t.Fatalf("chunk %d of run 1: document run %d, %v; want 1", k, doc.Run, err)
		}
	}
}
