package poll

import (
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// recorder is a testing.TB that records a failure instead of ending the
// test, so the helper's own failures can be asserted.
type recorder struct {
	testing.TB
	failed string
}

func (r *recorder) Helper() {}

func (r *recorder) Fatalf(format string, args ...any) { r.failed = fmt.Sprintf(format, args...) }

func TestUntilReturnsOnceTheConditionHolds(t *testing.T) {
	var calls atomic.Int32
	r := &recorder{TB: t}
	Until(r, 10*time.Second, "three calls", func() bool { return calls.Add(1) >= 3 })
	if r.failed != "" {
		t.Fatalf("failed: %s", r.failed)
	}
	if n := calls.Load(); n != 3 {
		t.Errorf("cond was called %d times, want 3 (it must stop as soon as it holds)", n)
	}
}

func TestUntilFailsNamingWhatItWaitedFor(t *testing.T) {
	r := &recorder{TB: t}
	Until(r, 20*time.Millisecond, "the index to hold 5 rows", func() bool { return false })
	if !strings.Contains(r.failed, "the index to hold 5 rows") || !strings.Contains(r.failed, "20ms") {
		t.Errorf("failure %q does not name what it waited for and how long", r.failed)
	}
}

func TestUntilOKReportsTheLastError(t *testing.T) {
	r := &recorder{TB: t}
	n := 0
	UntilOK(r, 20*time.Millisecond, "rows", func() error { n++; return fmt.Errorf("%d of 5 rows", min(n, 4)) })
	if !strings.Contains(r.failed, "4 of 5 rows") {
		t.Errorf("failure %q does not carry the last error", r.failed)
	}
}

func TestWaitReturnsNilOrTheLastError(t *testing.T) {
	if err := Wait(t, time.Second, func() error { return nil }); err != nil {
		t.Errorf("Wait = %v, want nil", err)
	}
	want := errors.New("never")
	if err := Wait(t, 5*time.Millisecond, func() error { return want }); !errors.Is(err, want) {
		t.Errorf("Wait = %v, want %v", err, want)
	}
}
