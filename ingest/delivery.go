package ingest

import (
	"errors"
	"fmt"

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
// object), ParseJob, and the message id. Then it asks the job ledger
// whether the delivery's run already ended, taking the answer of early
// (the read started when the job was fetched) when it asked about the
// same run. When ok is false the handler
// is not called and out says what to do instead: ack an ended run, or hand
// the job back when the body or the ledger could not be read.
func (r *runner) prepare(d *Delivery, h nats.Header, data []byte, seq uint64, early *ledgerQuery) (out Outcome, ok bool) {
	ctx := r.handlerCtx
	d.Size = PayloadSize(h, data)
	if h != nil {
		d.payload = h.Get(HeaderPayload)
	}
	switch {
	case d.Size > r.cfg.MaxJobBytes:
		d.Data = data[:min(len(data), oversizeKept)]
		d.JobErr = fmt.Errorf("%w: job is %d bytes, over the limit of %d bytes (--max-job-bytes)", ErrInvalidJob, d.Size, r.cfg.MaxJobBytes)
	case d.payload != "":
		body, err := r.c.Payload(ctx, h, data)
		switch {
		case errors.Is(err, ErrPayloadMissing):
			d.JobErr = fmt.Errorf("%w: its body %s is missing from object store %s", ErrInvalidJob, d.payload, BucketPayloads)
		case errors.Is(err, ErrPayloadCorrupt):
			// Tampered with or damaged: no delivery reads it better.
			d.JobErr = fmt.Errorf("%w: its body cannot be trusted: %w", ErrInvalidJob, err)
		case err != nil:
			r.log.Warn("reading a job's body from the object store failed; job handed back", "msg_id", d.MsgID, "object", d.payload, "err", err)
			return Outcome{Action: ActionRetry}, false
		default:
			d.Data = body
			d.Job, d.JobErr = ParseJob(body)
		}
	default:
		d.Data = data
		d.Job, d.JobErr = ParseJob(data)
	}
	if d.MsgID == "" {
		d.MsgID = fallbackMsgID(d, seq)
	}
	key := runKey{ledgerKeyOf(d), ledgerRunOf(d)}
	if early == nil || early.key != key {
		early = r.c.ledgerReads.start(key.jobID, key.run)
	}
	ended, err := early.wait(ctx)
	if err != nil {
		r.log.Warn("reading the job ledger failed; job handed back", "msg_id", d.MsgID, "err", err)
		return Outcome{Action: ActionRetry}, false
	}
	if ended {
		return Outcome{Action: actionDone}, false
	}
	return Outcome{}, true
}
