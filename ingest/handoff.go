package ingest

// Hand-off: a job whose work continues outside its delivery (a provider
// batch answers within hours, far past any ack wait) is acked once the
// component holding it has recorded it durably, and its outcome is stored
// later through StoreOutcome, the same path (stream, duplicate window, job
// ledger) a delivery's outcome takes.

import (
	"context"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// BucketBatches is the KV bucket of batch mode: the provider batches in
// flight and the jobs they hold.
const BucketBatches = "PIPELINE_BATCHES"

// ActionHandOff acks the job without storing anything: the handler handed
// it to a component that keeps it durably and stores its outcome later
// with StoreOutcome (batch mode).
const ActionHandOff Action = 100

// BatchBucket opens (creating it if needed) the KV bucket of batch mode.
func (c *Conn) BatchBucket(ctx context.Context) (jetstream.KeyValue, error) {
	var kv jetstream.KeyValue
	err := c.retryOnHandover(ctx, "opening the batch bucket", func() error {
		var err error
		kv, err = c.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      BucketBatches,
			Description: "pipeline: provider batches in flight and the jobs each holds",
			History:     1,
			Storage:     jetstream.FileStorage,
			Replicas:    c.cfg.Replicas,
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("creating or updating key-value bucket %s (replicas %d): %w", BucketBatches, c.cfg.Replicas, err)
	}
	return kv, nil
}

// HandedOutcome is the outcome of a job that was handed off.
type HandedOutcome struct {
	// MsgID is the job message's Nats-Msg-Id (the run's id), JobID the
	// job's id (the ledger's key), SchemaToken the schema id of the job's
	// subject (Delivery.SchemaToken).
	MsgID, JobID, SchemaToken string
	// Outcome is ActionResult or ActionDeadLetter with its payload, as a
	// handler returns it.
	Outcome Outcome
	// Input is the job's InputDigest ("" when it is not a valid job).
	Input string
}

// StoreOutcome stores the outcome of a handed-off job: published with
// Nats-Msg-Id = MsgID (a second publish inside the duplicate window is
// dropped), then recorded in the job ledger. It reports whether this is
// the run's outcome: false when the ledger holds another one already (then
// ours is removed from its stream), so calling it twice for one run stores
// one outcome. stored, if set, gets the message as WorkerConfig.Stored does.
func (c *Conn) StoreOutcome(ctx context.Context, h HandedOutcome, stored func(SinkMsg)) (bool, error) {
	out := h.Outcome
	if out.Action != ActionResult && out.Action != ActionDeadLetter {
		return false, fmt.Errorf("storing the outcome of %s: action %d is neither a result nor a dead letter", h.MsgID, int(out.Action))
	}
	jobID := h.JobID
	if jobID == "" {
		jobID = h.MsgID
	}
	run := RunOf(h.MsgID, jobID)
	if _, ended, err := c.runEnded(ctx, jobID, run); err != nil {
		return false, err
	} else if ended {
		return false, nil
	}
	prefix, kind := SubjectResults, payloadResults
	if out.Action == ActionDeadLetter {
		prefix, kind = SubjectDLQ, payloadDLQ
	}
	schema := out.Schema
	if !ValidSchemaID(schema) {
		schema = h.SchemaToken
	}
	msg := newMsg(SchemaSubject(prefix, schema), h.MsgID, out.Payload)
	object, err := c.offload(ctx, msg, kind)
	if err != nil {
		return false, fmt.Errorf("storing the outcome of %s: %w", h.MsgID, err)
	}
	fut, err := c.publishAsync(ctx, msg)
	if err != nil {
		return false, fmt.Errorf("publishing to %s: %w", msg.Subject, err)
	}
	ack, err := c.awaitPubAck(ctx, fut)
	if err != nil {
		return false, err
	}
	if ack.Duplicate {
		c.dropIfUnreferenced(ctx, ack.Stream, ack.Sequence, object)
	}
	ours := LedgerRun{Run: run, MsgID: h.MsgID, Stream: ack.Stream, Seq: ack.Sequence, At: time.Now().UTC(), Input: h.Input}
	have, err := c.recordRun(ctx, jobID, ours)
	if err != nil {
		return false, err
	}
	if have.Stream != ours.Stream || have.Seq != ours.Seq {
		if !ack.Duplicate {
			c.removeOutcome(ctx, ours.Stream, ours.Seq, object)
		}
		return false, nil
	}
	if stored != nil && !ack.Duplicate {
		stored(SinkMsg{Subject: msg.Subject, Data: out.Payload, MsgID: h.MsgID, Stream: ack.Stream, Sequence: ack.Sequence, Time: time.Now(), Record: out.Record})
	}
	return true, nil
}
