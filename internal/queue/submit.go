package queue

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/ledger"
	"github.com/llmpipeline/pipeline/internal/payload"
	"github.com/llmpipeline/pipeline/job"
	"github.com/nats-io/nats.go/jetstream"
)

// Submit publishes jobs on pipeline.jobs.<schema> with Nats-Msg-Id = msgID(job)
// (the job id; replays pass their own), waiting for every ack. Items that
// carry a JobID are checked against the job ledger first (see SubmitItem).
// A job over the connection's InlineLimit is put in the object store and
// published as a message that names it, so no size makes a publish fail.
// progress, if not nil, is called with the count done so far (from one
// goroutine, in order). Publishes are asynchronous and bounded (a stalled
// publisher waits for its outstanding acks); a publish whose ack fails is
// retried.
func Submit(ctx context.Context, c *broker.Conn, jobs []SubmitItem, progress func(done int)) (SubmitStats, error) {
	for i, it := range jobs {
		if !job.ValidSchemaID(it.Schema) {
			return SubmitStats{}, fmt.Errorf("submitting job %d: schema %q: %s", i, it.Schema, job.SchemaIDRule)
		}
		if it.MsgID == "" {
			return SubmitStats{}, fmt.Errorf("submitting job %d: empty message id", i)
		}
	}
	var stats SubmitStats
	jobs, err := filterEnded(ctx, ledger.New(c), jobs, &stats)
	if err != nil {
		return stats, fmt.Errorf("submitting jobs: %w", err)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	type pending struct {
		fut    jetstream.PubAckFuture
		object string // the body's object, "" when inline
		chunk  bool
	}
	futs := make(chan pending, broker.PublishAsyncMaxPending)
	acked := make(chan error, 1)
	go func() {
		n := 0
		for p := range futs {
			ack, err := c.AwaitPubAck(ctx, p.fut)
			if err != nil {
				cancel(err)
				// Keep draining so the publisher never blocks on futs.
				for range futs {
				}
				acked <- err
				return
			}
			if ack.Duplicate {
				stats.Duplicates++
				// The job under this id is stored already: the object put
				// for this copy is garbage unless the stored one names it.
				c.Payloads().DropIfUnreferenced(ctx, broker.StreamJobs, ack.Sequence, p.object)
			} else {
				stats.Published++
				if p.chunk {
					stats.Chunks++
				}
			}
			n++
			if progress != nil {
				progress(n)
			}
		}
		acked <- nil
	}()

	var pubErr error
	for _, it := range jobs {
		if err := ctx.Err(); err != nil {
			pubErr = err
			break
		}
		msg := broker.NewMsg(broker.SchemaSubject(broker.SubjectJobs, it.Schema), it.MsgID, it.Data)
		if len(it.Files) > 0 {
			msg.Header.Set(payload.HeaderFiles, strings.Join(it.Files, ","))
		}
		if it.Chunk != nil {
			setChunkHeader(msg.Header, it.Chunk)
		}
		object, err := c.Payloads().Offload(ctx, msg, payload.KindJobs)
		if err != nil {
			pubErr = fmt.Errorf("publishing job %s: %w", it.MsgID, err)
			break
		}
		fut, err := c.PublishAsync(ctx, msg)
		if err != nil {
			pubErr = fmt.Errorf("publishing job %s: %w", it.MsgID, err)
			break
		}
		futs <- pending{fut: fut, object: object, chunk: it.Chunk != nil}
	}
	close(futs)
	ackErr := <-acked
	switch {
	case ackErr != nil:
		return stats, fmt.Errorf("submitting jobs: %w", ackErr)
	case pubErr != nil:
		if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
			return stats, fmt.Errorf("submitting jobs: %w", cause)
		}
		return stats, fmt.Errorf("submitting jobs: %w", pubErr)
	}
	return stats, nil
}
