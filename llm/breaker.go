package llm

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmpipeline/pipeline/heal"
)

// Breaker states.
const (
	StateClosed   = "closed"
	StateOpen     = "open"
	StateHalfOpen = "half-open"
)

// BreakerConfig configures a Breaker. Zero fields take their defaults.
type BreakerConfig struct {
	// Threshold is how many consecutive transport failures open the
	// breaker (default 5).
	Threshold int
	// Cooldown is how long the breaker stays open before it lets one call
	// through (default 10s).
	Cooldown time.Duration
	// Logger receives state changes. Nil discards.
	Logger *slog.Logger
	// OnState, when set, is called with the new state on every change
	// (for a metrics gauge). It runs with the breaker's lock held, in the
	// order of the changes: it may call State but no other method.
	OnState func(state string)
}

// Breaker is a circuit breaker around one provider's Model. After Threshold
// consecutive transport failures (each one a Complete that failed after its
// own retries) it opens: calls fail at once with a transport error and Wait
// blocks. After Cooldown it is half-open: one call goes through as a probe
// while other callers wait for its outcome; success closes the breaker, a
// transport failure opens it again. Any answer or non-transport error
// resets the count. Safe for concurrent use.
type Breaker struct {
	m        model.Model
	provider string
	cfg      BreakerConfig

	state atomic.Int32 // read without the lock by State

	mu        sync.Mutex
	failures  int
	openUntil time.Time
	probing   bool
	changed   chan struct{} // closed and replaced on every state change or probe end
}

const (
	stClosed int32 = iota
	stOpen
	stHalfOpen
)

var stateNames = [...]string{StateClosed, StateOpen, StateHalfOpen}

var _ model.Model = (*Breaker)(nil)

// NewBreaker wraps m. The provider named in its errors is m's Provider()
// when m has that method.
func NewBreaker(m model.Model, cfg BreakerConfig) *Breaker {
	if cfg.Threshold <= 0 {
		cfg.Threshold = 5
	}
	if cfg.Cooldown <= 0 {
		cfg.Cooldown = 10 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	b := &Breaker{m: m, cfg: cfg, provider: "model", changed: make(chan struct{})}
	if p, ok := m.(interface{ Provider() string }); ok {
		b.provider = p.Provider()
	}
	return b
}

// Provider is the wrapped model's provider name.
func (b *Breaker) Provider() string { return b.provider }

// State returns "closed", "open" or "half-open". An open breaker whose
// cool-down has passed reports "open" until a call or a Wait moves it.
func (b *Breaker) State() string { return stateNames[b.state.Load()] }

// setState changes the state; b.mu must be held.
func (b *Breaker) setState(s int32) {
	if b.state.Load() == s {
		return
	}
	b.state.Store(s)
	b.signal()
	name := stateNames[s]
	switch s {
	case stOpen:
		b.cfg.Logger.Warn("llm circuit breaker open", slog.String("provider", b.provider),
			slog.Int("consecutive_transport_failures", b.failures), slog.Duration("cooldown", b.cfg.Cooldown))
	default:
		b.cfg.Logger.Info("llm circuit breaker "+name, slog.String("provider", b.provider))
	}
	if b.cfg.OnState != nil {
		b.cfg.OnState(name)
	}
}

// signal wakes every waiter; b.mu must be held.
func (b *Breaker) signal() {
	close(b.changed)
	b.changed = make(chan struct{})
}

// Wait blocks while the breaker is open, or half-open with its probe in
// flight, and returns nil once a call may go through (or ctx's error). The
// worker calls it before fetching jobs.
func (b *Breaker) Wait(ctx context.Context) error {
	for {
		b.mu.Lock()
		var wait time.Duration
		switch b.state.Load() {
		case stClosed:
			b.mu.Unlock()
			return nil
		case stHalfOpen:
			if !b.probing {
				b.mu.Unlock()
				return nil
			}
		case stOpen:
			wait = time.Until(b.openUntil)
			if wait <= 0 {
				b.setState(stHalfOpen)
				b.mu.Unlock()
				return nil
			}
		}
		ch := b.changed
		b.mu.Unlock()
		var t *time.Timer
		var timer <-chan time.Time
		if wait > 0 {
			t = time.NewTimer(wait)
			timer = t.C
		}
		select {
		case <-ctx.Done():
		case <-ch:
		case <-timer:
		}
		if t != nil {
			t.Stop()
		}
		if err := ctx.Err(); err != nil {
			return err
		}
	}
}

// Complete calls the wrapped model unless the breaker is open.
func (b *Breaker) Complete(ctx context.Context, req model.Request) (model.Response, error) {
	probe := false
	for {
		b.mu.Lock()
		s := b.state.Load()
		if s == stOpen {
			if time.Now().Before(b.openUntil) {
				b.mu.Unlock()
				return model.Response{}, &model.Error{Kind: model.KindTransport, Provider: b.provider,
					Message: "circuit breaker open after repeated transport failures"}
			}
			b.setState(stHalfOpen)
			s = stHalfOpen
		}
		if s == stClosed {
			b.mu.Unlock()
			break
		}
		// Half-open: the first caller probes, the others wait for its outcome.
		if !b.probing {
			b.probing = true
			probe = true
			b.mu.Unlock()
			break
		}
		ch := b.changed
		b.mu.Unlock()
		select {
		case <-ctx.Done():
			return model.Response{}, ctx.Err()
		case <-ch:
		}
	}
	resp, err := b.m.Complete(ctx, req)
	b.record(err, probe)
	return resp, err
}

// record counts the outcome of a call.
func (b *Breaker) record(err error, probe bool) {
	b.mu.Lock()
	defer b.mu.Unlock()
	transport := model.KindOf(err) == model.KindTransport
	cancelled := err != nil && model.KindOf(err) == "" && ctxError(err)
	if probe {
		b.probing = false
	}
	switch {
	case cancelled:
		// The caller gave up: says nothing about the provider.
		if probe {
			b.signal() // let a waiter probe instead
		}
	case transport:
		b.failures++
		if probe || b.failures >= b.cfg.Threshold {
			b.openUntil = time.Now().Add(b.cfg.Cooldown)
			b.setState(stOpen)
		}
	default:
		b.failures = 0
		b.setState(stClosed)
	}
}
