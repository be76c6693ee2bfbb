package ratelimit

import (
	"context"
	"encoding/json"
	"fmt"
	"time"
)

// Learned is what a provider's successful answers said of its limits:
// whether they carry rate-limit headers at all, and the per-minute limits
// of its request and token families (0: not announced). It is what one
// run hands the next through a Memory, so that a process restarted on a
// data dir that has run before does not probe a provider it already
// knows one call at a time.
type Learned struct {
	Headers           bool  `json:"headers"`
	RequestsPerMinute int64 `json:"requests_per_minute,omitempty"`
	TokensPerMinute   int64 `json:"tokens_per_minute,omitempty"`
}

// learnedFrom is what a response's headers say (only a 2xx answer is
// evidence: an error page may come from a proxy that sends no headers).
func learnedFrom(hd Headers) Learned {
	k := Learned{Headers: hd.Known()}
	if hd.Requests.Known {
		k.RequestsPerMinute = hd.Requests.Limit
	}
	if hd.Tokens.Known {
		k.TokensPerMinute = hd.Tokens.Limit
	}
	return k
}

// Memory keeps Learned values between runs and across a fleet, under a
// limit key (Key): broker.ProviderLimits, a NATS KV bucket. Get reports
// false for a key it does not hold.
type Memory interface {
	Get(ctx context.Context, key string) ([]byte, bool, error)
	Put(ctx context.Context, key string, value []byte) error
}

// memoryTimeout bounds the write of what was learned: it runs in the
// answer's path (once a run, when nothing changes), and a broker that
// does not answer must not hold the answer long.
const memoryTimeout = 5 * time.Second

// Remember makes mem the limiter's memory under key. What mem holds is
// recalled at once (Recall) when the provider has not answered yet, and
// whatever later answers teach that differs from it is written back. A
// memory that cannot be read is an error; the limiter then probes as
// without one.
func (l *Limiter) Remember(ctx context.Context, mem Memory, key string) error {
	raw, ok, err := mem.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("reading what %s's answers said of its limits: %w", l.cfg.Provider, err)
	}
	var k Learned
	if ok {
		if err := json.Unmarshal(raw, &k); err != nil {
			return fmt.Errorf("reading what %s's answers said of its limits: %w", l.cfg.Provider, err)
		}
	}
	l.mu.Lock()
	l.mem, l.memKey = mem, key
	if ok {
		l.known, l.haveKnown = k, true
	}
	l.mu.Unlock()
	if ok {
		l.Recall(k)
	}
	return nil
}

// Recall starts the limiter from what an earlier run learned, when the
// provider has not answered this one yet: the gate opens (no probe one
// call at a time), and each family with a known limit is paced at its
// refill rate (limit per minute), the pace Observe settles at with the
// provider's bucket half full. The first answers' headers then take over.
func (l *Limiter) Recall(k Learned) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gate == nil {
		return // answered already, or a ceiling of ours paces it
	}
	close(l.gate)
	l.gate = nil
	now := time.Now()
	if k.RequestsPerMinute > 0 {
		l.reqPace = pace{perSec: float64(k.RequestsPerMinute) / headerWindow.Seconds(), until: now.Add(headerWindow)}
	}
	if k.TokensPerMinute > 0 {
		l.tokPace = pace{perSec: float64(k.TokensPerMinute) / headerWindow.Seconds(), until: now.Add(headerWindow)}
	}
	l.apply(now)
}

// learned notes what a 2xx answer's headers say and, when it differs
// from what the memory holds, writes it there.
func (l *Limiter) learned(status int, hd Headers) {
	if status < 200 || status > 299 {
		return
	}
	k := learnedFrom(hd)
	l.mu.Lock()
	if l.haveKnown && l.known == k {
		l.mu.Unlock()
		return
	}
	l.known, l.haveKnown = k, true
	mem, key := l.mem, l.memKey
	l.mu.Unlock()
	if mem == nil {
		return
	}
	raw, err := json.Marshal(k)
	if err != nil {
		return // a struct of a bool and two integers always marshals
	}
	ctx, cancel := context.WithTimeout(context.Background(), memoryTimeout)
	defer cancel()
	if err := mem.Put(ctx, key, raw); err != nil {
		l.cfg.Logger.Warn("remembering what the provider said of its limits (the next run probes it again)",
			"provider", l.cfg.Provider, "err", err)
	}
}

// Known returns what the provider's answers said of its limits, or what
// the memory held before any answer; false when neither said anything.
func (l *Limiter) Known() (Learned, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.known, l.haveKnown
}
