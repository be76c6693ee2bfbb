package queue

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/ledger"
	"github.com/llmpipeline/pipeline/internal/payload"
	"github.com/llmpipeline/pipeline/internal/sink"
	"github.com/llmpipeline/pipeline/job"
	"github.com/nats-io/nats.go/jetstream"
)

// settle acts on the handler's outcome for a delivered job.
func (r *runner) settle(j *inflight, d *Delivery, out Outcome) {
	switch out.Action {
	case ActionResult, ActionDeadLetter:
		if d.NumDelivered > 1 {
			// An earlier delivery may have stored an outcome and lost its
			// ack; a model need not answer the same way twice, so the
			// other stream is checked (the same one deduplicates).
			other, seq, err := r.otherOutcome(d, out)
			if err != nil {
				r.log.Warn("checking for an earlier outcome failed; job handed back", "msg_id", d.MsgID, "err", err)
				r.nakOnce(j, r.retryDelay(d, 0))
				return
			}
			if other != "" {
				// That outcome may have missed the ledger (its worker died
				// before writing it): record it, so the run stays ended.
				have, err := r.ledger.Record(r.pubCtx, ledgerKeyOf(d), r.ledgerRun(d, other, seq))
				if err != nil {
					r.log.Warn("recording an earlier delivery's outcome in the ledger failed; job handed back", "msg_id", d.MsgID, "err", err)
					r.nakOnce(j, r.retryDelay(d, 0))
					return
				}
				r.log.Warn("redelivered job already has an outcome from an earlier delivery; kept that one", "msg_id", d.MsgID, "delivery", d.NumDelivered, "stored_on", other)
				r.repeated(d, out, other, seq)
				// The document gets the outcome the ledger kept (another
				// writer of this run may have come first), as every other
				// path that ends a chunk does.
				if !r.documentOK(j, d, have.Stream, have.Seq) {
					return
				}
				r.ackDone(j, d, "")
				return
			}
		}
		st, err := r.store(d, out)
		if err != nil {
			if r.cfg.StoreFailed != nil {
				r.cfg.StoreFailed(err)
			}
			r.log.Warn("storing outcome failed; job handed back", "msg_id", d.MsgID, "err", err)
			r.nakOnce(j, r.retryDelay(d, 0))
			return
		}
		ours, err := r.conclude(d, out, st)
		if err != nil {
			r.log.Warn("recording the stored outcome in the job ledger failed; job handed back (its redelivery finds the outcome stored)", "msg_id", d.MsgID, "err", err)
			r.nakOnce(j, r.retryDelay(d, 0))
			return
		}
		if d.Job.Chunk != nil {
			var err error
			if ours {
				err = r.docs.chunkEnded(d, st.ack.Stream, st.ack.Sequence)
			} else {
				err = r.docs.chunkEndedFromLedger(d)
			}
			if err != nil {
				r.log.Warn("ending a chunk's document failed; chunk handed back (its redelivery ends the document)", "msg_id", d.MsgID, "err", err)
				r.nakOnce(j, r.retryDelay(d, 0))
				return
			}
		}
		if !ours {
			r.ackDone(j, d, "")
			return
		}
		// The outcome is stored: settle even if the shutdown grace already
		// naked the job (an ack after a nak still removes it).
		j.settled.Store(true)
		if out.Action == ActionResult {
			err = j.msg.Ack()
		} else {
			err = j.msg.TermWithReason(reasonOr(out.Reason, "dead-lettered"))
		}
		if err != nil {
			r.log.Warn("acknowledging job (its outcome is stored; a redelivery finds it in the ledger)", "msg_id", d.MsgID, "err", err)
		}
		r.c.Payloads().Drop(r.pubCtx, d.payload)
	case actionDone:
		if err := r.docs.chunkEndedFromLedger(d); err != nil {
			r.log.Warn("ending a chunk's document failed; chunk handed back (its redelivery ends the document)", "msg_id", d.MsgID, "err", err)
			r.nakOnce(j, r.retryDelay(d, 0))
			return
		}
		r.ackDone(j, d, "job's run already ended (job ledger); acked without calling the model")
	case ActionHandOff:
		r.ackDone(j, d, "")
	case ActionRetry:
		r.nakOnce(j, r.retryDelay(d, out.Delay))
	case ActionStop:
		r.nakOnce(j, r.retryDelay(d, out.Delay))
		if r.stop(out.Err) {
			r.log.Error("handler stopped the worker", "msg_id", d.MsgID, "err", out.Err)
		} else {
			r.log.Debug("job handed back; the worker is already stopping", "msg_id", d.MsgID, "err", out.Err)
		}
	default:
		r.log.Error("handler returned an unknown action; retrying the job", "msg_id", d.MsgID, "action", int(out.Action))
		r.nakOnce(j, r.retryDelay(d, out.Delay))
	}
}

// ackDone acks a job whose run already has its outcome, stores nothing,
// and deletes the job's body object; why, if set, is logged at debug and
// the delivery counted in WorkerConfig.AlreadyDone.
func (r *runner) ackDone(j *inflight, d *Delivery, why string) {
	j.settled.Store(true)
	if err := j.msg.Ack(); err != nil {
		r.log.Warn("acknowledging a job whose run already ended", "msg_id", d.MsgID, "err", err)
	}
	if why != "" {
		r.log.Debug(why, "msg_id", d.MsgID, "delivery", d.NumDelivered)
		if r.cfg.AlreadyDone != nil {
			r.cfg.AlreadyDone(d.MsgID)
		}
	}
	r.c.Payloads().Drop(r.pubCtx, d.payload)
}

// stored is an outcome the stream acknowledged.
type stored struct {
	subject string
	ack     *jetstream.PubAck
	object  string // the body's object when over the inline limit
}

// store publishes a delivery's result or dead letter (publishOutcome).
func (r *runner) store(d *Delivery, out Outcome) (stored, error) {
	return publishOutcome(r.pubCtx, r.c, d.MsgID, d.SchemaToken, out)
}

// publishOutcome publishes a result or dead letter with Nats-Msg-Id =
// msgID and waits for the stream's ack. A payload over the inline limit
// goes to the object store first, and the message names it. schemaToken
// is the job subject's schema, for an outcome that names no valid one.
func publishOutcome(ctx context.Context, c *broker.Conn, msgID, schemaToken string, out Outcome) (stored, error) {
	prefix, kind := broker.SubjectResults, payload.KindResults
	if out.Action == ActionDeadLetter {
		prefix, kind = broker.SubjectDLQ, payload.KindDLQ
	}
	schema := out.Schema
	if !job.ValidSchemaID(schema) {
		schema = schemaToken
	}
	msg := broker.NewMsg(broker.SchemaSubject(prefix, schema), msgID, out.Payload)
	if len(out.Files) > 0 {
		msg.Header.Set(payload.HeaderFiles, strings.Join(out.Files, ","))
	}
	object, err := c.Payloads().Offload(ctx, msg, kind)
	if err != nil {
		return stored{}, fmt.Errorf("storing the outcome of %s: %w", msgID, err)
	}
	fut, err := c.PublishAsync(ctx, msg)
	if err != nil {
		return stored{}, fmt.Errorf("publishing to %s: %w", msg.Subject, err)
	}
	ack, err := c.AwaitPubAck(ctx, fut)
	if err != nil {
		return stored{}, err
	}
	if ack.Duplicate {
		// The stream holds an outcome under this id already (the first
		// one stays, and may differ): ours, and its object, are not kept.
		c.Payloads().DropIfUnreferenced(ctx, ack.Stream, ack.Sequence, object)
	}
	return stored{subject: msg.Subject, ack: ack, object: object}, nil
}

// recordOutcome records a stored outcome in the job ledger under key and
// reports whether it is the run's outcome. When the ledger holds another
// one for the run already (two copies of a job handled at once), ours is
// deleted from its stream, and have is the one kept.
func recordOutcome(ctx context.Context, c *broker.Conn, led *ledger.Ledger, key string, ours ledger.Run, st stored) (bool, ledger.Run, error) {
	have, err := led.Record(ctx, key, ours)
	if err != nil {
		return false, have, err
	}
	if have.Stream != ours.Stream || have.Seq != ours.Seq {
		if !st.ack.Duplicate {
			removeOutcome(ctx, c, ours.Stream, ours.Seq, st.object)
		}
		return false, have, nil
	}
	return true, have, nil
}

// OutcomeHooks are told of every outcome stored (WorkerConfig.Stored and
// Repeated).
type OutcomeHooks struct {
	Stored, Repeated func(sink.Msg)
}

// told hands a stored outcome to the hooks: Stored when it is the run's
// outcome and new to its stream (the sink reads one the stream had under
// this id already), Repeated when it was not kept.
func (h OutcomeHooks) told(ours bool, msgID string, out Outcome, st stored) {
	m := sink.Msg{Data: out.Payload, MsgID: msgID, Stream: st.ack.Stream, Sequence: st.ack.Sequence, Time: time.Now(), Record: out.Record}
	switch {
	case ours && !st.ack.Duplicate:
		if h.Stored != nil {
			m.Subject = st.subject
			h.Stored(m)
		}
	case h.Repeated != nil:
		h.Repeated(m)
	}
}

// conclude records a stored outcome in the job ledger (recordOutcome) and
// tells the hooks; it reports whether it is the run's outcome.
func (r *runner) conclude(d *Delivery, out Outcome, st stored) (bool, error) {
	ours, have, err := recordOutcome(r.pubCtx, r.c, r.ledger, ledgerKeyOf(d), r.ledgerRun(d, st.ack.Stream, st.ack.Sequence), st)
	if err != nil {
		return false, err
	}
	if !ours {
		r.log.Warn("another worker stored this run's outcome first; removed ours", "msg_id", d.MsgID,
			"kept_stream", have.Stream, "kept_seq", have.Seq, "removed_stream", st.ack.Stream, "removed_seq", st.ack.Sequence)
	}
	r.hooks.told(ours, d.MsgID, out, st)
	return ours, nil
}

// repeated hands an outcome that was not kept to WorkerConfig.Repeated.
func (r *runner) repeated(d *Delivery, out Outcome, stream string, seq uint64) {
	r.hooks.told(false, d.MsgID, out, stored{ack: &jetstream.PubAck{Stream: stream, Sequence: seq}})
}

func (r *runner) ledgerRun(d *Delivery, stream string, seq uint64) ledger.Run {
	run := ledger.Run{Run: ledgerRunOf(d), MsgID: d.MsgID, Stream: stream, Seq: seq, At: time.Now().UTC()}
	if d.JobErr == nil {
		run.Input = ledger.InputDigest(d.Job)
	}
	return run
}

// ledgerKeyOf is the job id a delivery is recorded under in the ledger: the
// job's id, or for a message that is not a valid job its message id (the
// id its dead letter is stored under).
func ledgerKeyOf(d *Delivery) string {
	if d.JobErr == nil && d.Job.ID != "" {
		return d.Job.ID
	}
	return d.MsgID
}

// ledgerRunOf is the run a delivery is: encoded in its message id.
func ledgerRunOf(d *Delivery) int {
	if d.JobErr == nil && d.Job.ID != "" {
		return ledger.RunOf(d.MsgID, d.Job.ID)
	}
	return 0
}

// otherOutcome reports the stream (broker.StreamResults or broker.StreamDLQ, "" for
// none) and sequence on which an earlier delivery stored a different kind
// of outcome for d within the duplicate window: a dead letter when out is
// a result, or the other way round.
func (r *runner) otherOutcome(d *Delivery, out Outcome) (string, uint64, error) {
	stream, prefix := broker.StreamDLQ, broker.SubjectDLQ
	if out.Action == ActionDeadLetter {
		stream, prefix = broker.StreamResults, broker.SubjectResults
	}
	// The subject store would use.
	filter := prefix + ".>"
	if job.ValidSchemaID(out.Schema) {
		filter = broker.SchemaSubject(prefix, out.Schema)
	} else if d.SchemaToken != "" {
		filter = broker.SchemaSubject(prefix, d.SchemaToken)
	}
	ctx, cancel := context.WithTimeout(r.pubCtx, 30*time.Second)
	defer cancel()
	seq, err := outcomeSince(ctx, r.c, stream, filter, d.MsgID, time.Now().Add(-r.c.DuplicateWindow()))
	if err != nil || seq == 0 {
		return "", 0, err
	}
	return stream, seq, nil
}

func (r *runner) nakOnce(j *inflight, delay time.Duration) {
	if j.settled.CompareAndSwap(false, true) {
		r.nak(j.msg, delay)
	}
}

func (r *runner) nak(msg jetstream.Msg, delay time.Duration) {
	if err := msg.NakWithDelay(delay); err != nil {
		r.log.Warn("nak with delay failed; the job is redelivered after its ack wait", "subject", msg.Subject(), "err", err)
	}
}

// retryDelay is the handler's delay, or the backoff step for this delivery,
// plus up to 20% jitter.
func (r *runner) retryDelay(d *Delivery, want time.Duration) time.Duration {
	if want <= 0 {
		n := max(d.NumDelivered, 1)
		if len(r.cfg.BackOff) > 0 {
			want = r.cfg.BackOff[min(n-1, len(r.cfg.BackOff)-1)]
		} else {
			want = min(time.Second<<min(n-1, 5), 30*time.Second)
		}
	}
	return broker.Jitter(want)
}

// documentOK ends the document of a chunk whose outcome is on stream at
// seq; when that fails it hands the chunk back and reports false.
func (r *runner) documentOK(j *inflight, d *Delivery, stream string, seq uint64) bool {
	if err := r.docs.chunkEnded(d, stream, seq); err != nil {
		r.log.Warn("ending a chunk's document failed; chunk handed back (its redelivery ends the document)", "msg_id", d.MsgID, "err", err)
		r.nakOnce(j, r.retryDelay(d, 0))
		return false
	}
	return true
}
