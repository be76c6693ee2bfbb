package batch

import (
	"context"
	"fmt"
	"time"

	"github.com/llmpipeline/pipeline/heal"
	"github.com/llmpipeline/pipeline/llm"
)

// submit makes one batch of group. The order is what makes a crash at
// any point harmless:
//
//  1. every item is written as batched into the new key (a queued item by
//     compare-and-set, so two processes never take the same one);
//  2. the batch record is created as "submitting", naming every request;
//  3. the provider creates the batch (our key in its metadata);
//  4. the record becomes "submitted" with the provider's id;
//  5. the deliveries waiting on it are acked.
//
// A crash before 4 leaves the deliveries unacked: redelivered, they find
// their batch "submitting" and resolve it (adopt it if the provider has
// it, else abandon it and gather the job anew under new custom ids). A
// queued item of an abandoned record is queued again by the poller.
func (r *Runner) submit(ctx context.Context, group []*entry) {
	if r.limit.holding() || r.halt.stopped() {
		r.hold(ctx, group)
		return
	}
	now := r.cfg.Now().UTC()
	key := newKey(now)
	rec := Record{Key: key, Provider: r.cfg.Batcher.Provider(), Model: r.cfg.Model, State: StateSubmitting, Owner: r.owner, CreatedAt: now}
	var kept []*entry
	var reqs []llm.BatchRequest
	for _, e := range group {
		it := e.item
		it.State, it.Batch = itemBatched, key
		it.CustomID = customID(it.Key, it.Attempt, key)
		it.CustomIDs = append(it.CustomIDs, it.CustomID)
		it.FromDelivery = e.done != nil
		it.Updated = now
		rev, err := r.st.put(ctx, prefixItem+it.Key, it, e.rev, false)
		if err != nil {
			if conflict(err) {
				r.log.Debug("queued request taken by another process", "item", it.Key)
			} else {
				r.log.Warn("recording a request of a new batch failed; it waits for the next one", "item", it.Key, "err", err)
			}
			r.release(e, fmt.Errorf("recording the request: %w", err))
			continue
		}
		e.item, e.rev = it, rev
		kept = append(kept, e)
		rec.Requests = append(rec.Requests, Request{Item: it.Key, CustomID: it.CustomID, Attempt: it.Attempt})
		reqs = append(reqs, llm.BatchRequest{CustomID: it.CustomID, Request: e.req})
	}
	if len(kept) == 0 {
		return
	}
	recRev, err := r.st.put(ctx, prefixBatch+key, rec, 0, true)
	if err != nil {
		r.fail(ctx, kept, fmt.Errorf("recording batch %s: %w", key, err))
		return
	}
	r.changed(rec, recRev)
	st, err := r.cfg.Batcher.Create(ctx, key, reqs)
	if err != nil && model.KindOf(err) == model.KindTransport {
		// The create may have gone through with its answer lost.
		if found, ok, ferr := r.cfg.Batcher.Find(ctx, key); ferr == nil && ok {
			st, err = found, nil
		}
	}
	if err != nil {
		rec.State, rec.EndedAt, rec.Status.Message = StateAbandoned, r.cfg.Now().UTC(), err.Error()
		if rev, perr := r.st.put(ctx, prefixBatch+key, rec, recRev, false); perr != nil {
			r.log.Warn("marking a batch that was not created", "batch", key, "err", perr)
		} else {
			r.changed(rec, rev)
		}
		r.fail(ctx, kept, fmt.Errorf("creating batch %s: %w", key, err))
		r.stopOn(err)
		return
	}
	rec.State, rec.ProviderID, rec.Status = StateSubmitted, st.ID, st
	recRev, err = r.st.put(ctx, prefixBatch+key, rec, recRev, false)
	if err != nil {
		// Another process resolved the record meanwhile (it took us for
		// dead): its decision stands, and this batch is withdrawn.
		r.log.Warn("batch record changed before it was marked submitted; cancelling the batch", "batch", key, "id", st.ID, "err", err)
		if _, cerr := r.cfg.Batcher.Cancel(context.WithoutCancel(ctx), st.ID); cerr != nil {
			r.log.Warn("cancelling a withdrawn batch", "id", st.ID, "err", cerr)
		}
		r.fail(ctx, kept, fmt.Errorf("recording batch %s: %w", key, err))
		return
	}
	r.changed(rec, recRev)
	r.log.Info("batch submitted", "batch", key, "provider", rec.Provider, "id", st.ID, "requests", len(kept))
	for _, e := range kept {
		if e.done == nil {
			r.census.queue(-1) // from the queue into this batch
			if err := r.st.kv.Delete(ctx, prefixQueue+e.item.Key); err != nil {
				r.log.Debug("deleting a queue marker", "item", e.item.Key, "err", err)
			}
		}
		r.release(e, nil)
	}
}

// hold keeps a gathered group out of any batch while the runner holds
// (the enqueued-token limit) or has stopped: a delivery's request is
// parked in the queue (its delivery acked), unless the runner stopped
// (the delivery is handed back); a queued request stays queued.
func (r *Runner) hold(ctx context.Context, group []*entry) {
	for _, e := range group {
		if e.done == nil {
			r.release(e, nil) // still queued: the poller offers it again
			continue
		}
		if r.halt.stopped() {
			r.release(e, r.halt.err)
			continue
		}
		if err := r.park(ctx, e.item); err != nil {
			r.release(e, fmt.Errorf("queueing the request: %w", err))
			continue
		}
		r.release(e, nil)
	}
}

// fail hands the entries of a batch that was not created back: a
// delivery is naked (its item is dropped: the redelivery starts afresh),
// a queued item stays queued for the next batch.
func (r *Runner) fail(ctx context.Context, kept []*entry, err error) {
	r.log.Warn("batch not submitted; its requests wait for the next one", "err", err)
	for _, e := range kept {
		if e.done != nil {
			if derr := r.st.kv.Delete(ctx, prefixItem+e.item.Key); derr != nil {
				r.log.Debug("dropping the item of a delivery handed back", "item", e.item.Key, "err", derr)
			}
		} else {
			it := e.item
			it.State, it.Batch, it.Updated = itemQueued, "", r.cfg.Now().UTC()
			if _, perr := r.st.put(ctx, prefixItem+it.Key, it, e.rev, false); perr != nil {
				r.log.Warn("queueing a request again", "item", it.Key, "err", perr)
			}
		}
		r.release(e, err)
	}
}

// enqueue offers a queued item to the gatherer, its request rebuilt by
// the loop from the answers so far.
func (r *Runner) enqueue(ctx context.Context, it Item, rev uint64) {
	r.mu.Lock()
	if r.pending[it.Key] {
		r.mu.Unlock()
		return
	}
	r.pending[it.Key] = true
	r.mu.Unlock()
	req, err := r.request(ctx, it)
	if err != nil {
		r.log.Warn("rebuilding a queued request", "item", it.Key, "err", err)
		r.mu.Lock()
		delete(r.pending, it.Key)
		r.mu.Unlock()
		return
	}
	e := &entry{item: it, rev: rev, req: req}
	e.size, _ = r.cfg.Batcher.Size(llm.BatchRequest{CustomID: customID(it.Key, it.Attempt, newKey(time.Now())), Request: req})
	select {
	case r.in <- e:
	case <-ctx.Done():
		r.release(e, ctx.Err())
	}
}

// request is the request of an item's current attempt, as the loop builds
// it after the recorded answers.
func (r *Runner) request(ctx context.Context, it Item) (model.Request, error) {
	s := &script{answers: answers(it), capture: true}
	d, err := delivery(it)
	if err != nil {
		return model.Request{}, err
	}
	r.cfg.Inner.Handle(withScript(ctx, s), d)
	if s.captured == nil || s.captured.Attempt != it.Attempt {
		return model.Request{}, fmt.Errorf("the loop did not ask for attempt %d of %s", it.Attempt, it.MsgID)
	}
	return *s.captured, nil
}

func answers(it Item) map[int]model.Response {
	m := make(map[int]model.Response, len(it.Answers))
	for i, a := range it.Answers {
		m[i+1] = a
	}
	return m
}
