package batch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmpipeline/pipeline/heal"
	"github.com/llmpipeline/pipeline/internal/ledger"
	"github.com/llmpipeline/pipeline/internal/queue"
	"github.com/llmpipeline/pipeline/job"
	"github.com/llmpipeline/pipeline/llm"
)

// pollLoop reads the batches' states every Poll (and at once on start):
// every process of the fleet polls every batch in the bucket, so batches a
// dead process created are read by the survivors or by its restart.
func (r *Runner) pollLoop(ctx context.Context) {
	t := time.NewTicker(r.cfg.Poll)
	defer t.Stop()
	for {
		if err := r.Tick(ctx); err != nil && ctx.Err() == nil && !r.halt.stopped() {
			r.log.Warn("polling batches", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// Tick polls once: the queued requests go to the gatherer, every batch in
// flight is read, and the done ones are settled. Every record read is
// counted for Census. Ticks run one at a time.
func (r *Runner) Tick(ctx context.Context) error {
	r.tickMu.Lock()
	defer r.tickMu.Unlock()
	r.census.begin()
	r.limit.begin()
	var errs []error
	complete := true
	queued, err := r.st.keys(ctx, prefixQueue)
	if err != nil {
		errs = append(errs, err)
		complete = false
	}
	waiting := 0
	type queuedItem struct {
		it  Item
		rev uint64
	}
	var ready []queuedItem
	for _, k := range queued {
		it, rev, err := r.st.getItem(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) || (err == nil && it.State != itemQueued) {
			_ = r.st.kv.Delete(ctx, prefixQueue+k)
			continue
		}
		if err != nil {
			errs = append(errs, err)
			continue
		}
		waiting++
		ready = append(ready, queuedItem{it, rev})
	}
	keys, err := r.st.keys(ctx, prefixBatch)
	if err != nil {
		errs = append(errs, err)
		complete = false
	}
	for _, k := range keys {
		if err := r.pollOne(ctx, k); err != nil {
			errs = append(errs, fmt.Errorf("batch %s: %w", k, err))
			if r.stopOn(err) {
				complete = false
				break // every other call would be refused too
			}
		}
	}
	r.census.end(r.cfg.Now(), waiting, complete)
	if complete {
		r.releaseHold()
		r.fleetHold()
	}
	// The queued requests are offered only now, after every record was
	// read: one queued again for the enqueued-token limit, by this
	// process or another, is never sent before the hold is known.
	if !r.limit.holding() && !r.halt.stopped() {
		for _, q := range ready {
			go r.enqueue(ctx, q.it, q.rev)
		}
	}
	return errors.Join(errs...)
}

func (r *Runner) pollOne(ctx context.Context, key string) error {
	rec, rev, err := r.st.getRecord(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil
	}
	if err != nil {
		return err
	}
	r.limit.read(rec, r.cfg.Batcher.Provider())
	now := r.cfg.Now().UTC()
	if settled(rec) && now.Sub(rec.EndedAt) > r.cfg.KeepEnded {
		err := r.st.kv.Delete(ctx, prefixBatch+key, jetstream.LastRevision(rev))
		if err != nil && !conflict(err) {
			return fmt.Errorf("deleting the record of a batch ended at %s: %w", rec.EndedAt.Format(time.RFC3339), err)
		}
		return nil // deleted (or written since: the next poll sees it)
	}
	r.census.count(rec, rev)
	switch rec.State {
	case StateAbandoned:
		return r.sweep(ctx, rec, rev)
	case StateCollecting:
		if rec.Owner != r.owner && now.Sub(rec.LeaseAt) < r.cfg.Lease {
			return nil
		}
	case StateSubmitted:
	default:
		return nil
	}
	st, err := r.cfg.Batcher.Get(ctx, rec.ProviderID)
	if err != nil {
		return err
	}
	if !st.Done() {
		if st.Status != rec.Status.Status || st.Counts != rec.Status.Counts {
			moved := st.Status != rec.Status.Status
			rec.Status = st
			rev, err := r.st.put(ctx, prefixBatch+key, rec, rev, false)
			if conflict(err) {
				return nil // another process wrote it: the next tick reads it
			}
			if err != nil {
				return err
			}
			if moved {
				r.changed(rec, rev)
			} else {
				r.census.note(rec, rev) // new counts, same status: counted, not observed
			}
		}
		return nil
	}
	rec.State, rec.Owner, rec.LeaseAt, rec.Status = StateCollecting, r.owner, now, st
	rev, err = r.st.put(ctx, prefixBatch+key, rec, rev, false)
	if conflict(err) {
		return nil // another process took it
	}
	if err != nil {
		return err
	}
	r.changed(rec, rev)
	err = r.collect(ctx, rec, rev, st)
	if err != nil && stops(err) {
		// This process stops: the lease goes back, so the next run reads
		// the batch at its first poll instead of after the lease.
		rec.State, rec.Owner, rec.LeaseAt = StateSubmitted, "", time.Time{}
		if _, perr := r.st.put(context.WithoutCancel(ctx), prefixBatch+key, rec, rev, false); perr != nil && !conflict(perr) {
			r.log.Warn("handing back the lease of a batch being read", "batch", key, "err", perr)
		}
	}
	return err
}

// collect settles every request of a done batch. The results are
// streamed: lines of custom ids the batch does not have are dropped
// unparsed as they are read, and a request is settled by its first valid
// answer as soon as it is read (a second line of the same custom id is
// logged and ignored). Failed and unreadable answers are kept (their
// errors only) until the whole file is read, in case a valid one follows;
// a request without any line was left unanswered.
func (r *Runner) collect(ctx context.Context, rec Record, rev uint64, st llm.BatchStatus) error {
	if st.State == llm.BatchFailed {
		return r.collectFailed(ctx, rec, rev, st)
	}
	reqs := make(map[string]Request, len(rec.Requests))
	for _, q := range rec.Requests {
		reqs[q.CustomID] = q
	}
	answered := make(map[string]bool, len(rec.Requests))
	failed := map[string]llm.BatchResult{}
	twice := func(id string) {
		r.log.Warn("a custom id answered twice in a batch's results: its first valid answer settles it, the other is ignored",
			"batch", rec.Key, "id", rec.ProviderID, "custom_id", id)
	}
	err := r.cfg.Batcher.Results(ctx, st, func(id string) bool { _, ok := reqs[id]; return ok }, func(res llm.BatchResult) error {
		q, ok := reqs[res.CustomID]
		if !ok {
			if res.Type == llm.ResultUnreadable {
				r.log.Warn("an unreadable line in a batch's results: the request it answers, if any, is asked again in a later batch",
					"batch", rec.Key, "id", rec.ProviderID, "err", res.Err)
			}
			return nil // not one of ours
		}
		if answered[res.CustomID] {
			twice(res.CustomID)
			return nil
		}
		if res.Type != llm.ResultSucceeded {
			if _, dup := failed[res.CustomID]; dup {
				twice(res.CustomID)
			} else {
				if res.Type == llm.ResultUnreadable {
					r.log.Warn("an unreadable line in a batch's results: its request is asked again in a later batch",
						"batch", rec.Key, "id", rec.ProviderID, "custom_id", res.CustomID, "err", res.Err)
				}
				failed[res.CustomID] = res
			}
			return nil
		}
		if _, dup := failed[res.CustomID]; dup {
			twice(res.CustomID)
			delete(failed, res.CustomID)
		}
		answered[res.CustomID] = true
		return r.settleOne(ctx, rec, q, &res)
	})
	if err != nil {
		r.stopOn(err)
		return err // the lease is ours: the next tick reads again (what was settled stays settled)
	}
	for _, q := range rec.Requests {
		if answered[q.CustomID] {
			continue
		}
		var p *llm.BatchResult
		if res, ok := failed[q.CustomID]; ok {
			p = &res
		}
		if err := r.settleOne(ctx, rec, q, p); err != nil {
			return err
		}
	}
	rec.State, rec.EndedAt = StateEnded, r.cfg.Now().UTC()
	rev, err = r.st.put(ctx, prefixBatch+rec.Key, rec, rev, false)
	if err != nil && !conflict(err) {
		return err
	}
	if err == nil {
		r.changed(rec, rev)
	}
	r.log.Info("batch settled", "batch", rec.Key, "id", rec.ProviderID, "status", st.Status,
		"succeeded", st.Counts.Succeeded, "errored", st.Counts.Errored)
	return nil
}

// settleOne settles request q of rec with res (nil: no answer), unless
// its item has moved on (settled already, by an earlier read).
func (r *Runner) settleOne(ctx context.Context, rec Record, q Request, res *llm.BatchResult) error {
	it, irev, err := r.st.getItem(ctx, q.Item)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil // settled already
	}
	if err != nil {
		return err
	}
	if it.State != itemBatched || it.Batch != rec.Key || it.CustomID != q.CustomID {
		return nil
	}
	return r.answer(ctx, it, irev, res)
}

// settled reports whether a record's batch is over for good: ended, or
// abandoned with its requests swept into other batches.
func settled(rec Record) bool {
	if rec.EndedAt.IsZero() {
		return false
	}
	return rec.State == StateEnded || (rec.State == StateAbandoned && rec.Status.Message == "swept")
}

// sweep queues again the requests of an abandoned record that came from
// the queue (heal turns, retries); first attempts came from deliveries,
// which were never acked and come back by themselves.
func (r *Runner) sweep(ctx context.Context, rec Record, rev uint64) error {
	if rec.Status.Message == "swept" {
		return nil
	}
	for _, q := range rec.Requests {
		it, irev, err := r.st.getItem(ctx, q.Item)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return err
		}
		if it.State != itemBatched || it.Batch != rec.Key || it.FromDelivery {
			continue // a delivery never acked comes back by itself
		}
		if err := r.requeue(ctx, it, irev, OutcomeRequeued); err != nil {
			return err
		}
	}
	rec.Status.Message = "swept"
	rev, err := r.st.put(ctx, prefixBatch+rec.Key, rec, rev, false)
	if conflict(err) {
		return nil
	}
	if err == nil {
		r.census.note(rec, rev) // not a change of state: counted, not observed
	}
	return err
}

// answer settles one request of a done batch: nil res means no answer.
func (r *Runner) answer(ctx context.Context, it Item, rev uint64, res *llm.BatchResult) error {
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
func (r *Runner) requeue(ctx context.Context, it Item, rev uint64, outcome string) error {
	if err := r.queue(ctx, it, rev); err != nil {
		return err
	}
	r.outcome(outcome)
	return nil
}

// judge runs the job's loop over the recorded answers: it ends the job,
// or asks for another attempt (queued for the next batch; with HealSync
// the loop calls the synchronous endpoint itself and ends the job).
func (r *Runner) judge(ctx context.Context, it Item, rev uint64) error {
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
func (r *Runner) finish(ctx context.Context, it Item, rev uint64, err error) error {
	d, derr := delivery(it)
	if derr != nil {
		return derr
	}
	d.MaxDeliver, d.NumDelivered = max(d.NumDelivered, 1), max(d.NumDelivered, 1) // the last delivery: no retry
	s := &script{answers: answers(it), fail: map[int]error{it.Attempt: err}}
	out := r.cfg.Inner.Handle(withScript(ctx, s), d)
	return r.store(ctx, it, out)
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

// store stores an outcome the loop decided, then drops the item.
func (r *Runner) store(ctx context.Context, it Item, out queue.Outcome) error {
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
	if _, err := queue.StoreOutcome(ctx, r.cfg.Conn, queue.HandedOutcome{MsgID: it.MsgID, JobID: it.JobID, SchemaToken: it.SchemaToken, Outcome: out, Input: inputDigest(it.Job)}, r.cfg.Stored); err != nil {
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
func (r *Runner) queue(ctx context.Context, it Item, rev uint64) error {
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

// delivery is the job of an item as a delivery for the loop.
func delivery(it Item) (*queue.Delivery, error) {
	job, err := job.Parse(it.Job)
	if err != nil {
		return nil, fmt.Errorf("reading the job of %s: %w", it.MsgID, err)
	}
	return &queue.Delivery{Job: job, Data: it.Job, SchemaToken: it.SchemaToken, MsgID: it.MsgID, NumDelivered: max(it.Deliveries, 1)}, nil
}
