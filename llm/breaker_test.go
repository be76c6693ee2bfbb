package llm

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/heal"
)

// funcModel is a model.Model whose answers the test decides call by call.
type funcModel struct {
	calls atomic.Int32
	fn    func(ctx context.Context, n int) (model.Response, error)
}

func (m *funcModel) Complete(ctx context.Context, _ model.Request) (model.Response, error) {
	n := int(m.calls.Add(1))
	return m.fn(ctx, n)
}

func (m *funcModel) Provider() string { return "fake" }

var errTransport = &model.Error{Kind: model.KindTransport, Provider: "fake", StatusCode: 503, Message: "overloaded"}

// stateLog records OnState calls.
type stateLog struct {
	mu     sync.Mutex
	states []string
}

func (l *stateLog) add(s string) { l.mu.Lock(); l.states = append(l.states, s); l.mu.Unlock() }

func (l *stateLog) get() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.states)
}

func TestBreakerOpensAfterConsecutiveTransportFailures(t *testing.T) {
	t.Parallel()
	m := &funcModel{fn: func(context.Context, int) (model.Response, error) { return model.Response{}, errTransport }}
	var log stateLog
	b := NewBreaker(m, BreakerConfig{Threshold: 3, Cooldown: time.Hour, OnState: log.add})
	for i := range 3 {
		if b.State() != StateClosed {
			t.Fatalf("open after %d failures", i)
		}
		if _, err := b.Complete(t.Context(), model.Request{}); model.KindOf(err) != model.KindTransport {
			t.Fatalf("err = %v", err)
		}
	}
	if b.State() != StateOpen || !slices.Equal(log.get(), []string{StateOpen}) {
		t.Fatalf("state %s, changes %v", b.State(), log.get())
	}
	_, err := b.Complete(t.Context(), model.Request{})
	var he *model.Error
	if !errors.As(err, &he) || he.Kind != model.KindTransport || he.Provider != "fake" {
		t.Fatalf("open breaker returned %v, want a transport error", err)
	}
	if n := m.calls.Load(); n != 3 {
		t.Fatalf("the model was called %d times, want 3 (not while open)", n)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if err := b.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Wait on an open breaker = %v, want it to block until ctx ends", err)
	}
}

func TestBreakerCountsOnlyConsecutiveTransportFailures(t *testing.T) {
	t.Parallel()
	script := []error{errTransport, errTransport, &model.Error{Kind: model.KindRequest, Provider: "fake"}, errTransport, errTransport,
		nil, errTransport, errTransport, context.Canceled, errTransport}
	m := &funcModel{fn: func(_ context.Context, n int) (model.Response, error) { return model.Response{}, script[n-1] }}
	b := NewBreaker(m, BreakerConfig{Threshold: 3, Cooldown: time.Hour})
	for i := range script {
		_, _ = b.Complete(t.Context(), model.Request{})
		if i < len(script)-1 && b.State() != StateClosed {
			t.Fatalf("opened at call %d", i+1)
		}
	}
	// The cancelled call neither counted nor reset: three in a row now.
	if b.State() != StateOpen {
		t.Fatalf("state %s after three transport failures around a cancelled call", b.State())
	}
	if err := b.Wait(canceledContext()); !errors.Is(err, context.Canceled) {
		t.Fatalf("Wait = %v", err)
	}
}

func canceledContext() context.Context {
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	return ctx
}

func TestBreakerHalfOpenLetsOneCallThrough(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name       string
		probe      error
		wantStates []string
		wantFinal  string
	}{
		{"probe succeeds: closed", nil, []string{StateOpen, StateHalfOpen, StateClosed}, StateClosed},
		{"probe fails: open again", errTransport, []string{StateOpen, StateHalfOpen, StateOpen}, StateOpen},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			release := make(chan struct{})
			entered := make(chan struct{}, 4)
			m := &funcModel{fn: func(_ context.Context, n int) (model.Response, error) {
				if n == 1 {
					return model.Response{}, errTransport
				}
				entered <- struct{}{}
				<-release
				if n == 2 {
					return model.Response{Content: "{}"}, tt.probe
				}
				return model.Response{Content: "{}"}, nil
			}}
			var log stateLog
			b := NewBreaker(m, BreakerConfig{Threshold: 1, Cooldown: 10 * time.Millisecond, OnState: log.add})
			_, _ = b.Complete(t.Context(), model.Request{})
			if b.State() != StateOpen {
				t.Fatalf("state %s after the threshold", b.State())
			}
			if err := b.Wait(t.Context()); err != nil { // returns once the cool-down is over
				t.Fatal(err)
			}
			if b.State() != StateHalfOpen {
				t.Fatalf("state %s after the cool-down", b.State())
			}
			probeDone := make(chan error, 1)
			go func() { _, err := b.Complete(t.Context(), model.Request{}); probeDone <- err }()
			<-entered // the probe is in flight
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
			defer cancel()
			if err := b.Wait(ctx); !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("Wait during the probe = %v, want it to block", err)
			}
			otherDone := make(chan error, 1)
			go func() { _, err := b.Complete(t.Context(), model.Request{}); otherDone <- err }()
			close(release)
			if err := <-probeDone; !errors.Is(err, tt.probe) {
				t.Fatalf("probe err = %v", err)
			}
			other := <-otherDone
			if got := log.get(); !slices.Equal(got, tt.wantStates) || b.State() != tt.wantFinal {
				t.Fatalf("states %v final %s, want %v %s", got, b.State(), tt.wantStates, tt.wantFinal)
			}
			switch tt.wantFinal {
			case StateClosed:
				if other != nil || m.calls.Load() != 3 {
					t.Fatalf("waiting call: err %v, model calls %d; want it through after the probe", other, m.calls.Load())
				}
			case StateOpen:
				if model.KindOf(other) != model.KindTransport || m.calls.Load() != 2 {
					t.Fatalf("waiting call: err %v, model calls %d; want refused while open again", other, m.calls.Load())
				}
			}
		})
	}
}
