package batch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/llmpipeline/pipeline/internal/ledger"
	"github.com/llmpipeline/pipeline/internal/queue"
	"github.com/llmpipeline/pipeline/job"
	"github.com/llmpipeline/pipeline/llm"
	"github.com/llmpipeline/pipeline/model"
)

// answer settles one request of a done batch: nil res means no answer.
func (r *settler) answer(ctx context.Context, it Item, rev uint64, res *llm.BatchResult) error {
	switch {
	case res == nil || res.Type == llm.ResultCanceled || res.Type == llm.ResultExpired:
		it.Requeues++
		if it.Requeues > r.cfg.Requeues {
			return r.finish(ctx, it, rev, &model.Error{Kind: model.KindTransport, Provider: "batch",
				Message: fmt.Sprintf("unanswered by %d batches (expired or cancelled)", it.Requeues)})
		}
		return r.requeue(ctx, it, rev, OutcomeRequeued)
	case res.Type == llm.ResultSucceeded:
		if r.cfg.Paid != nil {
			r.cfg.Paid(res.Response.Usage)
		}
		it.Answers = append(it.Answers, res.Response)
		return r.judge(ctx, it, rev)
	}
	var he *model.Error
	switch model.KindOf(res.Err) {
	case model.KindRequest:
		if !errors.As(res.Err, &he) || he.Param == "" {
			return r.finish(ctx, it, rev, res.Err)
		}
		// The model refused a parameter (temperature, max_tokens) that the
		// client reading the answer now leaves out of every request: sent
		// again in a later batch, on the transport budget.
		level := slog.LevelDebug
		if _, seen := r.refusedParams.LoadOrStore(he.Param, true); !seen {
			level = slog.LevelWarn
		}
		r.log.Log(ctx, level, "the model does not take this parameter: its requests go into a later batch without it", "item", it.Key, "param", he.Param, "err", he.Message)
	}
	if stops(res.Err) {
		// The account, not the request (Anthropic's authentication_error or
		// billing_error in a result): queued again at no cost, and the run
		// stops.
		if err := r.requeue(ctx, it, rev, OutcomeRetry); err != nil {
			return err
		}
		r.stopOn(res.Err)
		return nil
	}
	it.Transport++
	if it.Transport > r.cfg.TransportRetries {
		return r.finish(ctx, it, rev, res.Err)
	}
	return r.requeue(ctx, it, rev, OutcomeRetry)
}

// requeue queues an item to be sent again and reports why: outcome is
// OutcomeRetry (its request failed, inside a batch or as a synchronous
// heal turn), OutcomeHeal (a heal turn follows) or OutcomeRequeued (its
// batch left it unanswered).
func (r *settler) requeue(ctx context.Context, it Item, rev uint64, outcome string) error {
	if err := r.queue(ctx, it, rev); err != nil {
		return err
	}
	r.outcome(outcome)
	return nil
}

// judge runs the job's loop over the recorded answers: it ends the job,
// or asks for another attempt (queued for the next batch; with HealSync
// the loop calls the synchronous endpoint itself and ends the job).
func (r *settler) judge(ctx context.Context, it Item, rev uint64) error {
	d, err := delivery(it)
	if err != nil {
		return err
	}
	s := &script{answers: answers(it), capture: r.cfg.Heal == HealBatch}
	out := r.cfg.Inner.Handle(withScript(ctx, s), d)
	if s.captured != nil {
		it.Attempt, it.Transport, it.Requeues = s.captured.Attempt, 0, 0
		return r.requeue(ctx, it, rev, OutcomeHeal)
	}
	return r.store(ctx, it, out)
}

// finish ends a job whose current attempt failed for good (err), through
// the loop, so the dead letter is the one the synchronous path writes.
func (r *settler) finish(ctx context.Context, it Item, rev uint64, err error) error {
	d, derr := delivery(it)
	if derr != nil {
		return derr
	}
	d.MaxDeliver, d.NumDelivered = max(d.NumDelivered, 1), max(d.NumDelivered, 1) // the last delivery: no retry
	s := &script{answers: answers(it), fail: map[int]error{it.Attempt: err}}
	out := r.cfg.Inner.Handle(withScript(ctx, s), d)
	return r.store(ctx, it, out)
}

// store stores an outcome the loop decided, then drops the item.
func (r *settler) store(ctx context.Context, it Item, out queue.Outcome) error {
	if out.Action != queue.ActionResult && out.Action != queue.ActionDeadLetter {
		// The loop could not finish (a synchronous heal turn failed in
		// transport, or was refused for the key: the run stops then): the
		// next attempt goes into a batch.
		it.Attempt = len(it.Answers) + 1
		if err := r.requeue(ctx, it, 0, OutcomeRetry); err != nil {
			return err
		}
		if out.Action == queue.ActionStop {
			r.stopOn(out.Err)
		}
		return nil
	}
	ctx, cancel := context.WithTimeout(ctx, defaultStoreWindow)
	defer cancel()
	hooks := queue.OutcomeHooks{Stored: r.cfg.Stored, Repeated: r.cfg.Repeated}
	if _, err := queue.StoreOutcome(ctx, r.cfg.Conn, queue.HandedOutcome{MsgID: it.MsgID, JobID: it.JobID, SchemaToken: it.SchemaToken, Outcome: out, Input: inputDigest(it.Job)}, hooks); err != nil {
		return fmt.Errorf("storing the outcome of %s: %w", it.MsgID, err)
	}
	if out.Action == queue.ActionResult {
		r.outcome(OutcomeResult)
	} else {
		r.outcome(OutcomeDeadLetter)
	}
	if err := r.st.kv.Delete(ctx, prefixItem+it.Key); err != nil {
		r.log.Warn("dropping a settled item (its outcome is stored; the ledger keeps it ended)", "item", it.Key, "err", err)
	}
	return nil
}

// queue puts an item back in the queue: the marker first, so a crash
// between the two writes leaves a marker for an item not queued (ignored),
// never a queued item without one.
func (r *settler) queue(ctx context.Context, it Item, rev uint64) error {
	if _, err := r.st.kv.Put(ctx, prefixQueue+it.Key, []byte(it.MsgID)); err != nil {
		return fmt.Errorf("queueing %s: %w", it.MsgID, err)
	}
	it.State, it.Batch, it.Updated = itemQueued, "", r.cfg.Now().UTC()
	if _, err := r.st.put(ctx, prefixItem+it.Key, it, rev, false); err != nil && !conflict(err) {
		return fmt.Errorf("queueing %s: %w", it.MsgID, err)
	}
	r.census.queue(1)
	return nil
}

// park queues a request that came from a delivery while the runner holds
// (the enqueued-token limit): the job is in batch mode's keeping, its
// delivery can be acked.
func (r *settler) park(ctx context.Context, it Item) error {
	it.FromDelivery = false
	return r.queue(ctx, it, 0)
}

// inputDigest is the ledger's digest of a held job, "" when it is not a
// valid job.
func inputDigest(data []byte) string {
	j, err := job.Parse(data)
	if err != nil {
		return ""
	}
	return ledger.InputDigest(j)
}

// delivery is the job of an item as a delivery for the loop.
func delivery(it Item) (*queue.Delivery, error) {
	job, err := job.Parse(it.Job)
	if err != nil {
		return nil, fmt.Errorf("reading the job of %s: %w", it.MsgID, err)
	}
	return &queue.Delivery{Job: job, Data: it.Job, SchemaToken: it.SchemaToken, MsgID: it.MsgID, NumDelivered: max(it.Deliveries, 1)}, nil
}
