package ledger

// Long documents: a document split into chunk jobs ends once, when its last
// chunk ended. Each document has one key in the KV bucket
// broker.BucketDocuments holding which run of each chunk ended and where
// its outcome is, the run the document is at and whether that run's outcome
// is stored. Every change is a compare-and-swap, so workers of any process
// agree on it; the changes of one process to one document are gathered into
// one write (a document's chunks end together when they run in parallel).
// The document's outcome itself is recorded in the job ledger like any
// job's: that record is what makes it end once.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/nats-io/nats.go/jetstream"
)

// maxCAS bounds the compare-and-swap retries of one change.
const maxCAS = 1000

// Document is the state of one long document.
type Document struct {
	ID string `json:"id"`
	N  int    `json:"n"`
	// Run is the document's run: 0, then one more for each replay of its
	// failed chunks.
	Run int `json:"run"`
	// Ended is true once the outcome of Run is stored and recorded.
	Ended  bool       `json:"ended,omitzero"`
	Chunks []ChunkRun `json:"chunks"`

	rev uint64
}

// ChunkRun is the latest run of one chunk: ended (Stream, Seq say where
// its outcome is) or pending.
type ChunkRun struct {
	Run    int    `json:"run,omitzero"`
	Stream string `json:"stream,omitempty"` // "" while pending
	Seq    uint64 `json:"seq,omitzero"`
}

// Complete reports whether every chunk's latest run ended.
func (d *Document) Complete() bool {
	for _, c := range d.Chunks {
		if c.Stream == "" {
			return false
		}
	}
	return len(d.Chunks) > 0
}

// Succeeded counts the chunks whose latest run ended as a result.
func (d *Document) Succeeded() int {
	n := 0
	for _, c := range d.Chunks {
		if c.Stream == broker.StreamResults {
			n++
		}
	}
	return n
}

// Documents reads and changes the documents' states.
type Documents struct {
	kv jetstream.KeyValue

	mu      sync.Mutex
	pending map[string]*docBatch
}

// docBatch gathers the changes of one document waiting for a write.
type docBatch struct {
	ends    []chunkEnd
	waiters []chan docResult
}

type chunkEnd struct {
	n, k, run int
	at        ChunkRun
}

type docResult struct {
	doc  Document
	last bool
	err  error
}

// NewDocuments opens the documents' bucket of conn.
func NewDocuments(ctx context.Context, conn *broker.Conn) (*Documents, error) {
	kv, err := conn.DocumentBucket(ctx)
	if err != nil {
		return nil, err
	}
	return &Documents{kv: kv, pending: map[string]*docBatch{}}, nil
}

// Get reads a document's state; found is false when none of its chunks
// ended yet.
func (ds *Documents) Get(ctx context.Context, id string) (Document, bool, error) {
	e, err := ds.kv.Get(ctx, Key(id))
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return Document{ID: id}, false, nil
	}
	if err != nil {
		return Document{}, false, fmt.Errorf("reading the state of document %s: %w", id, err)
	}
	var d Document
	if err := json.Unmarshal(e.Value(), &d); err != nil {
		return Document{}, false, fmt.Errorf("reading the state of document %s: %w", id, err)
	}
	d.rev = e.Revision()
	return d, true, nil
}

// ChunkEnded records that run of chunk k (of n) of document id ended, its
// outcome on stream at seq. It returns the document's state after the
// change, and last is true for the one caller that should conclude the
// document: every chunk ended and the document's run has no outcome yet.
// A run older than the chunk's latest changes nothing; recording a run
// again changes nothing either, and gives last again while the document
// did not end (a redelivered last chunk concludes a document whose
// concluder died).
func (ds *Documents) ChunkEnded(ctx context.Context, id string, n, k, run int, stream string, seq uint64) (Document, bool, error) {
	ch := make(chan docResult, 1)
	ds.mu.Lock()
	b, running := ds.pending[id]
	if !running {
		b = &docBatch{}
		ds.pending[id] = b
	}
	b.ends = append(b.ends, chunkEnd{n: n, k: k, run: run, at: ChunkRun{Run: run, Stream: stream, Seq: seq}})
	b.waiters = append(b.waiters, ch)
	ds.mu.Unlock()
	if !running {
		go ds.write(context.WithoutCancel(ctx), id, b)
	}
	select {
	case r := <-ch:
		return r.doc, r.last, r.err
	case <-ctx.Done():
		return Document{}, false, ctx.Err()
	}
}

// write applies the batches of one document until none is left: each
// batch gathers what arrived while the one before was being written.
func (ds *Documents) write(ctx context.Context, id string, b *docBatch) {
	for {
		ds.mu.Lock()
		ends, waiters := b.ends, b.waiters
		b.ends, b.waiters = nil, nil
		if len(ends) == 0 {
			delete(ds.pending, id)
			ds.mu.Unlock()
			return
		}
		ds.mu.Unlock()
		doc, err := ds.update(ctx, id, func(d *Document) {
			for _, e := range ends {
				d.record(e)
			}
		})
		for i, w := range waiters {
			// The last of the batch concludes, once.
			w <- docResult{doc: doc, last: err == nil && i == len(waiters)-1 && doc.Complete() && !doc.Ended, err: err}
		}
	}
}

// record applies one chunk's end to d.
func (d *Document) record(e chunkEnd) {
	if d.N == 0 {
		d.N = e.n
	}
	for len(d.Chunks) < d.N {
		d.Chunks = append(d.Chunks, ChunkRun{})
	}
	if e.k < 1 || e.k > len(d.Chunks) {
		return
	}
	c := &d.Chunks[e.k-1]
	if e.run < c.Run || (e.run == c.Run && c.Stream != "") {
		return // an older run, or this one again
	}
	// A complete document's current run is ending or ended, even before
	// its concluder marked it (it may have died after storing the
	// outcome): the first chunk of a newer run than any starts the
	// document's next run (the rest of that run's chunks join it).
	newer := d.Complete() && e.run > d.maxRun()
	*c = e.at
	if d.Ended || newer {
		// A chunk ran again after the document ended (submit --rerun of a
		// chunk): the document ends again, as its next run.
		d.Run++
		d.Ended = false
	}
}

// maxRun is the latest run of any of d's chunks.
func (d *Document) maxRun() int {
	m := 0
	for _, c := range d.Chunks {
		m = max(m, c.Run)
	}
	return m
}

// Concluded marks run of document id as ended (its outcome stored and
// recorded in the ledger). A document that moved on to a later run is left
// as it is.
func (ds *Documents) Concluded(ctx context.Context, id string, run int) error {
	_, err := ds.update(ctx, id, func(d *Document) {
		if d.Run == run {
			d.Ended = true
		}
	})
	return err
}

// Replay starts the next run of document id: the chunks in runs (chunk
// number → the run they are published as) become pending, and the document
// will end again when they did. It returns the document's new run.
func (ds *Documents) Replay(ctx context.Context, id string, runs map[int]int) (int, error) {
	doc, err := ds.update(ctx, id, func(d *Document) {
		// Complete and not yet marked ended: its concluder may have stored
		// the outcome and died before Concluded. The replay is a new run
		// either way; the old concluder's Concluded(old run) is a no-op.
		complete := d.Complete()
		changed := false
		for k, run := range runs {
			if k >= 1 && k <= len(d.Chunks) && run > d.Chunks[k-1].Run {
				d.Chunks[k-1] = ChunkRun{Run: run}
				changed = true
			}
		}
		if d.Ended || (complete && changed) {
			d.Run++
			d.Ended = false
		}
	})
	return doc.Run, err
}

// update applies change to the document's state with compare-and-swap,
// creating it when absent.
func (ds *Documents) update(ctx context.Context, id string, change func(*Document)) (Document, error) {
	for range maxCAS {
		d, found, err := ds.Get(ctx, id)
		if err != nil {
			return Document{}, err
		}
		d.ID = id
		change(&d)
		value, err := json.Marshal(&d)
		if err != nil {
			return Document{}, fmt.Errorf("encoding the state of document %s: %w", id, err)
		}
		if found {
			_, err = ds.kv.Update(ctx, Key(id), value, d.rev)
		} else {
			_, err = ds.kv.Create(ctx, Key(id), value)
		}
		if err == nil {
			return d, nil
		}
		if !errors.Is(err, jetstream.ErrKeyExists) && !isWrongSequence(err) {
			return Document{}, fmt.Errorf("writing the state of document %s: %w", id, err)
		}
	}
	return Document{}, fmt.Errorf("writing the state of document %s: %d concurrent changes in a row", id, maxCAS)
}

// isWrongSequence reports a compare-and-swap that lost to another writer.
func isWrongSequence(err error) bool {
	var apiErr *jetstream.APIError
	return errors.As(err, &apiErr) && apiErr.ErrorCode == jetstream.JSErrCodeStreamWrongLastSequence
}
