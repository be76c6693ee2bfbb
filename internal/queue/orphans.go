package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// orphanage handles the jobs that reached MaxDeliver without an answer:
// it takes their stream sequences from the MAX_DELIVERIES advisories and
// the idle sweeps, and hands each to the runner's handler with Orphan set.
type orphanage struct {
	r     *runner
	queue chan uint64 // stream sequences of orphans to handle
	mu    sync.Mutex
	// failedSeqs are the orphans whose handling failed this run.
	failedSeqs map[uint64]bool
}

// maxDeliveriesAdvisory is the part of the server's advisory we read.
type maxDeliveriesAdvisory struct {
	Stream     string `json:"stream"`
	Consumer   string `json:"consumer"`
	StreamSeq  uint64 `json:"stream_seq"`
	Deliveries uint64 `json:"deliveries"`
}

func (o *orphanage) onAdvisory(m *nats.Msg) {
	r := o.r
	var a maxDeliveriesAdvisory
	if err := json.Unmarshal(m.Data, &a); err != nil || a.StreamSeq == 0 {
		r.log.Warn("unreadable max-deliveries advisory", "err", err)
		return
	}
	select {
	case o.queue <- a.StreamSeq:
	default:
		// Full: the idle sweep finds it later.
		r.log.Warn("orphan queue full; job left for the sweep", "seq", a.StreamSeq)
	}
}

// orphanLoop handles the jobs announced by max-deliveries advisories, each
// holding a concurrency slot.
func (o *orphanage) orphanLoop(ctx context.Context) {
	r := o.r
	for {
		var seq uint64
		select {
		case <-ctx.Done():
			return
		case seq = <-o.queue:
		}
		select {
		case r.sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			defer func() { <-r.sem }()
			if _, err := o.handleOrphan(seq); err != nil {
				r.log.Error("handling a job that reached max deliveries", "seq", seq, "err", err)
			}
		}()
	}
}

// sweep handles jobs still in the work queue at or below upTo, the last
// delivered sequence of a consumer with nothing pending or unacked: they
// can never be delivered again (they reached MaxDeliver) and their advisory
// was missed. It returns how many it handled.
func (o *orphanage) sweep(ctx context.Context, upTo uint64) (int, error) {
	r := o.r
	if upTo == 0 {
		return 0, nil
	}
	n := 0
	seq := uint64(1)
	for seq <= upTo {
		raw, err := r.jobs.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(broker.SubjectJobs+".>"))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("reading stranded jobs from %s at %d: %w", broker.StreamJobs, seq, err)
		}
		if raw.Sequence > upTo {
			return n, nil
		}
		seq = raw.Sequence + 1
		if o.failed(raw.Sequence) {
			continue
		}
		r.log.Warn("job reached max deliveries and its advisory was missed; handling it", "seq", raw.Sequence)
		handled, err := o.handleOrphanMsg(raw)
		if err != nil {
			r.log.Error("handling a stranded job", "seq", raw.Sequence, "err", err)
			continue
		}
		if handled {
			n++
		}
	}
	return n, nil
}

func (o *orphanage) failed(seq uint64) bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.failedSeqs[seq]
}

func (o *orphanage) markFailed(seq uint64) {
	o.mu.Lock()
	o.failedSeqs[seq] = true
	o.mu.Unlock()
}

// handleOrphan reads job seq from the stream and handles it as an orphan.
func (o *orphanage) handleOrphan(seq uint64) (bool, error) {
	r := o.r
	raw, err := r.jobs.GetMsg(r.pubCtx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return false, nil // another worker handled it already
	}
	if err != nil {
		return false, fmt.Errorf("reading job %d from %s: %w", seq, broker.StreamJobs, err)
	}
	return o.handleOrphanMsg(raw)
}

// handleOrphanMsg calls the handler with Orphan set, stores its outcome and
// deletes the job from the work queue. Several workers may do this for the
// same job: the outcome's Nats-Msg-Id deduplicates the store, and the
// second delete finds nothing.
func (o *orphanage) handleOrphanMsg(raw *jetstream.RawStreamMsg) (bool, error) {
	r := o.r
	d := &Delivery{
		SchemaToken:  broker.SchemaOfSubject(raw.Subject),
		NumDelivered: r.cfg.MaxDeliver,
		MaxDeliver:   r.cfg.MaxDeliver,
		Orphan:       true,
	}
	if raw.Header != nil {
		d.MsgID = raw.Header.Get(jetstream.MsgIDHeader)
	}
	pre, ok := r.prepare(d, raw.Header, raw.Data, raw.Sequence, nil)
	switch {
	case !ok && pre.Action == actionDone:
		// A chunk's run ended, but its document may not have: its last
		// chunk is the only thing that can end it. The job stays for
		// the next sweep when that fails.
		if err := r.docs.chunkEndedFromLedger(d); err != nil {
			return false, fmt.Errorf("ending the document of retired chunk %s: %w", d.MsgID, err)
		}
		if err := o.removeJob(d, raw.Sequence); err != nil {
			return false, err
		}
		r.log.Warn("job was left in the work queue after its run ended (job ledger); removed it", "msg_id", d.MsgID, "seq", raw.Sequence)
		if r.cfg.AlreadyDone != nil {
			r.cfg.AlreadyDone(d.MsgID)
		}
		return true, nil
	case !ok:
		return false, fmt.Errorf("reading orphan %s (seq %d): its body or the job ledger could not be read", d.MsgID, raw.Sequence)
	}
	// Stranded is not the same as unanswered: a job whose outcome is
	// stored is removed, not dead-lettered a second time as abandoned.
	where, seq, err := storedOutcome(r.pubCtx, r.c, d.MsgID, d.SchemaToken)
	if err != nil {
		return false, fmt.Errorf("checking whether orphan %s already has an outcome: %w", d.MsgID, err)
	}
	if where != "" {
		// Its worker may have died before the ledger write: record it.
		have, err := r.ledger.Record(r.pubCtx, ledgerKeyOf(d), r.ledgerRun(d, where, seq))
		if err != nil {
			return false, fmt.Errorf("recording orphan %s's stored outcome in the job ledger: %w", d.MsgID, err)
		}
		// The outcome the ledger kept (an earlier one may win) ends the
		// chunk's document before the chunk is removed.
		if err := r.docs.chunkEnded(d, have.Stream, have.Seq); err != nil {
			return false, fmt.Errorf("ending the document of retired chunk %s: %w", d.MsgID, err)
		}
		if err := o.removeJob(d, raw.Sequence); err != nil {
			return false, err
		}
		r.log.Warn("job was left in the work queue after its outcome was stored; removed it", "msg_id", d.MsgID, "seq", raw.Sequence, "outcome_on", where)
		return true, nil
	}
	j := &inflight{}
	r.track(j)
	defer r.untrack(j)
	out, ok := r.call(d)
	if !ok {
		o.markFailed(raw.Sequence)
		return false, fmt.Errorf("handler panicked on orphan %s; job left in %s at %d", d.MsgID, broker.StreamJobs, raw.Sequence)
	}
	switch out.Action {
	case ActionResult, ActionDeadLetter:
	case ActionStop:
		o.markFailed(raw.Sequence)
		r.stop(out.Err)
		return false, fmt.Errorf("handler stopped the worker on orphan %s: %w", d.MsgID, out.Err)
	default:
		o.markFailed(raw.Sequence)
		return false, fmt.Errorf("handler did not dead-letter orphan %s (action %d); job left in %s at %d", d.MsgID, out.Action, broker.StreamJobs, raw.Sequence)
	}
	st, err := r.store(d, out)
	if err != nil {
		return false, fmt.Errorf("storing the outcome of orphan %s: %w", d.MsgID, err)
	}
	if _, err := r.conclude(d, out, st); err != nil {
		return false, fmt.Errorf("recording the outcome of orphan %s in the job ledger: %w", d.MsgID, err)
	}
	if err := r.docs.chunkEndedFromLedger(d); err != nil {
		return false, fmt.Errorf("ending the document of orphan chunk %s: %w", d.MsgID, err)
	}
	if err := o.removeJob(d, raw.Sequence); err != nil {
		return false, err
	}
	r.log.Info("job reached max deliveries; outcome stored and job removed", "msg_id", d.MsgID, "seq", raw.Sequence, "action", int(out.Action))
	return true, nil
}

// removeJob deletes a handled orphan from the work queue, then its body
// object.
func (o *orphanage) removeJob(d *Delivery, seq uint64) error {
	r := o.r
	if err := r.jobs.DeleteMsg(r.pubCtx, seq); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return fmt.Errorf("deleting job %s (seq %d) from %s: %w", d.MsgID, seq, broker.StreamJobs, err)
	}
	r.c.Payloads().Drop(r.pubCtx, d.payload)
	return nil
}
