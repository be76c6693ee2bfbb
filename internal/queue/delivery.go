package queue

import (
	"cmp"
	"errors"
	"fmt"

	"github.com/llmpipeline/pipeline/internal/ledger"
	"github.com/llmpipeline/pipeline/internal/payload"
	"github.com/llmpipeline/pipeline/job"
	"github.com/nats-io/nats.go"
)

// DefaultMaxJobBytes is WorkerConfig.MaxJobBytes's default (64 MiB).
const DefaultMaxJobBytes = 64 << 20

// oversizeKept is how much of an inline job over MaxJobBytes the delivery
// keeps (for the dead letter): enough to recognise it, not the whole.
const oversizeKept = 1 << 10

// prepare reads a job message into d before the handler sees it: its size
// (a job over MaxJobBytes is not read: JobErr names the size and the
// limit), its body (from the object store when the message names an
// object), job.Parse, and the message id. Then it asks the job ledger
// whether the delivery's run already ended, taking the answer of early
// (the read started when the job was fetched) when it asked about the
// same run. When ok is false the handler
// is not called and out says what to do instead: ack an ended run, or hand
// the job back when the body or the ledger could not be read.
func (r *runner) prepare(d *Delivery, h nats.Header, data []byte, seq uint64, early *ledger.Query) (out Outcome, ok bool) {
	ctx := r.handlerCtx
	d.Size = payload.Size(h, data)
	if h != nil {
		d.payload = h.Get(payload.Header)
	}
	switch {
	case d.Size > r.cfg.MaxJobBytes:
		d.Data = data[:min(len(data), oversizeKept)]
		d.JobErr = fmt.Errorf("%w: job is %d bytes, over the limit of %d bytes (--max-job-bytes)", job.ErrInvalid, d.Size, r.cfg.MaxJobBytes)
	case d.payload != "":
		body, err := r.c.Payloads().Get(ctx, h, data)
		switch {
		case errors.Is(err, payload.ErrMissing):
			d.JobErr = fmt.Errorf("%w: its body %s is missing from object store %s", job.ErrInvalid, d.payload, payload.Bucket)
		case errors.Is(err, payload.ErrCorrupt):
			// Tampered with or damaged: no delivery reads it better.
			d.JobErr = fmt.Errorf("%w: its body cannot be trusted: %w", job.ErrInvalid, err)
		case err != nil:
			r.log.Warn("reading a job's body from the object store failed; job handed back", "msg_id", d.MsgID, "object", d.payload, "err", err)
			return Outcome{Action: ActionRetry}, false
		default:
			d.Data = body
			d.Job, d.JobErr = job.Parse(body)
		}
	default:
		d.Data = data
		d.Job, d.JobErr = job.Parse(data)
	}
	if d.JobErr != nil && d.Job.Chunk == nil {
		// Unreadable, but its message says which document's chunk it
		// is (and its subject, the schema): its dead letter still ends
		// its place in the document.
		if c, ok := chunkFromHeader(h); ok {
			d.Job.Chunk = c
			d.Job.Schema = cmp.Or(d.Job.Schema, d.SchemaToken)
		}
	}
	if d.MsgID == "" {
		d.MsgID = fallbackMsgID(d, seq)
	}
	key := ledger.JobRun{JobID: ledgerKeyOf(d), Run: ledgerRunOf(d)}
	if early == nil || early.Key() != key {
		early = r.ledger.Ask(key.JobID, key.Run)
	}
	ended, err := early.Wait(ctx)
	if err != nil {
		r.log.Warn("reading the job ledger failed; job handed back", "msg_id", d.MsgID, "err", err)
		return Outcome{Action: ActionRetry}, false
	}
	if ended {
		return Outcome{Action: actionDone}, false
	}
	return Outcome{}, true
}
