package ratelimit

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net/http"
	"sync"
	"time"

	"golang.org/x/time/rate"

	"github.com/llmpipeline/pipeline/llm"
	"github.com/llmpipeline/pipeline/model"
)

// Defaults applied to zero Config fields.
const (
	DefaultWindow    = time.Minute
	DefaultMaxTokens = 4096
	// maxBurst is the most requests sent back to back when Config.Burst
	// is not set: providers enforce their limits over windows shorter than
	// the one they announce, so a limiter never sends a minute's quota at
	// once.
	maxBurst = 4
	// windowMargin lengthens the window the rates are computed over, so
	// that requests sent exactly a window apart cannot arrive inside one
	// window when the network delays the first more than the last.
	windowMargin = 50 * time.Millisecond
	// bytesPerToken is the prompt estimate: a token is about four bytes of
	// English text (and fewer for other scripts, so the estimate errs
	// high there, and answers' usage corrects it).
	bytesPerToken = 4
	// headerWindow is the window a provider's limit header counts over:
	// OpenAI's and Anthropic's request and token limits are per minute,
	// whatever --rate-window says for our own ceiling.
	headerWindow = time.Minute
)

// ErrConfig is returned (wrapped) by New for a broken Config.
var ErrConfig = errors.New("invalid rate limit config")

// Config configures a Limiter. The zero value of every field means its
// default.
type Config struct {
	// Provider names the provider in logs and errors.
	Provider string
	// RPM and TPM are the most requests and tokens per Window the whole
	// fleet (every process sharing the limit) may send. 0: no ceiling of
	// ours; the provider's headers alone decide. With a ceiling set,
	// headers can only lower the rate.
	RPM int
	TPM int
	// Window is the length of the window RPM and TPM count over (default
	// a minute; tests scale it down).
	Window time.Duration
	// MaxTokens is the completion limit counted for a request that sets
	// none (default 4096): providers count a request's max tokens against
	// the token limit before it runs.
	MaxTokens int
	// Burst is the most requests sent back to back (default: a second's
	// worth of this process's rate, between 1 and 4).
	Burst int
	// Logger receives holds (remaining reached zero). Nil discards.
	Logger *slog.Logger
	// OnWait, when set, is called with the time each call waited for the
	// limiter, when it waited at all (for a metric).
	OnWait func(d time.Duration)
	// MaxPause is the longest wait a provider's Retry-After pauses the
	// calls for (the provider client's llm.Config.MaxRetryAfter; 0: no
	// bound). A longer wait fails the call that got it instead.
	MaxPause time.Duration
	// OnMembers, when set, is called with the fleet's size whenever the
	// Limiter sees it change (for a gauge). It runs with the Limiter's
	// lock held: it must not call the Limiter.
	OnMembers func(n int)
}

func (c Config) withDefaults() Config {
	if c.Window <= 0 {
		c.Window = DefaultWindow
	}
	if c.MaxTokens <= 0 {
		c.MaxTokens = DefaultMaxTokens
	}
	if c.Provider == "" {
		c.Provider = "model"
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c Config) validate() error {
	if c.RPM < 0 || c.TPM < 0 {
		return fmt.Errorf("%w: negative rpm %d or tpm %d", ErrConfig, c.RPM, c.TPM)
	}
	if c.Burst < 0 {
		return fmt.Errorf("%w: negative burst %d", ErrConfig, c.Burst)
	}
	return nil
}

// Fleet says how many processes share the limit, this one included. The
// Limiter asks before every call; broker.Fleet answers from a NATS KV
// bucket.
type Fleet interface {
	Size() int
}

// pace is a sending rate learned from a response's headers: remaining
// over the time to reset, for the whole fleet. It holds until the reset,
// when the provider's window is whole again.
type pace struct {
	perSec float64
	until  time.Time
}

func (p pace) at(now time.Time) (float64, bool) {
	return p.perSec, p.perSec > 0 && now.Before(p.until)
}

// Limiter keeps one process's share of a model's rate limit: a token
// bucket of requests and one of tokens (golang.org/x/time/rate), their
// rates the lowest of the flags' ceiling and the pace the provider's
// headers allow, divided among the fleet's members. Safe for concurrent
// use.
type Limiter struct {
	cfg Config
	req *rate.Limiter
	tok *rate.Limiter

	mu      sync.Mutex
	fleet   Fleet
	members int
	// credit is tokens reserved for answers that used fewer: the next
	// reservations take them first.
	credit   int
	tokBurst int
	reqPace  pace
	tokPace  pace
	// hold: no request is sent before it (a family's remaining reached
	// zero, or fell below what a request needs, until its reset).
	hold time.Time
	// tokLeft is the fewest tokens a token family reported remaining,
	// valid until tokLeftUntil (its reset).
	tokLeft      int64
	tokLeftUntil time.Time
	tokLeftAt    time.Time
	// tokRefill is the fleet's token refill rate per second (the tokens
	// family's limit over the window), 0 when the provider sent no limit.
	tokRefill float64

	// gate is open (nil) once the provider answered: until then one call
	// at a time goes out (probing is true while it is in flight), so that
	// the first wave of a fleet does not spend a bucket it knows nothing
	// about.
	gate    chan struct{}
	probing bool
	// known is what the provider's answers (or, before any, the memory)
	// said of its limits; mem and memKey keep it for the next run.
	known     Learned
	haveKnown bool
	mem       Memory
	memKey    string
	// changed is closed and replaced whenever a bucket's rate or burst
	// changes, waking the call waiting its turn to reserve again at the
	// new rate.
	changed chan struct{}
	// turn is held by the one call waiting on the buckets: a reservation
	// made at a low rate is not kept once the rate rises, so only the head
	// of the line reserves.
	turn chan struct{}
}

// New returns a Limiter; a broken Config is an error wrapping ErrConfig.
func New(cfg Config) (*Limiter, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	l := &Limiter{
		cfg:      cfg,
		req:      rate.NewLimiter(rate.Inf, 1),
		tok:      rate.NewLimiter(rate.Inf, 1),
		members:  1,
		tokBurst: 1,
		changed:  make(chan struct{}),
		turn:     make(chan struct{}, 1),
	}
	if cfg.RPM == 0 && cfg.TPM == 0 {
		l.gate = make(chan struct{})
	}
	l.mu.Lock()
	l.apply(time.Now())
	l.mu.Unlock()
	return l, nil
}

// ShareWith makes the limit the fleet's: from now on this process takes
// 1/f.Size() of it. Joining others, it starts without a burst.
func (l *Limiter) ShareWith(f Fleet) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	l.fleet = f
	l.members = max(1, f.Size())
	if l.cfg.OnMembers != nil {
		l.cfg.OnMembers(l.members)
	}
	l.apply(now)
	if l.members > 1 {
		// Joining a fleet that is already sending: the others spent the
		// current window at their shares, so this member starts with
		// empty buckets instead of a burst.
		l.req.ReserveN(now, l.req.Burst())
		l.tok.ReserveN(now, l.tok.Burst())
	}
}

// Key is the fleet's name for one limit: a hash of provider, base URL,
// model and API key, so processes on one key share one budget and the key
// itself is never written anywhere.
func Key(provider, baseURL, model, apiKey string) string {
	h := sha256.New()
	for _, s := range []string{provider, baseURL, model, apiKey} {
		fmt.Fprintf(h, "%d:%s;", len(s), s)
	}
	return hex.EncodeToString(h.Sum(nil)[:16])
}

// Rates returns this process's current request and token rates per second
// (math.Inf(1) when unlimited), for logs and tests.
func (l *Limiter) Rates() (requests, tokens float64) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.refresh(time.Now())
	return perSecond(l.req.Limit()), perSecond(l.tok.Limit())
}

func perSecond(r rate.Limit) float64 {
	if r == rate.Inf {
		return math.Inf(1)
	}
	return float64(r)
}

// refresh re-reads the fleet's size and re-applies the rates; l.mu held.
func (l *Limiter) refresh(now time.Time) {
	if l.fleet != nil {
		if n := max(1, l.fleet.Size()); n != l.members {
			l.members = n
			if l.cfg.OnMembers != nil {
				l.cfg.OnMembers(n)
			}
		}
	}
	l.apply(now)
}

// apply sets both buckets' rates from the ceiling, the learned paces and
// the fleet's size; l.mu held.
//
// A token bucket of rate r and burst b sends at most b-1 + r*W requests in
// any window W (the spacing of 1/r between sends gives r*W, the burst the
// rest), so the ceiling's rate is (share - (b-1)) / W: no window, sliding
// or not, ever holds more than the share.
func (l *Limiter) apply(now time.Time) {
	n := float64(l.members)
	win := (l.cfg.Window + windowMargin).Seconds()
	reqRate, burst := math.Inf(1), l.cfg.Burst
	if l.cfg.RPM > 0 {
		share := float64(l.cfg.RPM) / n
		if burst == 0 {
			burst = min(max(int(share/l.cfg.Window.Seconds()), 1), maxBurst)
		}
		if float64(burst) > share {
			burst = 1
		}
		reqRate = (share - float64(burst-1)) / win
	}
	if p, ok := l.reqPace.at(now); ok {
		reqRate = min(reqRate, p/n)
	}
	if burst == 0 {
		burst = min(max(int(reqRate), 1), maxBurst)
	}
	tokRate := math.Inf(1)
	if l.cfg.TPM > 0 {
		// The token bucket's burst is one request's estimate; the same
		// bound holds, as long as one request is under half the share.
		share := float64(l.cfg.TPM) / n
		tokRate = max(share-float64(l.tokBurst-1), share/2) / win
	}
	if p, ok := l.tokPace.at(now); ok {
		tokRate = min(tokRate, p/n)
	}
	c1 := setRate(l.req, now, reqRate, burst)
	c2 := setRate(l.tok, now, tokRate, l.tokBurst)
	if c1 || c2 {
		close(l.changed)
		l.changed = make(chan struct{})
	}
}

// setRate sets b's rate and burst and reports whether either changed.
func setRate(b *rate.Limiter, now time.Time, perSec float64, burst int) bool {
	lim := rate.Inf
	if !math.IsInf(perSec, 1) {
		lim = rate.Limit(perSec)
	}
	changed := false
	if b.Limit() != lim {
		b.SetLimitAt(now, lim)
		changed = true
	}
	if b.Burst() != burst {
		b.SetBurstAt(now, burst)
		changed = true
	}
	return changed
}

// estimate is what a request counts against the token limit before it is
// sent: its messages' bytes over four, its files' tokens by the
// providers' formulas (model.File.Tokens: images by size, PDF pages by
// text and image), plus its completion limit.
func (l *Limiter) estimate(req model.Request) int {
	n := 0
	for _, m := range req.Messages {
		n += len(m.Content) + len(m.Role)
	}
	maxTokens := req.MaxTokens
	if maxTokens <= 0 {
		maxTokens = l.cfg.MaxTokens
	}
	return (n+bytesPerToken-1)/bytesPerToken + model.FileTokens(req.Messages) + maxTokens
}

// Wait blocks until a request estimated at tokens may be sent, and
// returns the time it waited, or ctx's error.
func (l *Limiter) Wait(ctx context.Context, tokens int) (time.Duration, error) {
	start := time.Now()
	if err := l.waitGate(ctx); err != nil {
		return time.Since(start), err
	}
	if err := l.waitHold(ctx, tokens); err != nil {
		return time.Since(start), err
	}
	l.mu.Lock()
	l.refresh(time.Now())
	take := tokens
	used := min(l.credit, take)
	l.credit -= used
	take -= used
	if take > l.tokBurst {
		// One request's estimate is the token bucket's burst: the bucket
		// grows to the largest request seen (within the fleet's share of
		// TPM, when set), so every request fits.
		b := take
		if l.cfg.TPM > 0 {
			b = min(b, max(1, l.cfg.TPM/l.members))
		}
		l.tokBurst = b
		l.apply(time.Now())
		take = min(take, b)
	}
	l.mu.Unlock()
	select {
	case l.turn <- struct{}{}:
	case <-ctx.Done():
		return time.Since(start), l.waitError(ctx, ctx.Err())
	}
	err := l.waitBucket(ctx, l.req, 1)
	if err == nil && take > 0 {
		err = l.waitBucket(ctx, l.tok, take)
	}
	<-l.turn
	if err != nil {
		return time.Since(start), l.waitError(ctx, err)
	}
	// A hold may have begun while this call waited its turn.
	if err := l.waitHold(ctx, 0); err != nil {
		return time.Since(start), err
	}
	return time.Since(start), nil
}

// waitBucket waits until b grants n, reserving again whenever the rates
// change while it waits (a reservation keeps the rate it was made at).
func (l *Limiter) waitBucket(ctx context.Context, b *rate.Limiter, n int) error {
	for {
		l.mu.Lock()
		changed := l.changed
		l.mu.Unlock()
		now := time.Now()
		r := b.ReserveN(now, n)
		if !r.OK() {
			return fmt.Errorf("%d exceeds the bucket's burst %d", n, b.Burst())
		}
		d := r.DelayFrom(now)
		if d <= 0 {
			return nil
		}
		if dl, ok := ctx.Deadline(); ok && now.Add(d).After(dl) {
			r.CancelAt(now)
			return fmt.Errorf("the wait of %s would exceed the context's deadline", d.Round(time.Millisecond))
		}
		t := time.NewTimer(d)
		select {
		case <-t.C:
			return nil
		case <-changed:
			t.Stop()
			r.Cancel()
		case <-ctx.Done():
			t.Stop()
			r.Cancel()
			return ctx.Err()
		}
	}
}

// waitGate lets one call through until the provider has answered once:
// that call returns true from here and the others wait for its answer.
func (l *Limiter) waitGate(ctx context.Context) error {
	for {
		l.mu.Lock()
		gate := l.gate
		if gate == nil {
			l.mu.Unlock()
			return nil
		}
		if !l.probing {
			l.probing = true
			l.mu.Unlock()
			return nil
		}
		l.mu.Unlock()
		select {
		case <-gate:
		case <-ctx.Done():
			return fmt.Errorf("%s: waiting for the provider's first answer: %w", l.cfg.Provider, ctx.Err())
		}
	}
}

// answered opens the gate: the provider answered (or the first call
// ended without an answer, and waiting longer would learn nothing).
func (l *Limiter) answered() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.gate != nil {
		close(l.gate)
		l.gate = nil
	}
}

func (l *Limiter) waitError(ctx context.Context, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("%s: waiting for the rate limit: %w", l.cfg.Provider, ctx.Err())
	}
	// The wait would outlast ctx's deadline: the call could not be sent
	// in time, a transport failure like a timeout.
	return &model.Error{Kind: model.KindTransport, Provider: l.cfg.Provider, Message: "waiting for the rate limit: " + err.Error()}
}

// waitHold sleeps while a hold is on: a family reached zero remaining (or,
// for tokens, fewer than the request needs) and has not reset yet.
func (l *Limiter) waitHold(ctx context.Context, tokens int) error {
	for {
		now := time.Now()
		l.mu.Lock()
		until := l.hold
		if p, ok := l.fleet.(Pauser); ok {
			until = maxTime(until, p.PausedUntil())
		}
		if tokens > 0 && now.Before(l.tokLeftUntil) && l.tokLeft < int64(tokens) {
			t := l.tokLeftUntil
			if l.tokRefill > 0 {
				// A refilling bucket has this process's tokens back
				// long before it is full again.
				need := float64(int64(tokens)-l.tokLeft) * float64(l.members) / l.tokRefill
				t = minTime(t, l.tokLeftAt.Add(time.Duration(need*float64(time.Second))))
			}
			until = maxTime(until, t)
		}
		l.mu.Unlock()
		d := until.Sub(now)
		if d <= 0 {
			return nil
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return fmt.Errorf("%s: waiting for the rate limit to reset: %w", l.cfg.Provider, ctx.Err())
		case <-t.C:
		}
	}
}

func minTime(a, b time.Time) time.Time {
	if a.Before(b) {
		return a
	}
	return b
}

func maxTime(a, b time.Time) time.Time {
	if a.After(b) {
		return a
	}
	return b
}

// Settle corrects the token bucket with an answer's reported usage: the
// tokens reserved beyond it go back, the tokens used beyond the estimate
// are taken (the bucket goes into debt, later calls wait longer). A
// usage of 0 (none reported) leaves the reservation as it was.
func (l *Limiter) Settle(estimated, used int) {
	if used <= 0 || estimated == used {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if used < estimated {
		l.credit = min(l.credit+estimated-used, l.creditCap())
		return
	}
	now := time.Now()
	for extra := used - estimated; extra > 0; {
		n := min(extra, l.tokBurst)
		l.tok.ReserveN(now, n)
		extra -= n
	}
}

// creditCap bounds returned tokens to what the bucket holds, so a run of
// small answers never builds a burst beyond the share; l.mu held.
func (l *Limiter) creditCap() int {
	if l.cfg.TPM > 0 {
		return max(1, l.cfg.TPM/l.members)
	}
	return math.MaxInt32
}

// Observe reads a response's rate-limit headers (llm.Config.OnResponse):
// each family's remaining over its reset becomes the pace it allows; a
// family at zero holds every request until its reset. A 429 also charges
// the request bucket for the retry the provider client will send.
func (l *Limiter) Observe(status int, h http.Header) {
	now := time.Now()
	hd := ParseHeaders(h, now)
	if status == http.StatusTooManyRequests {
		l.req.ReserveN(now, 1)
	}
	if status == http.StatusTooManyRequests || status >= 500 {
		// Before the gate opens: no call of this process goes out in
		// the wait the provider asked for.
		if d, ok := llm.RetryAfter(h, now); ok && d > 0 && (l.cfg.MaxPause <= 0 || d <= l.cfg.MaxPause) {
			l.Pause(now.Add(d))
		}
	}
	l.answered()
	l.learned(status, hd)
	if !hd.Known() {
		return
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if q := hd.Requests; q.Known {
		l.learn(&l.reqPace, q, now, "requests")
	}
	first := true
	for _, f := range []struct {
		q    Quota
		name string
	}{{hd.Tokens, "tokens"}, {hd.InputTokens, "input tokens"}, {hd.OutputTokens, "output tokens"}} {
		if !f.q.Known {
			continue
		}
		if f.name == "tokens" {
			l.learn(&l.tokPace, f.q, now, f.name)
		} else {
			l.learn(nil, f.q, now, f.name)
		}
		if first || f.q.Remaining < l.tokLeft {
			l.tokLeft, l.tokLeftUntil, l.tokLeftAt = f.q.Remaining, now.Add(f.q.Reset), now
			l.tokRefill = float64(f.q.Limit) / headerWindow.Seconds()
			first = false
		}
	}
	l.apply(now)
}

// learn takes one family's quota: a hold when nothing remains, else a
// pace (into p, when given); l.mu held.
//
// Without a limit header the pace is remaining over reset: the rate that
// spends what is left exactly at the reset, right for a fixed window.
// With one, the family is taken as what OpenAI and Anthropic document: a
// bucket refilling continuously at limit per minute, whose reset is when
// it is full again (capacity = remaining + refill*reset). The pace is
// then 2*refill*remaining/capacity: the refill rate with the bucket half
// full, faster above (down to half), slower below (back up to half), so
// the fleet settles at the provider's rate with half a bucket in reserve
// for the calls in flight. An empty refilling bucket holds this process
// only until its next request's worth has refilled, not until it is full.
func (l *Limiter) learn(p *pace, q Quota, now time.Time, name string) {
	refill := float64(q.Limit) / headerWindow.Seconds()
	if q.Remaining == 0 && q.Reset > 0 {
		wait := q.Reset
		if refill > 0 && p != nil {
			wait = min(wait, time.Duration(float64(l.members)/refill*float64(time.Second)))
		}
		until := now.Add(wait)
		if until.After(l.hold) {
			l.cfg.Logger.Info("rate limit reached: holding requests",
				slog.String("provider", l.cfg.Provider), slog.String("limit", name),
				slog.Int64("limit_value", q.Limit), slog.Duration("reset", q.Reset), slog.Duration("hold", wait))
			l.hold = until
		}
		if p != nil && refill > 0 {
			*p = pace{perSec: refill / 10, until: now.Add(headerWindow)}
		}
		return
	}
	if p == nil {
		return
	}
	if refill > 0 {
		left := float64(q.Remaining)
		capacity := left + refill*q.Reset.Seconds()
		r := 2 * refill * left / capacity
		if q.Reset > 0 {
			r = max(r, left/q.Reset.Seconds())
		}
		*p = pace{perSec: max(min(r, 2*refill), refill/10), until: now.Add(headerWindow)}
		return
	}
	if q.Reset <= 0 {
		*p = pace{} // whole now: nothing to pace
		return
	}
	*p = pace{perSec: float64(q.Remaining) / q.Reset.Seconds(), until: now.Add(q.Reset)}
}
