package broker

// The fleet: pipeline processes that share one model's rate limit find
// each other in a KV bucket. Each member writes its own key,
// "<limit key>.<member id>", again every FleetHeartbeat; the bucket's
// MaxAge (FleetTTL) removes the key of a member that stopped doing so, and
// a member that leaves deletes its key. Every member lists the keys of its
// limit key as often as it writes its own and takes the count as the
// fleet's size: a process that dies returns its share within FleetTTL
// plus a heartbeat.
//
// A pause (the provider asked one member to wait) is the key
// "pause.<limit key>", holding the time it ends: the member that asked
// writes it at once and again every heartbeat while it lasts (the
// bucket's MaxAge would remove it otherwise), and every member watches
// it, so the others hold their calls within moments. Each member keeps
// the latest end it saw.

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go/jetstream"
	"github.com/nats-io/nuid"
)

// BucketLimits is the KV bucket of the rate-limit fleets.
const BucketLimits = "PIPELINE_LIMITS"

// FleetTTL is how long a member's key lives without a heartbeat (the
// bucket's MaxAge); FleetHeartbeat is how often a member rewrites it and
// counts the others.
const (
	FleetTTL       = 3 * time.Second
	FleetHeartbeat = time.Second
)

// Fleet is this process's membership in the group sharing one limit key.
// Size is safe for concurrent use; Leave ends the membership.
type Fleet struct {
	c    *Conn
	mu   sync.Mutex // guards kv
	kv   jetstream.KeyValue
	key  string // the limit key
	id   string // this member's id
	log  *slog.Logger
	size atomic.Int64
	// asked is the end of this member's own pause (unix nanoseconds, 0:
	// none), written to the bucket while it lasts; seen is the latest end
	// of any member's pause read from it.
	asked atomic.Int64
	seen  atomic.Int64
	kick  chan struct{} // wakes the heartbeat to write a new pause

	stop      context.CancelFunc
	done      chan struct{}
	leaveOnce sync.Once
}

// JoinFleet registers this process under limitKey (a KV token: letters,
// digits, - and _) and keeps it registered until Leave or until ctx ends.
// It returns once the first count of the members is in; when others are
// there, one heartbeat later, once they have counted this one too.
func (c *Conn) JoinFleet(ctx context.Context, limitKey string) (*Fleet, error) {
	if limitKey == "" || strings.ContainsAny(limitKey, ".*> ") {
		return nil, fmt.Errorf("joining the rate-limit fleet: limit key %q: want letters, digits, - or _", limitKey)
	}
	f := &Fleet{c: c, key: limitKey, id: nuid.Next(), log: c.log, done: make(chan struct{}), kick: make(chan struct{}, 1)}
	// A joined server that changes hands meanwhile loses the bucket (it
	// lives in memory): made again on the server that took over.
	err := c.RetryOnHandover(ctx, "joining the rate-limit fleet", func() error {
		if err := f.ensureBucket(ctx); err != nil {
			return err
		}
		return f.beat(ctx)
	})
	if err != nil {
		return nil, fmt.Errorf("joining the rate-limit fleet: %w", err)
	}
	if f.Size() > 1 {
		// The others count this member at their next beat: until then
		// they still take the shares of a smaller fleet, and this one
		// starting at once would put the fleet over its limit.
		t := time.NewTimer(FleetHeartbeat)
		select {
		case <-ctx.Done():
			t.Stop()
			_ = f.bucket().Delete(context.WithoutCancel(ctx), f.memberKey()) // best effort: the TTL removes it anyway
			return nil, fmt.Errorf("joining the rate-limit fleet: %w", ctx.Err())
		case <-t.C:
		}
		if err := f.beat(ctx); err != nil {
			return nil, fmt.Errorf("joining the rate-limit fleet: %w", err)
		}
	}
	lctx, stop := context.WithCancel(context.WithoutCancel(ctx))
	w, err := f.bucket().Watch(lctx, f.pauseKey())
	if err != nil {
		stop()
		_ = f.bucket().Delete(context.WithoutCancel(ctx), f.memberKey()) // best effort: the TTL removes it anyway
		return nil, fmt.Errorf("joining the rate-limit fleet: watching %s: %w", f.pauseKey(), err)
	}
	f.stop = stop
	go f.run(lctx, ctx.Done(), w)
	return f, nil
}

// Pause asks every member to hold its calls until until (ratelimit.Pauser).
// It does not block: the heartbeat writes the pause at once.
func (f *Fleet) Pause(until time.Time) {
	n := until.UnixNano()
	for {
		old := f.asked.Load()
		if n <= old {
			return
		}
		if f.asked.CompareAndSwap(old, n) {
			break
		}
	}
	select {
	case f.kick <- struct{}{}:
	default:
	}
}

// PausedUntil is the end of the latest pause any member asked for, this
// one's included (the zero time when none).
func (f *Fleet) PausedUntil() time.Time {
	n := max(f.asked.Load(), f.seen.Load())
	if n == 0 {
		return time.Time{}
	}
	return time.Unix(0, n)
}

func (f *Fleet) pauseKey() string { return "pause." + f.key }

// sawPause takes a pause written to the bucket (by any member).
func (f *Fleet) sawPause(e jetstream.KeyValueEntry) {
	if e == nil || e.Operation() != jetstream.KeyValuePut {
		return
	}
	t, err := time.Parse(time.RFC3339Nano, string(e.Value()))
	if err != nil {
		f.log.Warn("rate-limit fleet: unreadable pause", slog.String("key", e.Key()), slog.String("error", err.Error()))
		return
	}
	n := t.UnixNano()
	for {
		old := f.seen.Load()
		if n <= old || f.seen.CompareAndSwap(old, n) {
			return
		}
	}
}

// writePause writes this member's pause while it lasts.
func (f *Fleet) writePause(ctx context.Context) error {
	n := f.asked.Load()
	if n == 0 || time.Now().UnixNano() >= n {
		return nil
	}
	if _, err := f.bucket().Put(ctx, f.pauseKey(), []byte(time.Unix(0, n).UTC().Format(time.RFC3339Nano))); err != nil {
		return fmt.Errorf("writing the pause: %w", err)
	}
	return nil
}

// Size is how many live members share the limit, this one included (at
// least 1).
func (f *Fleet) Size() int { return int(max(1, f.size.Load())) }

// ID is this member's id in the bucket.
func (f *Fleet) ID() string { return f.id }

// Leave stops the heartbeat and deletes this member's key, so the others
// take its share at their next count. Safe to call twice; bounded by ctx.
func (f *Fleet) Leave(ctx context.Context) error {
	var err error
	f.leaveOnce.Do(func() {
		f.stop()
		<-f.done
		if derr := f.bucket().Delete(ctx, f.memberKey()); derr != nil && !errors.Is(derr, jetstream.ErrKeyNotFound) {
			err = fmt.Errorf("leaving the rate-limit fleet: %w", derr)
		}
	})
	return err
}

func (f *Fleet) memberKey() string { return f.key + "." + f.id }

// run beats until ctx is cancelled (Leave) or parent is done, and takes
// the pauses the watcher w reports.
func (f *Fleet) run(ctx context.Context, parent <-chan struct{}, w jetstream.KeyWatcher) {
	defer close(f.done)
	defer func() { _ = w.Stop() }()
	t := time.NewTicker(FleetHeartbeat)
	defer t.Stop()
	updates := w.Updates()
	for {
		select {
		case <-ctx.Done():
			return
		case <-parent:
			return
		case e, ok := <-updates:
			if !ok {
				updates = nil // the watcher ended: pauses come from this member only
			}
			f.sawPause(e)
			continue
		case <-f.kick:
			bctx, cancel := context.WithTimeout(ctx, FleetHeartbeat)
			err := f.writePause(bctx)
			cancel()
			if err != nil && ctx.Err() == nil {
				f.log.Warn("rate-limit fleet: sharing a pause failed (retried at the next heartbeat)", slog.String("error", err.Error()))
			}
			continue
		case <-t.C:
		}
		bctx, cancel := context.WithTimeout(ctx, FleetHeartbeat)
		err := f.beat(bctx)
		if err == nil {
			err = f.writePause(bctx)
		}
		cancel()
		if err != nil && ctx.Err() == nil {
			// The last count stands until the bucket answers again.
			f.log.Warn("rate-limit fleet heartbeat failed", slog.String("error", err.Error()))
		}
	}
}

// ensureBucket creates the fleet's bucket, or updates it to the
// configuration.
func (f *Fleet) ensureBucket(ctx context.Context) error {
	kv, err := f.c.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      BucketLimits,
		Description: "pipeline: processes sharing a model's rate limit, one key per live process",
		History:     1,
		TTL:         FleetTTL,
		Storage:     jetstream.MemoryStorage,
		Replicas:    f.c.cfg.Replicas,
	})
	if err != nil {
		return fmt.Errorf("creating or updating key-value bucket %s (replicas %d): %w", BucketLimits, f.c.cfg.Replicas, err)
	}
	f.mu.Lock()
	f.kv = kv
	f.mu.Unlock()
	return nil
}

func (f *Fleet) bucket() jetstream.KeyValue {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.kv
}

// beat rewrites this member's key and counts the live members. When the
// bucket is gone (it lives in the server's memory: a server restarted or
// taken over has none) it is made again first.
func (f *Fleet) beat(ctx context.Context) error {
	put := func() error {
		_, err := f.bucket().Put(ctx, f.memberKey(), []byte(time.Now().UTC().Format(time.RFC3339Nano)))
		return err
	}
	err := put()
	if errors.Is(err, jetstream.ErrNoStreamResponse) || errors.Is(err, jetstream.ErrStreamNotFound) || errors.Is(err, jetstream.ErrBucketNotFound) {
		if berr := f.ensureBucket(ctx); berr != nil {
			return fmt.Errorf("writing member key: %w (making the bucket again: %w)", err, berr)
		}
		err = put()
	}
	if err != nil {
		return fmt.Errorf("writing member key: %w", err)
	}
	keys, err := f.bucket().ListKeysFiltered(ctx, f.key+".*")
	if err != nil {
		return fmt.Errorf("listing members: %w", err)
	}
	n := int64(0)
	for range keys.Keys() {
		n++
	}
	// The lister stops its watcher itself after the last key; Stop only
	// makes sure, and says "bad subscription" when it already had.
	_ = keys.Stop()
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("listing members: %w", err) // a partial count would overstate the share
	}
	f.size.Store(max(1, n))
	return nil
}
