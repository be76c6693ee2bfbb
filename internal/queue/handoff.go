package queue

// Hand-off: a job whose work continues outside its delivery (a provider
// batch answers within hours, far past any ack wait) is acked once the
// component holding it has recorded it durably, and its outcome is stored
// later through StoreOutcome, the same path (stream, duplicate window, job
// ledger) a delivery's outcome takes.

import (
	"context"
	"fmt"
	"time"

	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/ledger"
	"github.com/llmpipeline/pipeline/internal/payload"
	"github.com/llmpipeline/pipeline/internal/sink"
	"github.com/llmpipeline/pipeline/job"
)

// ActionHandOff acks the job without storing anything: the handler handed
// it to a component that keeps it durably and stores its outcome later
// with StoreOutcome (batch mode).
const ActionHandOff Action = 100

// HandedOutcome is the outcome of a job that was handed off.
type HandedOutcome struct {
	// MsgID is the job message's Nats-Msg-Id (the run's id), JobID the
	// job's id (the ledger's key), SchemaToken the schema id of the job's
	// subject (Delivery.SchemaToken).
	MsgID, JobID, SchemaToken string
	// Outcome is ActionResult or ActionDeadLetter with its payload, as a
	// handler returns it.
	Outcome Outcome
	// Input is the job's ledger.InputDigest ("" when it is not a valid job).
	Input string
}

// StoreOutcome stores the outcome of a handed-off job: published with
// Nats-Msg-Id = MsgID (a second publish inside the duplicate window is
// dropped), then recorded in the job ledger. It reports whether this is
// the run's outcome: false when the ledger holds another one already (then
// ours is removed from its stream), so calling it twice for one run stores
// one outcome. stored, if set, gets the message as WorkerConfig.Stored does.
func StoreOutcome(ctx context.Context, c *broker.Conn, h HandedOutcome, stored func(sink.Msg)) (bool, error) {
	out := h.Outcome
	if out.Action != ActionResult && out.Action != ActionDeadLetter {
		return false, fmt.Errorf("storing the outcome of %s: action %d is neither a result nor a dead letter", h.MsgID, int(out.Action))
	}
	jobID := h.JobID
	if jobID == "" {
		jobID = h.MsgID
	}
	run := ledger.RunOf(h.MsgID, jobID)
	led := ledger.New(c)
	if _, ended, err := led.RunEnded(ctx, jobID, run); err != nil {
		return false, err
	} else if ended {
		return false, nil
	}
	prefix, kind := broker.SubjectResults, payload.KindResults
	if out.Action == ActionDeadLetter {
		prefix, kind = broker.SubjectDLQ, payload.KindDLQ
	}
	schema := out.Schema
	if !job.ValidSchemaID(schema) {
		schema = h.SchemaToken
	}
	msg := broker.NewMsg(broker.SchemaSubject(prefix, schema), h.MsgID, out.Payload)
	object, err := c.Payloads().Offload(ctx, msg, kind)
	if err != nil {
		return false, fmt.Errorf("storing the outcome of %s: %w", h.MsgID, err)
	}
	fut, err := c.PublishAsync(ctx, msg)
	if err != nil {
		return false, fmt.Errorf("publishing to %s: %w", msg.Subject, err)
	}
	ack, err := c.AwaitPubAck(ctx, fut)
	if err != nil {
		return false, err
	}
	if ack.Duplicate {
		c.Payloads().DropIfUnreferenced(ctx, ack.Stream, ack.Sequence, object)
	}
	ours := ledger.Run{Run: run, MsgID: h.MsgID, Stream: ack.Stream, Seq: ack.Sequence, At: time.Now().UTC(), Input: h.Input}
	have, err := led.Record(ctx, jobID, ours)
	if err != nil {
		return false, err
	}
	if have.Stream != ours.Stream || have.Seq != ours.Seq {
		if !ack.Duplicate {
			removeOutcome(ctx, c, ours.Stream, ours.Seq, object)
		}
		return false, nil
	}
	if stored != nil && !ack.Duplicate {
		stored(sink.Msg{Subject: msg.Subject, Data: out.Payload, MsgID: h.MsgID, Stream: ack.Stream, Sequence: ack.Sequence, Time: time.Now(), Record: out.Record})
	}
	return true, nil
}
