// Package ctxwait waits for a while, or until a context is done.
package ctxwait

import (
	"context"
	"time"
)

// Sleep waits d, or until ctx is done and then returns ctx.Err(). A d of
// zero or less returns ctx.Err() at once.
func Sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
