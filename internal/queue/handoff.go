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

// StoreOutcome stores the outcome of a handed-off job as a delivery's is
// stored (publishOutcome, recordOutcome): published with Nats-Msg-Id =
// MsgID (a second publish inside the duplicate window is dropped), then
// recorded in the job ledger. It reports whether this is the run's
// outcome: false when the ledger holds another one already (then ours is
// removed from its stream), so calling it twice for one run stores one
// outcome. The hooks are told as WorkerConfig's Stored and Repeated are.
func StoreOutcome(ctx context.Context, c *broker.Conn, h HandedOutcome, hooks OutcomeHooks) (bool, error) {
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
	st, err := publishOutcome(ctx, c, h.MsgID, h.SchemaToken, out)
	if err != nil {
		return false, err
	}
	ours := ledger.Run{Run: run, MsgID: h.MsgID, Stream: st.ack.Stream, Seq: st.ack.Sequence, At: time.Now().UTC(), Input: h.Input}
	kept, _, err := recordOutcome(ctx, c, led, jobID, ours, st)
	if err != nil {
		return false, err
	}
	hooks.told(kept, h.MsgID, out, st)
	return kept, nil
}
