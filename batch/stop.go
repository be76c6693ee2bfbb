package batch

import (
	"context"
	"sync"

	"github.com/llmpipeline/pipeline/internal/queue"
	"github.com/llmpipeline/pipeline/model"
)

// stops reports whether err is an account-level failure: no job caused
// it and no job can get past it (a refused key), so batch mode stops the
// run as the synchronous workers do: nothing is dead-lettered, every
// request stays where it is (queued, or in its batch at the provider)
// for the next run: a refused key, or an account with no credit left.
func stops(err error) bool {
	switch model.KindOf(err) {
	case model.KindAuth, model.KindNoCredit:
		return true
	}
	return false
}

// halt is the runner's stop: the first account-level failure, and a
// channel closed when it happened.
type halt struct {
	once sync.Once
	done chan struct{}
	err  error
}

func newHalt() *halt { return &halt{done: make(chan struct{})} }

// stop records err (the first one wins) and closes the channel.
func (h *halt) stop(err error) {
	h.once.Do(func() {
		h.err = err
		close(h.done)
	})
}

// stopped reports whether the runner stopped.
func (h *halt) stopped() bool {
	select {
	case <-h.done:
		return true
	default:
		return false
	}
}

// Stopped is closed when the runner stopped on an account-level failure
// (a refused key, on upload, while polling or reading results); Err says
// which. The workers should stop taking jobs then: Handle hands every
// delivery back (queue.ActionStop) from that moment.
func (r *Runner) Stopped() <-chan struct{} { return r.halt.done }

// Err is the account-level failure that stopped the runner, nil while it
// runs.
func (r *Runner) Err() error {
	if !r.halt.stopped() {
		return nil
	}
	return r.halt.err
}

// stopOn stops the runner if err is an account-level failure, and says
// whether it did.
func (r *core) stopOn(err error) bool {
	if err == nil || !stops(err) {
		return false
	}
	if !r.halt.stopped() {
		r.log.Error("batch mode stopped: the provider refused the account; nothing is dead-lettered, the jobs wait for the next run", "err", err)
	}
	r.halt.stop(err)
	return true
}

// stopOutcome hands a delivery back because the runner stopped.
func (r *core) stopOutcome() queue.Outcome {
	return queue.Outcome{Action: queue.ActionStop, Delay: defaultRetryDelay, Err: r.halt.err, Reason: "batch mode stopped: " + r.halt.err.Error()}
}

// untilStopped is ctx, cancelled too when the runner stops.
func (r *Runner) untilStopped(ctx context.Context) (context.Context, context.CancelFunc) {
	ctx, cancel := context.WithCancel(ctx)
	go func() {
		select {
		case <-r.halt.done:
			cancel()
		case <-ctx.Done():
		}
	}()
	return ctx, cancel
}
