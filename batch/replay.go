package batch

import (
	"context"

	"github.com/llmpipeline/pipeline/heal"
	"github.com/llmpipeline/pipeline/worker"
)

// Replay is the model the heal loop calls in batch mode. Outside a batch
// step it is the synchronous model. Inside one (a context from withScript)
// it answers the attempts the batches already answered with their recorded
// answers, and the first attempt it has no answer for is either captured
// (to go into the next batch; the loop sees a transport error and stops)
// or, for heal turns sent synchronously, passed to the synchronous model.
// So the loop, its prompts, its judge and its verdicts are the very ones
// the synchronous path runs: nothing of it is copied here.
type Replay struct {
	Sync model.Model
}

var _ model.Model = (*Replay)(nil)

// Complete implements model.Model.
func (r *Replay) Complete(ctx context.Context, req model.Request) (model.Response, error) {
	s, _ := ctx.Value(scriptKey{}).(*script)
	if s == nil {
		return r.Sync.Complete(ctx, req)
	}
	if a, ok := s.answers[req.Attempt]; ok {
		return a, nil
	}
	if err, ok := s.fail[req.Attempt]; ok {
		return model.Response{}, err
	}
	if s.capture {
		c := req
		s.captured = &c
		return model.Response{}, errQueued
	}
	return r.Sync.Complete(ctx, req)
}

// errQueued ends a loop whose next attempt went into a batch.
var errQueued = &model.Error{Kind: model.KindTransport, Provider: "batch", Message: "attempt queued for a provider batch"}

type scriptKey struct{}

// script is one replay of a job's loop.
type script struct {
	answers map[int]model.Response
	fail    map[int]error
	// capture: an attempt without an answer is captured, not sent.
	capture  bool
	captured *model.Request
}

// withScript puts the script in ctx for the Replay, and tells the
// synchronous handler which attempts the batches answered (so it records
// them as batch attempts, priced with the batch discount).
func withScript(ctx context.Context, s *script) context.Context {
	ctx = worker.WithBatched(ctx, func(n int) bool { _, ok := s.answers[n]; return ok })
	return context.WithValue(ctx, scriptKey{}, s)
}
