package worker

import (
	"strings"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/llmpipeline/pipeline/chunk"
	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/queue"
	"github.com/llmpipeline/pipeline/job"
	"github.com/llmpipeline/pipeline/schemas"
)

// chunkEnds are the stored outcomes of the chunk jobs of text split by
// chunk.Split, as the queue hands them to Merge.
func chunkEnds(t testing.TB, id, text string, chars, overlap int) []queue.ChunkEnd {
	t.Helper()
	ranges := chunk.Split(text, chars, overlap)
	if len(ranges) < 3 {
		t.Fatalf("%d chunks, want at least 3", len(ranges))
	}
	texts := chunk.Texts(text, ranges)
	var ends []queue.ChunkEnd
	total := chunk.Count(text)
	for k, r := range ranges {
		ref := job.ChunkOf{Document: id, K: k + 1, N: len(ranges), Start: r.Start, End: r.End, Chars: total}
		raw, err := jsonv2.Marshal(job.Job{ID: job.ChunkID(id, k+1), Schema: "s", Input: texts[k], Chunk: &ref})
		if err != nil {
			t.Fatal(err)
		}
		msg, err := job.EncodeOutcome(&job.Outcome{JobID: job.ChunkID(id, k+1), Schema: "s", Status: job.StatusSucceeded, Job: raw, Chunk: &ref, Data: []byte(`{}`)})
		if err != nil {
			t.Fatal(err)
		}
		ends = append(ends, queue.ChunkEnd{K: k + 1, Stream: broker.StreamResults, Payload: msg})
	}
	return ends
}

// TestDocumentText: the document's text is reassembled from overlapping
// chunks byte for byte, through multi-byte characters in the overlaps; a
// chunk missing from the middle is an error, never a shorter text.
func TestDocumentText(t *testing.T) {
	t.Parallel()
	text := strings.Repeat("Grüße aus Köln 🧾 請求書です。 Ein Satz mit Wörtern. ", 40)
	ends := chunkEnds(t, "d", text, 200, 30)
	got, err := documentText(queue.DocumentEnd{ID: "d", Chunks: ends})
	if err != nil || got != text {
		t.Fatalf("documentText: %v; equal %v (%d of %d bytes)", err, got == text, len(got), len(text))
	}
	gap := append(append([]queue.ChunkEnd{}, ends[:1]...), ends[2:]...)
	if _, err := documentText(queue.DocumentEnd{ID: "d", Chunks: gap}); err == nil || !strings.Contains(err.Error(), "in no chunk") {
		t.Errorf("a missing chunk: err %v, want characters in no chunk", err)
	}
	short := ends[:len(ends)-1]
	if _, err := documentText(queue.DocumentEnd{ID: "d", Chunks: short}); err == nil || !strings.Contains(err.Error(), "cover") {
		t.Errorf("a missing last chunk: err %v, want the coverage named", err)
	}
}

// BenchmarkDocumentTruth: the truth checks of a 2 MB document's merge
// (about 270 chunks of 8,000 characters): reassembling its text from the
// chunks' stored outcomes, then grounding two values and a rule.
func BenchmarkDocumentTruth(b *testing.B) {
	sc, err := schemas.Compile("bill", []byte(`{"type":"object","properties":{"vendor":{"type":"string","x-grounded":true},
		"buyer":{"type":"string","x-grounded":true},"subtotal":{"type":"number"},"tax":{"type":"number"},"total":{"type":"number"}},
		"x-rules":[{"rule":"self.total == self.subtotal + self.tax","path":"/total"}]}`))
	if err != nil {
		b.Fatal(err)
	}
	var text strings.Builder
	text.WriteString("Sold by Müller. ")
	for text.Len() < 2<<20 {
		text.WriteString("Grüße aus Köln 🧾 請求書です。 Ein Satz mit Wörtern, der sich wiederholt.\n\n")
	}
	text.WriteString("Bought by Dvořák.")
	end := queue.DocumentEnd{ID: "d", Chunks: chunkEnds(b, "d", text.String(), 8000, 400)}
	merged := []byte(`{"vendor":"Müller","buyer":"Dvořák","subtotal":100,"tax":19,"total":119}`)
	b.ReportAllocs()
	for b.Loop() {
		var out job.Outcome
		if reason, ok := checkTruth(end, sc, merged, &out); !ok || len(out.Grounding) != 2 {
			b.Fatalf("%s %+v", reason, out.Grounding)
		}
	}
}
