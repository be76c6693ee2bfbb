package ratelimit

import (
	"context"

	"github.com/llmpipeline/pipeline/heal"
)

// Model is a model.Model whose calls wait for a Limiter first. The wait
// comes before the call, so it never counts against the call's request
// timeout; it ends early with ctx's error.
type Model struct {
	m        model.Model
	l        *Limiter
	provider string
}

var _ model.Model = (*Model)(nil)

// Wrap returns m limited by l.
func (l *Limiter) Wrap(m model.Model) *Model {
	w := &Model{m: m, l: l, provider: l.cfg.Provider}
	if p, ok := m.(interface{ Provider() string }); ok {
		w.provider = p.Provider()
	}
	return w
}

// Provider is the wrapped model's provider name.
func (w *Model) Provider() string { return w.provider }

// Complete waits for the limiter, calls the model, and corrects the token
// bucket with the usage the answer reports.
func (w *Model) Complete(ctx context.Context, req model.Request) (model.Response, error) {
	est := w.l.estimate(req)
	waited, err := w.l.Wait(ctx, est)
	if waited > 0 && w.l.cfg.OnWait != nil {
		w.l.cfg.OnWait(waited)
	}
	if err != nil {
		return model.Response{}, err
	}
	resp, err := w.m.Complete(ctx, req)
	// The first call's end opens the way for the others even when no
	// answer came (Observe opens it on the first answer).
	w.l.answered()
	if err == nil {
		w.l.Settle(est, resp.Usage.Total())
	}
	return resp, err
}
