package batch

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmpipeline/pipeline/llm"
)

// loop reads the batches' states every Poll (and at once on start):
// every process of the fleet polls every batch in the bucket, so batches a
// dead process created are read by the survivors or by its restart.
func (r *poller) loop(ctx context.Context) {
	t := time.NewTicker(r.cfg.Poll)
	defer t.Stop()
	for {
		if err := r.tick(ctx); err != nil && ctx.Err() == nil && !r.halt.stopped() {
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
func (r *Runner) Tick(ctx context.Context) error { return r.poll.tick(ctx) }

// tick polls once: the queued requests go to the gatherer, every batch in
// flight is read, and the done ones are settled. Every record read is
// counted for Census. Ticks run one at a time.
func (r *poller) tick(ctx context.Context) error {
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
			go r.gather.enqueue(ctx, q.it, q.rev)
		}
	}
	return errors.Join(errs...)
}

func (r *poller) pollOne(ctx context.Context, key string) error {
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
func (r *poller) collect(ctx context.Context, rec Record, rev uint64, st llm.BatchStatus) error {
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
func (r *poller) settleOne(ctx context.Context, rec Record, q Request, res *llm.BatchResult) error {
	it, irev, ok, err := r.waiting(ctx, rec, q)
	if err != nil || !ok {
		return err
	}
	return r.settle.answer(ctx, it, irev, res)
}

// waiting reads the item of request q of rec and reports whether it still
// waits on rec: batched in it under q's custom id. An item settled since
// (deleted), or moved on to another batch, does not.
func (r *poller) waiting(ctx context.Context, rec Record, q Request) (Item, uint64, bool, error) {
	it, irev, err := r.st.getItem(ctx, q.Item)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return it, 0, false, nil
	}
	if err != nil {
		return it, 0, false, err
	}
	return it, irev, it.State == itemBatched && it.Batch == rec.Key && it.CustomID == q.CustomID, nil
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
func (r *poller) sweep(ctx context.Context, rec Record, rev uint64) error {
	if rec.Status.Message == "swept" {
		return nil
	}
	for _, q := range rec.Requests {
		it, irev, ok, err := r.waiting(ctx, rec, q)
		if err != nil {
			return err
		}
		if !ok || it.FromDelivery {
			continue // a delivery never acked comes back by itself
		}
		if err := r.settle.requeue(ctx, it, irev, OutcomeRequeued); err != nil {
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
