package app

import (
	"context"
	"sync"

	"github.com/llmpipeline/pipeline/internal/broker"
)

// Watch holds the NATS connections a command opened and the cancel of its
// context: a connection that is lost (broker.Conn.Lost) cancels the
// command with its reason. Safe for concurrent use; the zero value is
// ready.
type Watch struct {
	mu     sync.Mutex
	conns  []*broker.Conn
	cancel context.CancelCauseFunc
}

// Start sets the cancel of the running command's context.
func (w *Watch) Start(cancel context.CancelCauseFunc) {
	w.mu.Lock()
	w.cancel = cancel
	w.mu.Unlock()
}

// Track registers a connection of the running command; it cancels the
// command when the connection is lost.
func (w *Watch) Track(ctx context.Context, conn *broker.Conn) {
	w.mu.Lock()
	w.conns = append(w.conns, conn)
	cancel := w.cancel
	w.mu.Unlock()
	if cancel == nil {
		return
	}
	go func() {
		select {
		case <-conn.Lost():
			cancel(conn.Err())
		case <-ctx.Done():
		}
	}()
}

// Lost is the error of the first tracked connection that was lost, or nil.
func (w *Watch) Lost() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, c := range w.conns {
		if err := c.Err(); err != nil {
			return err
		}
	}
	return nil
}
