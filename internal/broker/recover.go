package broker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/nats-io/nats-server/v2/server"
)

// ErrNotEmbedded is returned by Store.Recover on a Conn that did not start
// the embedded server: a server of its own (or one another process runs)
// is recovered by whoever runs it.
var ErrNotEmbedded = errors.New("not the owner of an embedded nats server")

// ErrNoRoom is wrapped by Store.Recover's error when the probe write beside
// the store failed: the disk has no room yet, the store was not reloaded.
var ErrNoRoom = errors.New("no room to write beside the store")

// probeSize is how much Store.Recover writes next to the store before it
// reloads it: a block of the store needs room, not one byte.
const probeSize = 1 << 20

// Store is the embedded server's JetStream store as this Conn sees it:
// where it is, its limit, whether it takes writes, and its recovery after
// a write error. Every method answers for a Conn that did not start the
// server too (see each).
type Store struct{ c *Conn }

// Store returns the embedded server's store.
func (c *Conn) Store() Store { return Store{c} }

// Dir is the directory of the embedded server's JetStream store, ""
// when this Conn did not start one.
func (s Store) Dir() string {
	c := s.c
	if c.srv == nil {
		return ""
	}
	return filepath.Join(c.cfg.DataDir, storeSubdir)
}

// Limit is the embedded server's JetStream storage limit in bytes (by
// default three quarters of the disk's free space when it started), 0
// when this Conn did not start one or JetStream is off.
func (s Store) Limit() int64 {
	c := s.c
	if c.srv == nil {
		return 0
	}
	if cfg := c.srv.JetStreamConfig(); cfg != nil {
		return cfg.MaxStore
	}
	return 0
}

// Fault reports, as a *StoreError, why the embedded server's store
// cannot take writes: a stream stopped on a write error (nats-server keeps
// refusing that stream's writes until it is loaded again, even once the
// disk has room), or JetStream was turned off. It returns nil when the
// store is sound or this Conn did not start the server (see Embedded).
func (s Store) Fault() error {
	c := s.c
	if c.srv == nil {
		return nil
	}
	dir := s.Dir()
	if !c.srv.JetStreamEnabled() {
		return &StoreError{Store: StoreNATS, Path: dir, Err: errJetStreamDisabled}
	}
	// The server's health check names every stream that stopped on a
	// write error; its other complaints (a stream not loaded, the server
	// not ready yet) are not the disk's and a reload would not fix them.
	h := c.srv.Healthz(&server.HealthzOptions{Details: true})
	var errs []error
	for _, e := range h.Errors {
		if e.Type == server.HealthzErrorJetStream || strings.Contains(e.Error, "write error") {
			errs = append(errs, errors.New(e.Error))
		}
	}
	if len(errs) == 0 {
		return nil
	}
	return &StoreError{Store: StoreNATS, Path: dir, Err: errors.Join(errs...)}
}

// Recover brings the embedded server's store back after a write
// error, once the disk takes writes again: it writes and removes a probe
// file beside the store (an error here means there is still no room), then
// stops JetStream and starts it again on the same directory and limits, so
// every stream and consumer is loaded afresh from disk (their state, and
// the duplicate window, come back from the files). Clients stay connected;
// requests during the few milliseconds of the reload get no answer and
// are retried by their callers. It returns Fault's verdict after the
// reload. It must not run concurrently with Close.
func (s Store) Recover(ctx context.Context) error {
	c := s.c
	if c.srv == nil {
		return ErrNotEmbedded
	}
	if err := ctx.Err(); err != nil {
		return err
	}
	dir := s.Dir()
	if err := probeWrite(dir); err != nil {
		return &StoreError{Store: StoreNATS, Path: dir, Err: fmt.Errorf("%w: %w", ErrNoRoom, err)}
	}
	cfg := c.srv.JetStreamConfig()
	if cfg != nil {
		if err := c.srv.ShutdownJetStream(); err != nil {
			return &StoreError{Store: StoreNATS, Path: dir, Err: fmt.Errorf("stopping jetstream to reload the store: %w", err)}
		}
	} else {
		// Turned off by the server itself: the limits are sized again
		// from the disk, as at start.
		cfg = &server.JetStreamConfig{SyncAlways: c.cfg.SyncAlways, SyncInterval: c.cfg.SyncInterval}
	}
	// JetStreamConfig names the store's "jetstream" subdirectory; Enable
	// wants the directory above it, as the server's options give it.
	cfg.StoreDir = dir
	if err := c.srv.EnableJetStream(cfg); err != nil {
		return &StoreError{Store: StoreNATS, Path: dir, Err: fmt.Errorf("starting jetstream again on the store: %w", err)}
	}
	return s.Fault()
}

// probeWrite writes probeSize bytes to a file in dir, syncs and removes it.
func probeWrite(dir string) (err error) {
	f, err := os.CreateTemp(dir, ".write-probe-*")
	if err != nil {
		return fmt.Errorf("probing for room: %w", err)
	}
	defer func() {
		if rerr := os.Remove(f.Name()); rerr != nil && err == nil {
			err = fmt.Errorf("probing for room: %w", rerr)
		}
	}()
	if _, err := f.Write(make([]byte, probeSize)); err != nil {
		f.Close()
		return fmt.Errorf("probing for room: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("probing for room: %w", err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("probing for room: %w", err)
	}
	return nil
}
