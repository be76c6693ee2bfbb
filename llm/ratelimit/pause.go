package ratelimit

import (
	"log/slog"
	"time"
)

// Pauser is a Fleet that shares pauses: a wait one member's provider
// asked for holds every member's calls until it ends. broker.Fleet is one
// (through its KV bucket). Pause must not block.
type Pauser interface {
	Fleet
	// Pause asks every member to hold its calls until until.
	Pause(until time.Time)
	// PausedUntil is the end of the latest pause of any member (the zero
	// time when none).
	PausedUntil() time.Time
}

// Pause holds every call of this process, and with a Pauser fleet of
// every member, until until: the provider asked for a wait (a 429 or 503
// with Retry-After), and a call sent before it ends would be refused too.
func (l *Limiter) Pause(until time.Time) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !until.After(l.hold) {
		return
	}
	l.hold = until
	l.cfg.Logger.Info("the provider asked to wait: pausing the model's calls",
		slog.String("provider", l.cfg.Provider), slog.Duration("wait", time.Until(until).Round(time.Millisecond)),
		slog.Bool("fleet", l.fleet != nil))
	if p, ok := l.fleet.(Pauser); ok {
		p.Pause(until)
	}
}
