package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/ledger"
	"github.com/llmpipeline/pipeline/internal/poll"
	"github.com/llmpipeline/pipeline/job"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// chunkJobs are the n chunk jobs of document doc.
func chunkJobs(t *testing.T, doc string, n int) []SubmitItem {
	t.Helper()
	var items []SubmitItem
	for k := 1; k <= n; k++ {
		j := job.Job{ID: job.ChunkID(doc, k), Schema: "invoice", Input: fmt.Sprintf("part %d", k),
			Chunk: &job.ChunkOf{Document: doc, K: k, N: n, Start: 10 * (k - 1), End: 10 * k, Chars: 10 * n}}
		data, err := json.Marshal(j)
		if err != nil {
			t.Fatal(err)
		}
		items = append(items, SubmitItem{Data: data, Schema: "invoice", MsgID: j.ID, JobID: j.ID, Chunk: j.Chunk})
	}
	return items
}

// failingDocs merges by listing the chunks' payloads, and fails its first
// failures calls: as a process that died after the last chunk's outcome
// was stored and before the document's was.
type failingDocs struct {
	mu       sync.Mutex
	failures int
	calls    map[string]int
}

func (f *failingDocs) Merge(_ context.Context, end DocumentEnd) Outcome {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.calls[end.ID]++
	if f.failures > 0 {
		f.failures--
		return Outcome{Action: ActionRetry, Reason: "the merging process went away"}
	}
	var parts []string
	for _, c := range end.Chunks {
		if c.Gone != "" && c.Payload == nil {
			parts = append(parts, fmt.Sprintf("%d:gone", c.K))
			continue
		}
		parts = append(parts, fmt.Sprintf("%d:%s", c.K, c.Stream))
	}
	return Outcome{Action: ActionResult, Schema: "invoice", Payload: fmt.Appendf(nil, `{"job_id":%q,"chunks":%q}`, end.ID, strings.Join(parts, ","))}
}

// TestDocumentEndsOnceAfterItsConcluderFailed: the merge of a document
// fails twice after its last chunk's outcome is stored (the chunk is
// handed back, unacked). The chunk's redeliveries find their run ended,
// the model is not called again, and the document ends once, with every
// chunk; no chunk is answered twice.
func TestDocumentEndsOnceAfterItsConcluderFailed(t *testing.T) {
	t.Parallel()
	c := newConn(t)
	items := append(chunkJobs(t, "doc-a", 6), chunkJobs(t, "doc-b", 3)...)
	st := submit(t, c, items)
	if st.Chunks != len(items) {
		t.Fatalf("submit counted %d chunks, want %d", st.Chunks, len(items))
	}
	var calls counter
	h := HandlerFunc(func(ctx context.Context, d *Delivery) Outcome {
		calls.add(d.MsgID)
		return Outcome{Action: ActionResult, Schema: d.Job.Schema, Payload: resultFor(d)}
	})
	docs := &failingDocs{failures: 2, calls: map[string]int{}}
	cfg := fastWorkers(WorkerConfig{Concurrency: 4, UntilIdle: true, BackOff: []time.Duration{20 * time.Millisecond}, Documents: docs})
	if err := RunWorkers(t.Context(), c, cfg, h); err != nil {
		t.Fatalf("RunWorkers: %v", err)
	}
	for _, it := range items {
		if n := calls.get(it.MsgID); n != 1 {
			t.Errorf("chunk %s handled %d times, want 1", it.MsgID, n)
		}
	}
	results := readAll(t, c, broker.StreamResults, "")
	count := map[string]int{}
	var docA string
	for _, m := range results {
		count[m.MsgID]++
		if m.MsgID == "doc-a" {
			docA = string(m.Data)
		}
	}
	for _, id := range []string{"doc-a", "doc-b"} {
		if count[id] != 1 {
			t.Errorf("document %s stored %d times, want 1", id, count[id])
		}
	}
	if want := `"1:RESULTS,2:RESULTS,3:RESULTS,4:RESULTS,5:RESULTS,6:RESULTS"`; !strings.Contains(docA, want) {
		t.Errorf("doc-a outcome %s, want every chunk in order (%s)", docA, want)
	}
	if len(results) != len(items)+2 {
		t.Errorf("%d results, want %d chunks and 2 documents", len(results), len(items))
	}
	if total := docs.calls["doc-a"] + docs.calls["doc-b"]; total != 4 {
		t.Errorf("merges called %d times (%v), want 2 failed and 2 that ended the documents", total, docs.calls)
	}
}

// TestDocumentEndsWhenItsLastChunkIsRetired: the merge fails on every
// delivery of the last chunk, up to MaxDeliver; the orphan sweep that
// retires the chunk (its outcome stored, its run ended) must end the
// document rather than delete the only thing that could.
func TestDocumentEndsWhenItsLastChunkIsRetired(t *testing.T) {
	t.Parallel()
	c := newConn(t)
	items := chunkJobs(t, "doc-o", 2)
	submit(t, c, items)
	h := HandlerFunc(func(ctx context.Context, d *Delivery) Outcome {
		return Outcome{Action: ActionResult, Schema: d.Job.Schema, Payload: resultFor(d)}
	})
	docs := &failingDocs{failures: 3, calls: map[string]int{}}
	cfg := fastWorkers(WorkerConfig{Concurrency: 1, MaxDeliver: 3, UntilIdle: true, BackOff: []time.Duration{20 * time.Millisecond}, Documents: docs})
	if err := RunWorkers(t.Context(), c, cfg, h); err != nil {
		t.Fatalf("RunWorkers: %v", err)
	}
	n := 0
	for _, m := range readAll(t, c, broker.StreamResults, "") {
		if m.MsgID == "doc-o" {
			n++
		}
	}
	if n != 1 {
		t.Errorf("document stored %d times (merge calls %v), want 1", n, docs.calls)
	}
	if dl := readAll(t, c, broker.StreamDLQ, ""); len(dl) != 0 {
		t.Errorf("%d dead letters, want none", len(dl))
	}
}

// TestRedeliveredChunkEndsItsDocumentWithTheLedgersOutcome: a redelivered
// chunk finds an earlier delivery's result on RESULTS while the job ledger
// kept another outcome of that run (a dead letter on DLQ, recorded first
// by another worker). The document is ended with the outcome the ledger
// kept, the one the chunk's run is: not the one this delivery found.
func TestRedeliveredChunkEndsItsDocumentWithTheLedgersOutcome(t *testing.T) {
	t.Parallel()
	c := newConn(t)
	items := chunkJobs(t, "doc-l", 2)
	submit(t, c, items)
	js := c.JetStream()
	h := HandlerFunc(func(ctx context.Context, d *Delivery) Outcome {
		if d.Job.Chunk.K == 1 {
			return Outcome{Action: ActionResult, Schema: d.Job.Schema, Payload: resultFor(d)}
		}
		if d.NumDelivered == 1 {
			return Outcome{Action: ActionRetry, Delay: 10 * time.Millisecond, Reason: "once more"}
		}
		// Another worker's dead letter of this run, kept by the ledger,
		// and an earlier delivery's result without a ledger entry.
		dl, err := js.PublishMsg(ctx, &nats.Msg{Subject: broker.SchemaSubject(broker.SubjectDLQ, "invoice"), Data: resultFor(d), Header: nats.Header{jetstream.MsgIDHeader: {d.MsgID}}})
		if err != nil {
			t.Error(err)
		}
		if _, err := js.PublishMsg(ctx, &nats.Msg{Subject: broker.SchemaSubject(broker.SubjectResults, "invoice"), Data: resultFor(d), Header: nats.Header{jetstream.MsgIDHeader: {d.MsgID}}}); err != nil {
			t.Error(err)
		}
		if _, err := ledger.New(c).Record(ctx, d.Job.ID, ledger.Run{MsgID: d.MsgID, Stream: broker.StreamDLQ, Seq: dl.Sequence}); err != nil {
			t.Error(err)
		}
		return Outcome{Action: ActionDeadLetter, Schema: d.Job.Schema, Payload: resultFor(d)}
	})
	docs := &failingDocs{calls: map[string]int{}}
	cfg := fastWorkers(WorkerConfig{Concurrency: 1, UntilIdle: true, BackOff: []time.Duration{10 * time.Millisecond}, Documents: docs})
	if err := RunWorkers(t.Context(), c, cfg, h); err != nil {
		t.Fatalf("RunWorkers: %v", err)
	}
	var doc []string
	for _, m := range readAll(t, c, broker.StreamResults, "") {
		if m.MsgID == "doc-l" {
			doc = append(doc, string(m.Data))
		}
	}
	if len(doc) != 1 || !strings.Contains(doc[0], `"1:RESULTS,2:DLQ"`) {
		t.Errorf("document outcomes %q, want one with chunk 2 as the ledger kept it (DLQ)", doc)
	}
}

// TestDocumentEndsWhenAChunkOutcomeWasRemoved: chunk 1's result is
// removed from RESULTS (retention, a purge) before chunk 2 ends. The
// document still ends, once, with chunk 1 handed to the merge as gone
// (a failed chunk: the worker's merge makes it a partial dead letter)
// rather than an error that keeps the document from ever ending.
func TestDocumentEndsWhenAChunkOutcomeWasRemoved(t *testing.T) {
	t.Parallel()
	c := newConn(t)
	items := chunkJobs(t, "doc-g", 2)
	submit(t, c, items)
	results, err := c.JetStream().Stream(t.Context(), broker.StreamResults)
	if err != nil {
		t.Fatal(err)
	}
	h := HandlerFunc(func(ctx context.Context, d *Delivery) Outcome {
		if d.Job.Chunk.K == 2 {
			err := poll.Wait(t, 10*time.Second, func() error {
				for _, m := range readAll(t, c, broker.StreamResults, "") {
					if m.MsgID == "doc-g#1" {
						return results.DeleteMsg(ctx, m.Sequence)
					}
				}
				return errors.New("chunk 1's result not stored yet")
			})
			if err != nil {
				t.Error(err)
			}
		}
		return Outcome{Action: ActionResult, Schema: d.Job.Schema, Payload: resultFor(d)}
	})
	docs := &failingDocs{calls: map[string]int{}}
	cfg := fastWorkers(WorkerConfig{Concurrency: 2, UntilIdle: true, BackOff: []time.Duration{10 * time.Millisecond}, Documents: docs})
	if err := RunWorkers(t.Context(), c, cfg, h); err != nil {
		t.Fatalf("RunWorkers: %v", err)
	}
	var doc []string
	for _, m := range readAll(t, c, broker.StreamResults, "") {
		if m.MsgID == "doc-g" {
			doc = append(doc, string(m.Data))
		}
	}
	if len(doc) != 1 || !strings.Contains(doc[0], `"1:gone,2:RESULTS"`) {
		t.Errorf("document outcomes %q (merge calls %v), want one with chunk 1 gone", doc, docs.calls)
	}
}

// TestUnreadableChunkEndsItsDocument: chunk 2 of a document is over the
// worker's MaxJobBytes (--max-job-bytes), so its body is never read and
// it is dead-lettered as an invalid job like any job. Its message's
// HeaderChunk still records it in its document, which ends once with
// chunk 2 as a dead letter; before, the document waited for chunk 2 for
// ever.
func TestUnreadableChunkEndsItsDocument(t *testing.T) {
	t.Parallel()
	c := newConn(t)
	items := chunkJobs(t, "doc u.1", 2)
	big := job.Job{ID: job.ChunkID("doc u.1", 2), Schema: "invoice", Input: strings.Repeat("part 2 ", 400),
		Chunk: &job.ChunkOf{Document: "doc u.1", K: 2, N: 2, Start: 10, End: 20, Chars: 20}}
	data, err := json.Marshal(big)
	if err != nil {
		t.Fatal(err)
	}
	items[1].Data = data
	submit(t, c, items)
	var mu sync.Mutex
	var invalid []string
	h := HandlerFunc(func(ctx context.Context, d *Delivery) Outcome {
		if d.JobErr != nil {
			mu.Lock()
			defer mu.Unlock()
			if d.Job.Chunk == nil {
				invalid = append(invalid, d.MsgID+" as no chunk")
			} else {
				invalid = append(invalid, fmt.Sprintf("%s as chunk %d of %d of %q (%s)", d.MsgID, d.Job.Chunk.K, d.Job.Chunk.N, d.Job.Chunk.Document, d.Job.Schema))
			}
			return Outcome{Action: ActionDeadLetter, Schema: "invoice", Payload: resultFor(d)}
		}
		return Outcome{Action: ActionResult, Schema: d.Job.Schema, Payload: resultFor(d)}
	})
	docs := &failingDocs{calls: map[string]int{}}
	cfg := fastWorkers(WorkerConfig{Concurrency: 2, UntilIdle: true, MaxJobBytes: 1000, Documents: docs})
	if err := RunWorkers(t.Context(), c, cfg, h); err != nil {
		t.Fatalf("RunWorkers: %v", err)
	}
	want := `doc u.1#2 as chunk 2 of 2 of "doc u.1" (invoice)`
	if len(invalid) != 1 || invalid[0] != want {
		t.Errorf("invalid deliveries %q, want [%s]", invalid, want)
	}
	var doc []string
	for _, m := range readAll(t, c, broker.StreamResults, "") {
		if m.MsgID == "doc u.1" {
			doc = append(doc, string(m.Data))
		}
	}
	if len(doc) != 1 || !strings.Contains(doc[0], `"1:RESULTS,2:DLQ"`) {
		t.Errorf("document outcomes %q (merge calls %v), want one, with chunk 2 a dead letter", doc, docs.calls)
	}
}

// A chunk counts in its document as the run its message id names, also
// when its body could not be read (its ledger entry is then keyed on the
// message id, run 0): a replayed chunk that cannot be read ends its
// document's new run, not the old one.
func TestChunkRunOfAnUnreadableChunk(t *testing.T) {
	t.Parallel()
	chunk := &job.ChunkOf{Document: "doc u.1", K: 2, N: 2}
	invalid := fmt.Errorf("%w: over the limit", job.ErrInvalid)
	for _, c := range []struct {
		d    Delivery
		want int
	}{
		{Delivery{MsgID: "doc u.1#2~r3", Job: job.Job{ID: "doc u.1#2", Chunk: chunk}}, 3},
		{Delivery{MsgID: "doc u.1#2~r3", JobErr: invalid, Job: job.Job{Chunk: chunk}}, 3},
		{Delivery{MsgID: "doc u.1#2", JobErr: invalid, Job: job.Job{Chunk: chunk}}, 0},
		{Delivery{MsgID: "other~r3", JobErr: invalid, Job: job.Job{Chunk: chunk}}, 0},
	} {
		if got := chunkRunOf(&c.d); got != c.want {
			t.Errorf("chunkRunOf(%s, invalid %v) = %d, want %d", c.d.MsgID, c.d.JobErr != nil, got, c.want)
		}
	}
}
