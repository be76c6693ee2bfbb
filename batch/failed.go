package batch

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/llmpipeline/pipeline/llm"
	"github.com/llmpipeline/pipeline/model"
)

// bytesPerToken is how batch mode estimates a request's tokens from the
// bytes of its line: four bytes a token, the line's JSON included, so the
// estimate is above the provider's count of the prompt.
const bytesPerToken = 4

// tokensOf is the estimated tokens of requests of n bytes.
func tokensOf(n int64) int { return int((n + bytesPerToken - 1) / bytesPerToken) }

// limit is what this process learned of the provider's enqueued-token
// limit (OpenAI's token_limit_exceeded): while holding, no batch is
// submitted and requests wait in the queue, until no batch of the
// provider is in flight in the fleet; tokens and size cap every batch
// from then on.
type limit struct {
	mu     sync.Mutex
	hold   bool
	tokens int // the enqueued-token limit the provider named (0: none)
	size   int // the most requests a batch may carry (0: no cap)

	// What the running poll read of the fleet's records (polls run one at
	// a time): when the latest token_limit_exceeded failure ended, the
	// limit it named, and when each batch in flight was created.
	failedAt time.Time
	failed   map[string]bool // keys of the token-limited batches read
	named    int
	inFlight map[string]time.Time
}

// begin starts a poll's reading.
func (l *limit) begin() {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.failedAt, l.named, l.failed, l.inFlight = time.Time{}, 0, map[string]bool{}, map[string]time.Time{}
}

// read notes a record of the bucket, as the poll reads it.
func (l *limit) read(rec Record, provider string) {
	if rec.Provider != provider {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.inFlight == nil {
		l.failed, l.inFlight = map[string]bool{}, map[string]time.Time{}
	}
	if kindOf(rec).InFlight() {
		l.inFlight[rec.Key] = rec.CreatedAt
	}
	// A failed batch's status is in its record from the moment it is
	// being read (collecting), before its requests are queued again.
	if (rec.State == StateCollecting || rec.State == StateEnded) && rec.Status.State == llm.BatchFailed && tokenLimited(rec.Status) {
		l.failed[rec.Key] = true
		// The provider's failed_at is in whole seconds: the lease, taken
		// when the failure was read, is the later and finer time.
		at := rec.Status.EndedAt
		if rec.LeaseAt.After(at) {
			at = rec.LeaseAt
		}
		if at.After(l.failedAt) {
			l.failedAt = at
		}
		for _, e := range rec.Status.Errors {
			if n, ok := llm.EnqueuedTokenLimit(e.Message); ok {
				l.named = max(l.named, n)
			}
		}
	}
}

// fleetHold applies what the poll read of the fleet's batches: any
// process's token_limit_exceeded failure holds this one too while a
// batch created before that failure is still in flight, and the limit it
// named caps this process's batches.
func (r *poller) fleetHold() {
	l := &r.limit
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.named > 0 && l.tokens == 0 {
		l.tokens = l.named
	}
	if l.hold || l.failedAt.IsZero() {
		return
	}
	for key, created := range l.inFlight {
		if !l.failed[key] && !created.After(l.failedAt) {
			l.hold = true
			r.log.Info("another process's batch failed for the enqueued-token limit: no batch is submitted until the batches in flight have finished")
			return
		}
	}
}

func (l *limit) holding() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.hold
}

// caps are the most requests (at most size) and tokens (0: any) a batch
// may take now.
func (l *limit) caps(size int) (int, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.size > 0 {
		size = min(size, l.size)
	}
	return size, l.tokens * 9 / 10
}

// collectFailed settles a batch the provider failed as a whole; the
// provider's error code decides:
//
//   - token_limit_exceeded: the organisation's enqueued-token limit. Not
//     the requests' fault: they are queued again at no cost to their
//     attempts, and no batch is submitted until the fleet's batches in
//     flight have finished; batches are kept under the limit the message
//     names. A batch that failed so with no other in flight was too big:
//     without a named limit, batches are halved; a lone request is then
//     over the limit by itself, and dead-lettered as request_error.
//   - any other code (a validation error): a request whose line the
//     provider names is dead-lettered as request_error with the
//     provider's message; the others of the batch are queued again at no
//     cost. Errors that name no line send every request once more; a
//     request refused so twice is dead-lettered.
func (r *poller) collectFailed(ctx context.Context, rec Record, rev uint64, st llm.BatchStatus) error {
	var note string
	var err error
	if tokenLimited(st) {
		note, err = r.tokenLimited(ctx, rec, st)
	} else {
		note, err = r.refused(ctx, rec, st)
	}
	if err != nil {
		return err // the lease is ours: the next tick settles the rest
	}
	rec.State, rec.EndedAt, rec.Note = StateEnded, r.cfg.Now().UTC(), note
	rev, err = r.st.put(ctx, prefixBatch+rec.Key, rec, rev, false)
	if err != nil && !conflict(err) {
		return err
	}
	if err == nil {
		r.changed(rec, rev)
	}
	r.log.Warn("batch failed at the provider", "batch", rec.Key, "id", rec.ProviderID, "reason", st.Message, "done", note)
	return nil
}

func tokenLimited(st llm.BatchStatus) bool {
	for _, e := range st.Errors {
		if e.Code == llm.BatchErrTokenLimit {
			return true
		}
	}
	return false
}

// tokenLimited handles a token_limit_exceeded batch.
func (r *poller) tokenLimited(ctx context.Context, rec Record, st llm.BatchStatus) (string, error) {
	others := r.othersInFlight(rec.Key)
	named := 0
	for _, e := range st.Errors {
		if n, ok := llm.EnqueuedTokenLimit(e.Message); ok {
			named = n
		}
	}
	alone := others == 0
	if alone && len(rec.Requests) == 1 {
		msg := st.Message
		for _, e := range st.Errors {
			if e.Code == llm.BatchErrTokenLimit {
				msg = e.Code + ": " + e.Message
			}
		}
		n, err := r.each(ctx, rec, func(it Item, irev uint64, _ int) error {
			return r.settle.finish(ctx, it, irev, &model.Error{Kind: model.KindRequest, Provider: rec.Provider,
				Message: msg + " (the request alone, with no other batch in flight)"})
		})
		return fmt.Sprintf("%d request dead-lettered: over the enqueued-token limit by itself", n), err
	}
	r.limit.mu.Lock()
	r.limit.hold = !alone
	if named > 0 {
		r.limit.tokens = named
	} else if alone {
		r.limit.size = max(len(rec.Requests)/2, 1)
	}
	capTokens, capSize := r.limit.tokens, r.limit.size
	r.limit.mu.Unlock()
	n, err := r.each(ctx, rec, func(it Item, irev uint64, _ int) error {
		return r.settle.requeue(ctx, it, irev, OutcomeRequeued)
	})
	var parts []string
	if alone {
		parts = append(parts, fmt.Sprintf("%d requests re-sent in smaller batches", n))
	} else {
		parts = append(parts, fmt.Sprintf("%d requests re-sent once the batches in flight (%d) have finished", n, others))
	}
	if capTokens > 0 {
		parts = append(parts, fmt.Sprintf("batches kept under %d tokens", capTokens*9/10))
	} else if capSize > 0 {
		parts = append(parts, fmt.Sprintf("batches of at most %d requests", capSize))
	}
	return strings.Join(parts, ", "), err
}

// refused handles a batch failed for validation errors.
func (r *poller) refused(ctx context.Context, rec Record, st llm.BatchStatus) (string, error) {
	byLine := map[int]llm.BatchError{}
	var general []llm.BatchError
	for _, e := range st.Errors {
		if e.Line > 0 && e.Line <= len(rec.Requests) {
			if _, ok := byLine[e.Line]; !ok {
				byLine[e.Line] = e
			}
		} else {
			general = append(general, e)
		}
	}
	if len(st.Errors) == 0 {
		general = append(general, llm.BatchError{Code: "failed", Message: "the provider failed the batch without a reason"})
	}
	var dead, again, free int
	_, err := r.each(ctx, rec, func(it Item, irev uint64, line int) error {
		if e, ok := byLine[line]; ok {
			dead++
			return r.settle.finish(ctx, it, irev, refusal(rec.Provider, e))
		}
		if len(general) == 0 {
			free++ // another request was refused, not this one
			return r.settle.requeue(ctx, it, irev, OutcomeRequeued)
		}
		it.Refused++
		if it.Refused > 1 {
			dead++
			return r.settle.finish(ctx, it, irev, refusal(rec.Provider, general[0]))
		}
		again++
		return r.settle.requeue(ctx, it, irev, OutcomeRetry)
	})
	parts := []string{fmt.Sprintf("%d dead-lettered (request_error)", dead)}
	if again > 0 {
		parts = append(parts, fmt.Sprintf("%d sent once more", again))
	}
	if free > 0 {
		parts = append(parts, fmt.Sprintf("%d re-sent (not refused)", free))
	}
	return strings.Join(parts, ", "), err
}

// refusal is the dead letter's error for a request the provider refused.
func refusal(provider string, e llm.BatchError) error {
	msg := e.Code + ": " + e.Message
	if e.Param != "" {
		msg += " (param " + e.Param + ")"
	}
	if e.Line > 0 {
		msg += fmt.Sprintf(" (line %d of the batch)", e.Line)
	}
	return &model.Error{Kind: model.KindRequest, Provider: provider, StatusCode: 400, Message: msg}
}

// each calls fn with every request of rec still waiting on it (its item
// batched in rec under its custom id) and its line in the input (1 is the
// first), and counts them.
func (r *poller) each(ctx context.Context, rec Record, fn func(it Item, rev uint64, line int) error) (int, error) {
	n := 0
	for i, q := range rec.Requests {
		it, irev, ok, err := r.waiting(ctx, rec, q)
		if err != nil {
			return n, err
		}
		if !ok {
			continue
		}
		n++
		if err := fn(it, irev, i+1); err != nil {
			return n, err
		}
	}
	return n, nil
}

// othersInFlight counts the batches of the provider in flight in the
// fleet, but key, as the census last counted them.
func (r *poller) othersInFlight(key string) int {
	r.census.mu.Lock()
	defer r.census.mu.Unlock()
	n := 0
	for k, s := range r.census.recs {
		if k != key && s.kind.Provider == r.cfg.Batcher.Provider() && s.kind.InFlight() {
			n++
		}
	}
	return n
}

// releaseHold ends the hold once no other batch of the provider is in
// flight (called after each poll).
func (r *poller) releaseHold() {
	if !r.limit.holding() || r.othersInFlight("") > 0 {
		return
	}
	r.limit.mu.Lock()
	r.limit.hold = false
	r.limit.mu.Unlock()
	r.log.Info("no batch in flight any more: the requests held for the enqueued-token limit go into new batches")
}
