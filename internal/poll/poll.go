// Package poll is the one way the tests wait for a condition that other
// goroutines or processes make true by themselves (a stream reaching a
// count, a child process writing a line, an index catching up): it checks
// the condition at a short, growing interval and fails the test, naming
// what it waited for, when the time runs out. A test whose code under test
// runs entirely on timers and channels uses testing/synctest instead.
package poll

import (
	"testing"
	"time"
)

const (
	firstInterval = time.Millisecond
	maxInterval   = 50 * time.Millisecond
)

// Until calls cond until it reports true. When within passes first (or
// the test's context ends), the test fails with what it waited for.
func Until(t testing.TB, within time.Duration, what string, cond func() bool) {
	t.Helper()
	UntilOK(t, within, what, func() error {
		if cond() {
			return nil
		}
		return errNotYet
	})
}

// UntilOK calls check until it returns nil. When within passes first (or
// the test's context ends), the test fails with what it waited for and the
// last error check returned, which says how far it got.
func UntilOK(t testing.TB, within time.Duration, what string, check func() error) {
	t.Helper()
	if err := Wait(t, within, check); err != nil {
		t.Fatalf("after %v, still waiting for %s: %v", within, what, err)
	}
}

// Wait calls check until it returns nil, and returns nil then; when within
// passes first (or the test's context ends) it returns check's last error.
// For tests that must do something before failing (print a child's log).
func Wait(t testing.TB, within time.Duration, check func() error) error {
	t.Helper()
	deadline := time.NewTimer(within)
	defer deadline.Stop()
	interval := firstInterval
	for {
		err := check()
		if err == nil {
			return nil
		}
		select {
		case <-deadline.C:
			return err
		case <-t.Context().Done():
			return err
		case <-time.After(interval):
		}
		interval = min(2*interval, maxInterval)
	}
}

type notYet struct{}

func (notYet) Error() string { return "the condition does not hold yet" }

var errNotYet error = notYet{}
