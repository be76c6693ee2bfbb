package app

import (
	"fmt"

	jsonv2 "github.com/go-json-experiment/json"

	"github.com/tidwall/gjson"

	"github.com/llmpipeline/pipeline/chunk"
	"github.com/llmpipeline/pipeline/internal/ledger"
	"github.com/llmpipeline/pipeline/internal/queue"
	"github.com/llmpipeline/pipeline/job"
)

// chunkingOf is the splitting that applies to j: its own "chunking", else
// submit's --chunk-chars and --chunk-overlap.
func (jc *JobCheck) chunkingOf(j job.Job) job.Chunking {
	if j.Chunking != nil {
		return *j.Chunking
	}
	return jc.Chunking
}

// MaxChunks bounds the chunks of one document: its state in the documents'
// bucket (about 40 bytes a chunk) stays far under the broker's 1 MiB
// message, even when cuts at paragraphs make twice as many chunks as the
// characters alone would.
const MaxChunks = 5000

// checkChunking says why j cannot be split as it asks ("" when it can).
func (jc *JobCheck) checkChunking(j job.Job) string {
	if j.Chunk != nil {
		return `field "chunk" is submit's own (it marks the chunks of a long document); remove it and let --chunk-chars split the document`
	}
	c := jc.chunkingOf(j)
	if err := chunk.Check(c.Chars, c.Overlap); err != nil {
		return err.Error()
	}
	if n := chunk.Count(j.Input); c.Chars > 0 && len(j.Files) == 0 && n > c.Chars && (n-c.Overlap)/(c.Chars-c.Overlap) >= MaxChunks {
		return fmt.Sprintf("job %q would be split into more than %d chunks (%d characters at --chunk-chars %d): its document's state must fit one message of the broker; raise --chunk-chars",
			j.ID, MaxChunks, n, c.Chars)
	}
	if jc.Rerun != RerunNone && c.Chars > 0 && len(j.Files) == 0 && chunk.Count(j.Input) > c.Chars {
		// A document's chunks are republished one by one, each as the run
		// after its own last, while the document's state still holds the
		// others' earlier outcomes: it would end once per chunk, mixing
		// runs, and miss chunks a new split adds.
		return fmt.Sprintf("job %q is a long document (%d characters, over --chunk-chars %d): --rerun and --rerun-changed do not run a document split into chunks again; a partial or merge dead letter runs again with `pipeline dlq replay %s`, or submit it under a new id",
			j.ID, chunk.Count(j.Input), c.Chars, j.ID)
	}
	if c.Chars > 0 && len(j.ID) > job.MaxChunkedIDBytes && chunk.Count(j.Input) > c.Chars {
		return fmt.Sprintf("job id is %d bytes: a document split into chunks (id#k) may have at most %d", len(j.ID), job.MaxChunkedIDBytes)
	}
	return ""
}

// PartLine is the line a chunk job's instructions begin with.
func PartLine(c job.ChunkOf) string {
	return fmt.Sprintf("This text is part %d of %d of a longer document (its characters %d to %d of %d). Extract what this part says; the other parts are read separately and the answers merged.",
		c.K, c.N, c.Start+1, c.End, c.Chars)
}

// chunkItems are the chunk jobs of j when it is longer than its chunk
// size (nil when it is one ordinary job). A job with files is never split
// (ChunkJobs): every chunk would carry the files whole, and the model
// reads the text beside them.
func (jc *JobCheck) chunkItems(j job.Job, rerun RerunMode) ([]queue.SubmitItem, error) {
	return ChunkJobs(j, jc.chunkingOf(j), rerun)
}

// ChunkJobs are the chunk jobs of j split by c (nil when j is not longer
// than c.Chars characters, or has files: one ordinary job), ready to
// submit.
func ChunkJobs(j job.Job, c job.Chunking, rerun RerunMode) ([]queue.SubmitItem, error) {
	if len(j.Files) > 0 {
		return nil, nil
	}
	ranges := chunk.Split(j.Input, c.Chars, c.Overlap)
	if ranges == nil {
		return nil, nil
	}
	total := chunk.Count(j.Input)
	items := make([]queue.SubmitItem, 0, len(ranges))
	texts := chunk.Texts(j.Input, ranges)
	for k, r := range ranges {
		cj := job.Job{ID: job.ChunkID(j.ID, k+1), Schema: j.Schema, Metadata: j.Metadata}
		ref := job.ChunkOf{Document: j.ID, K: k + 1, N: len(ranges), Start: r.Start, End: r.End, Chars: total, Instructions: j.Instructions}
		cj.Input = texts[k]
		cj.Instructions = PartLine(ref)
		if j.Instructions != "" {
			cj.Instructions += "\n\n" + j.Instructions
		}
		cj.Chunk = &ref
		data, err := jsonv2.Marshal(cj)
		if err != nil {
			return nil, fmt.Errorf("encoding chunk %d of %q: %w", k+1, j.ID, err)
		}
		items = append(items, queue.SubmitItem{Data: data, Schema: j.Schema, MsgID: cj.ID, JobID: cj.ID, Input: ledger.InputDigest(cj),
			Rerun: rerun == RerunAll, RerunChanged: rerun == RerunChanged, Chunk: cj.Chunk})
	}
	return items, nil
}

// IsChunkOutcome reports whether an outcome message (as stored on RESULTS
// or DLQ) is a chunk job's: results leaves those out unless --chunks.
func IsChunkOutcome(msg []byte) bool {
	return gjson.GetBytes(msg, "chunk").IsObject()
}
