package worker

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/llmpipeline/pipeline/index"
	"github.com/llmpipeline/pipeline/internal/broker"
)

// Pacing of the store watch.
const (
	// storeWatchEvery is how often the embedded server's store is checked,
	// and, while it fails, how often the disk is probed for room.
	storeWatchEvery = time.Second
	// maxReloadWait caps the wait between two reloads of the embedded
	// store that did not clear its fault (the disk had room for the probe
	// but the store failed again).
	maxReloadWait = 4 * time.Second
	// externalProbeEvery is how often a server that refused publishes
	// for lack of storage is asked whether JetStream has room again; then
	// the workers try (and stop again if it still refuses).
	externalProbeEvery = 5 * time.Second
	// roomWanted is the storage, under JetStream's limit, that counts as
	// room again after the limit was reached.
	roomWanted = 1 << 20
)

// Names of the stores in the logs.
var storeNames = map[string]string{broker.StoreNATS: "nats store", broker.StoreSQLite: "sqlite index"}

// storeHealth knows whether the NATS store and the SQLite index take
// writes. Every failed write is counted in the store-errors metric; the
// first failure of an episode in which a store cannot write at all is
// logged at error level with the store and its path, and so is the end
// of the episode. While the NATS store fails the workers' gate stays
// closed: a job fetched then would only be handed back, a delivery burnt.
// The index failing does not stop the workers: the streams keep the
// outcomes and the sink writes them once it can.
type storeHealth struct {
	conn *broker.Conn
	m    *Metrics
	log  *slog.Logger

	mu      sync.Mutex
	failing map[string]*episode
	natsOK  chan struct{} // closed while the NATS store takes writes
}

// episode is one stretch of time during which a store could not write.
type episode struct {
	since  time.Time
	path   string
	failed int // writes that failed during it
}

func newStoreHealth(conn *broker.Conn, m *Metrics, log *slog.Logger) *storeHealth {
	h := &storeHealth{conn: conn, m: m, log: log, failing: map[string]*episode{}, natsOK: make(chan struct{})}
	close(h.natsOK)
	for _, s := range []string{broker.StoreNATS, broker.StoreSQLite} {
		m.storeState(s, false)
	}
	return h
}

// natsPath is where the NATS store is: the embedded server's store
// directory, or the URL of a server of its own.
func (h *storeHealth) natsPath() string {
	if dir := h.conn.Store().Dir(); dir != "" {
		return dir
	}
	return broker.RedactURL(h.conn.URL())
}

// fail records that a write to store failed; storage says the store
// cannot write at all (full disk, I/O error), which starts an episode.
func (h *storeHealth) fail(store, path string, err error, storage bool) {
	h.m.storeError(store)
	h.mu.Lock()
	defer h.mu.Unlock()
	ep := h.failing[store]
	if ep != nil {
		ep.failed++
		return
	}
	if !storage {
		return
	}
	var se *broker.StoreError
	if errors.As(err, &se) {
		err = se.Err // the store and its path are said apart
	}
	h.failing[store] = &episode{since: time.Now(), path: path, failed: 1}
	h.m.storeState(store, true)
	if store == broker.StoreNATS {
		h.natsOK = make(chan struct{})
		h.log.Error("nats store cannot be written: workers stop fetching jobs until it can",
			"store", storeNames[store], "path", path, "err", err)
		return
	}
	h.log.Error("sqlite index cannot be written: the sink retries every 2s; workers go on (the streams keep the outcomes)",
		"store", storeNames[store], "path", path, "err", err)
}

// ok records that store takes writes, ending its episode if one is open.
func (h *storeHealth) ok(store string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	ep := h.failing[store]
	if ep == nil {
		return
	}
	delete(h.failing, store)
	h.m.storeState(store, false)
	msg := "sqlite index can be written again"
	if store == broker.StoreNATS {
		close(h.natsOK)
		msg = "nats store can be written again: workers take jobs again"
	}
	h.log.Warn(msg, "store", storeNames[store], "path", ep.path,
		"failed_for", time.Since(ep.since).Round(time.Millisecond), "failed_writes", ep.failed)
}

func (h *storeHealth) isFailing(store string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.failing[store] != nil
}

// wait blocks until the NATS store takes writes or ctx is done.
func (h *storeHealth) wait(ctx context.Context) error {
	for {
		h.mu.Lock()
		ok := h.natsOK
		h.mu.Unlock()
		select {
		case <-ok:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
}

// gate is the workers' gate: closed while the NATS store fails, then
// whatever next (the model's circuit breaker) says.
func (h *storeHealth) gate(next func(context.Context) error) func(context.Context) error {
	return func(ctx context.Context) error {
		for {
			if err := h.wait(ctx); err != nil {
				return err
			}
			if next != nil {
				if err := next(ctx); err != nil {
					return err
				}
			}
			// The breaker may have held us a while: the store may have
			// failed meanwhile.
			if !h.isFailing(broker.StoreNATS) {
				return nil
			}
		}
	}
}

// publishFailed is the workers' StoreFailed: an outcome could not be
// stored on its stream.
func (h *storeHealth) publishFailed(err error) {
	h.fail(broker.StoreNATS, h.natsPath(), err, broker.IsStorageError(err))
}

// indexWritten records the outcome of one write of the sink to the index.
func (h *storeHealth) indexWritten(path string, err error) {
	if h == nil {
		return
	}
	if err != nil {
		h.fail(broker.StoreSQLite, path, err, index.IsStorageError(err))
		return
	}
	h.ok(broker.StoreSQLite)
}

// watch checks the NATS store until ctx is done. The embedded server's
// store is asked every second whether a stream stopped on a write error;
// while it has, the disk is probed for room every second and, once there
// is, the store is reloaded (nats-server refuses a failed stream's writes
// until then). When the failure is the server refusing publishes for
// lack of storage (a server of its own, or the embedded server's storage
// limit reached), JetStream is asked every few seconds whether it has room
// again.
func (h *storeHealth) watch(ctx context.Context) {
	t := time.NewTicker(storeWatchEvery)
	defer t.Stop()
	var nextReload, nextAsk time.Time
	reloads := 0
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		now := time.Now()
		if fault := h.conn.Store().Fault(); fault != nil {
			if !h.isFailing(broker.StoreNATS) {
				h.fail(broker.StoreNATS, h.natsPath(), fault, true)
			}
			if now.Before(nextReload) {
				continue
			}
			err := h.conn.Store().Recover(ctx)
			switch {
			case err == nil:
				h.ok(broker.StoreNATS)
				reloads = 0
			case ctx.Err() != nil:
				return
			case errors.Is(err, broker.ErrNoRoom):
				// Still full: probe again in a second.
				h.log.Debug("nats store: no room yet", "path", h.natsPath(), "err", err)
			default:
				// Reloaded with room on the disk, and the store failed
				// again: wait longer before the next reload.
				h.log.Debug("nats store: reload did not clear the fault", "path", h.natsPath(), "err", err)
				reloads++
				nextReload = now.Add(min(storeWatchEvery<<min(reloads-1, 3), maxReloadWait))
			}
			continue
		}
		reloads = 0
		if h.isFailing(broker.StoreNATS) && !now.Before(nextAsk) {
			nextAsk = now.Add(externalProbeEvery)
			if h.jetStreamHasRoom(ctx) {
				h.ok(broker.StoreNATS)
			}
		}
	}
}

// jetStreamHasRoom reports whether JetStream answers and the account's
// store is under its limit.
func (h *storeHealth) jetStreamHasRoom(ctx context.Context) bool {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	info, err := h.conn.JetStream().AccountInfo(ctx)
	if err != nil {
		h.log.Debug("nats store: jetstream does not answer yet", "err", err)
		return false
	}
	for _, limit := range []int64{info.Limits.MaxStore, h.conn.Store().Limit()} {
		if limit > 0 && info.Store+roomWanted > uint64(limit) {
			h.log.Debug("nats store: jetstream storage still at its limit", "used", info.Store, "limit", limit)
			return false
		}
	}
	return true
}
