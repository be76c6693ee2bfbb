package actions

import (
	"context"
	"fmt"

	"github.com/llmpipeline/pipeline/index"
	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/ledger"
	"github.com/llmpipeline/pipeline/internal/queue"
	"github.com/llmpipeline/pipeline/job"
)

// replayDocument replays a long document's dead letter: its failed chunks
// (class partial), or every chunk (class merge: the merge failed the
// schema, and runs again on their new answers). The document's state
// learns first that those chunks run again, so that it ends once more,
// as its next run, when they did; then the chunks are published as their
// next run and the dead letters marked replayed.
func replayDocument(ctx context.Context, conn *broker.Conn, st *index.Store, doc job.Outcome) error {
	var chunks []job.Outcome
	for _, c := range doc.ChunkRuns {
		if doc.Class == job.ClassPartial && c.Status == job.StatusSucceeded {
			continue
		}
		o, err := st.Get(ctx, c.JobID)
		if err != nil {
			return fmt.Errorf("reading chunk %s: %w", c.JobID, err)
		}
		chunks = append(chunks, o)
	}
	if len(chunks) == 0 {
		return fmt.Errorf("document %s has no chunk to run again", doc.JobID)
	}
	if err := replayChunks(ctx, conn, st, chunks); err != nil {
		return err
	}
	if err := st.MarkReplayed(ctx, doc.JobID, doc.Run); err != nil {
		return fmt.Errorf("published, but marking the document's dead letter replayed failed: %w", err)
	}
	return nil
}

// replayChunks runs chunks of one document again, each as its next run.
func replayChunks(ctx context.Context, conn *broker.Conn, st *index.Store, chunks []job.Outcome) error {
	docs, err := ledger.NewDocuments(ctx, conn)
	if err != nil {
		return err
	}
	runs := map[int]int{}
	items := make([]queue.SubmitItem, 0, len(chunks))
	var id string
	for _, o := range chunks {
		j, err := job.Parse(o.Job)
		if err != nil || j.Chunk == nil {
			return fmt.Errorf("chunk %s cannot be replayed as stored: %v", o.JobID, err)
		}
		id = j.Chunk.Document
		runs[j.Chunk.K] = o.Run + 1
		items = append(items, queue.SubmitItem{Data: o.Job, Schema: j.Schema, MsgID: ledger.RunMsgID(j.ID, o.Run+1), Chunk: j.Chunk})
	}
	if _, err := docs.Replay(ctx, id, runs); err != nil {
		return fmt.Errorf("reopening document %s: %w", id, err)
	}
	if _, err := queue.Submit(ctx, conn, items, nil); err != nil {
		return fmt.Errorf("publishing the chunks of document %s: %w", id, err)
	}
	for _, o := range chunks {
		if o.Status != job.StatusDeadLettered {
			continue
		}
		if err := st.MarkReplayed(ctx, o.JobID, o.Run); err != nil {
			return fmt.Errorf("published, but marking chunk %s replayed failed: %w", o.JobID, err)
		}
	}
	return nil
}
