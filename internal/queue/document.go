package queue

// Long documents: a chunk job is settled like any job, and before it is
// acked the runtime records its end in the document's state
// (ledger.Documents). The caller whose record completes the document merges
// it (WorkerConfig.Documents) and stores the document's outcome exactly as a
// job's is stored: on RESULTS or DLQ under the document's message id, then
// in the job ledger under the document's id, whose record is written once.
// A crash anywhere in between leaves the chunk unacked: its redelivery finds
// its run ended, records it again (no change), sees the document complete
// and not ended, and concludes it.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/llmpipeline/pipeline/internal/ledger"
	"github.com/llmpipeline/pipeline/internal/payload"
	"github.com/llmpipeline/pipeline/job"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// HeaderChunk is set on a chunk job's message: its document and its
// place, as JSON ({"document","k","n"}). A chunk whose
// body cannot be read (its object gone or tampered with, over
// --max-job-bytes) is dead-lettered as invalid_job like any job, and
// this header still records its end in its document, which then ends
// (partial) instead of waiting for ever.
const HeaderChunk = "Pipeline-Chunk"

type chunkHeader struct {
	Document string `json:"document"`
	K        int    `json:"k"`
	N        int    `json:"n"`
}

func setChunkHeader(h nats.Header, c *job.ChunkOf) {
	v, err := json.Marshal(chunkHeader{Document: c.Document, K: c.K, N: c.N})
	if err != nil {
		return // strings and integers always encode
	}
	h.Set(HeaderChunk, string(v))
}

// chunkFromHeader reads HeaderChunk: false when there is none or it does
// not name a place in a document.
func chunkFromHeader(h nats.Header) (*job.ChunkOf, bool) {
	v := h.Get(HeaderChunk)
	if v == "" {
		return nil, false
	}
	var c chunkHeader
	if err := json.Unmarshal([]byte(v), &c); err != nil || c.Document == "" || c.K < 1 || c.K > c.N {
		return nil, false
	}
	return &job.ChunkOf{Document: c.Document, K: c.K, N: c.N}, true
}

// chunkRunOf is the run of a chunk delivery as its document counts it:
// the run its message id names. For a chunk whose body could not be read
// that is not its ledger run (an invalid job is keyed on its message id,
// run 0), so it is read against the chunk's job id, "<document>#<k>": a
// replayed chunk that cannot be read still ends its document's new run.
func chunkRunOf(d *Delivery) int {
	if d.JobErr != nil && d.Job.Chunk != nil {
		return ledger.RunOf(d.MsgID, job.ChunkID(d.Job.Chunk.Document, d.Job.Chunk.K))
	}
	return ledgerRunOf(d)
}

// Documents merges a long document whose every chunk ended.
type Documents interface {
	// Merge returns the document's outcome: ActionResult or
	// ActionDeadLetter with its Schema and Payload (and Record, as a
	// handler's). Any other action hands the last chunk back, to try again.
	Merge(ctx context.Context, doc DocumentEnd) Outcome
}

// DocumentEnd is a document whose every chunk's latest run ended.
type DocumentEnd struct {
	ID  string
	Run int
	// MsgID is the document's outcome's message id (ledger.RunMsgID).
	MsgID string
	// Schema is the schema id of the chunk whose end completed the
	// document (for a document none of whose chunk outcomes can be read).
	Schema string
	Chunks []ChunkEnd // in chunk order
}

// ChunkEnd is one chunk's outcome as stored.
type ChunkEnd struct {
	K       int
	Run     int
	Stream  string // broker.StreamResults or broker.StreamDLQ
	Payload []byte // the outcome's message body
	// Gone says why the chunk's outcome could not be read (removed by
	// retention or a purge before the document ended); Payload is nil.
	// The document counts it as a failed chunk.
	Gone string
}

// docEnder ends the documents of the chunks a runner settles: the
// documents' state and the merger, beside the runner that stores outcomes.
type docEnder struct {
	r      *runner
	states *ledger.Documents
	merger Documents
}

// chunkEnded records the end of a chunk delivery's run (its outcome on
// stream at seq) and concludes its document when it was the last. It does
// nothing for a job that is not a chunk, or when no Documents is set (a nil
// docEnder).
func (e *docEnder) chunkEnded(d *Delivery, stream string, seq uint64) error {
	if e == nil || d.Job.Chunk == nil {
		return nil
	}
	r := e.r
	c := d.Job.Chunk
	ctx, cancel := context.WithTimeout(r.pubCtx, time.Minute)
	defer cancel()
	doc, last, err := e.states.ChunkEnded(ctx, c.Document, c.N, c.K, chunkRunOf(d), stream, seq)
	if err != nil {
		return fmt.Errorf("recording chunk %d of document %s: %w", c.K, c.Document, err)
	}
	if !last {
		return nil
	}
	return e.conclude(ctx, doc, d.Job.Schema)
}

// chunkEndedFromLedger is chunkEnded for a delivery whose run the ledger
// says ended: where its outcome is comes from the ledger.
func (e *docEnder) chunkEndedFromLedger(d *Delivery) error {
	if e == nil || d.Job.Chunk == nil {
		return nil
	}
	run, ok, err := e.r.ledger.RunEnded(e.r.pubCtx, ledgerKeyOf(d), ledgerRunOf(d))
	if err != nil || !ok {
		return fmt.Errorf("reading where chunk %s's outcome is: %w (found %v)", d.MsgID, err, ok)
	}
	return e.chunkEnded(d, run.Stream, run.Seq)
}

// conclude stores the outcome of doc's run, unless the ledger has it
// already, and marks the document ended.
func (e *docEnder) conclude(ctx context.Context, doc ledger.Document, schema string) error {
	r := e.r
	if _, ended, err := r.ledger.RunEnded(ctx, doc.ID, doc.Run); err != nil {
		return err
	} else if ended {
		return e.states.Concluded(ctx, doc.ID, doc.Run)
	}
	end := DocumentEnd{ID: doc.ID, Run: doc.Run, MsgID: ledger.RunMsgID(doc.ID, doc.Run), Schema: schema, Chunks: make([]ChunkEnd, 0, len(doc.Chunks))}
	for i, c := range doc.Chunks {
		body, err := e.storedBody(ctx, c.Stream, c.Seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) || errors.Is(err, payload.ErrMissing) {
			// Retention or a purge removed it before the document ended:
			// retrying never brings it back. A failed chunk, so the
			// document ends as partial and a replay runs the chunk again.
			end.Chunks = append(end.Chunks, ChunkEnd{K: i + 1, Run: c.Run, Stream: c.Stream,
				Gone: fmt.Sprintf("its outcome (%s seq %d) was removed by retention or a purge before the document ended", c.Stream, c.Seq)})
			continue
		}
		if err != nil {
			return fmt.Errorf("reading the outcome of chunk %d of document %s: %w", i+1, doc.ID, err)
		}
		end.Chunks = append(end.Chunks, ChunkEnd{K: i + 1, Run: c.Run, Stream: c.Stream, Payload: body})
	}
	out := e.merger.Merge(ctx, end)
	if out.Action != ActionResult && out.Action != ActionDeadLetter {
		return fmt.Errorf("merging document %s: %s", doc.ID, reasonOr(out.Reason, "no outcome"))
	}
	dd := &Delivery{MsgID: end.MsgID, Job: job.Job{ID: doc.ID, Schema: out.Schema}, SchemaToken: out.Schema}
	st, err := r.store(dd, out)
	if err != nil {
		return fmt.Errorf("storing the outcome of document %s: %w", doc.ID, err)
	}
	if _, err := r.conclude(dd, out, st); err != nil {
		return fmt.Errorf("recording the outcome of document %s in the job ledger: %w", doc.ID, err)
	}
	return e.states.Concluded(ctx, doc.ID, doc.Run)
}

// storedBody reads the body of the outcome at seq on stream (from the
// object store when it was offloaded).
func (e *docEnder) storedBody(ctx context.Context, stream string, seq uint64) ([]byte, error) {
	r := e.r
	s, err := r.c.JetStream().Stream(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("looking up stream %s: %w", stream, err)
	}
	m, err := s.GetMsg(ctx, seq)
	if err != nil {
		return nil, fmt.Errorf("reading %s seq %d: %w", stream, seq, err)
	}
	return r.c.Payloads().Get(ctx, m.Header, m.Data)
}
