package broker

import (
	"errors"
	"strings"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
)

// Stores a StoreError names.
const (
	StoreNATS   = "nats"   // the JetStream store (the streams)
	StoreSQLite = "sqlite" // the SQLite analytics index
)

// StoreError is a store that cannot take writes: which store, where it
// keeps its files (the JetStream store directory, the index file, or the
// server's URL for a NATS server of its own), and what it reported.
type StoreError struct {
	Store string
	Path  string
	Err   error
}

func (e *StoreError) Error() string {
	return e.Store + " store " + e.Path + ": " + e.Err.Error()
}

func (e *StoreError) Unwrap() error { return e.Err }

// errJetStreamDisabled is what the embedded server's store reports when
// the server turned JetStream off after a write error (nats-server does
// so on a permission error, and on running out of space in a cluster).
var errJetStreamDisabled = errors.New("jetstream is disabled on the embedded server (it stops it after a store write error)")

// IsStorageError reports whether err, from a publish or another JetStream
// request, says the server's store cannot take the write: out of
// resources or storage, JetStream disabled, or the store's own write
// error ("no space left on device"). A timeout is not one: a server that
// is restarting answers nothing too. "Temporarily unavailable" (a cluster
// electing a leader) is not one either.
func IsStorageError(err error) bool {
	if err == nil {
		return false
	}
	var se *StoreError
	if errors.As(err, &se) {
		return se.Store == StoreNATS
	}
	if errors.Is(err, jetstream.ErrJetStreamNotEnabled) || errors.Is(err, jetstream.ErrJetStreamNotEnabledForAccount) {
		return true
	}
	var apiErr *jetstream.APIError
	if errors.As(err, &apiErr) {
		switch server.ErrorIdentifier(apiErr.ErrorCode) {
		case server.JSInsufficientResourcesErr, server.JSStorageResourcesExceededErr,
			server.JSNotEnabledErr, server.JSNotEnabledForAccountErr, server.JSStreamStoreFailedF:
			return true
		}
	}
	msg := err.Error()
	return strings.Contains(msg, "no space left") || strings.Contains(msg, "insufficient resources") ||
		strings.Contains(msg, "insufficient storage")
}

// publishAckTimeout bounds the wait for an asynchronous publish's ack. A
// server whose store failed a write does not answer that stream's
// publishes at all; without a bound, the worker waiting for the ack would
// wait forever. After it, the publish is retried (same Nats-Msg-Id, so a
// publish that was in fact stored is a duplicate, not a copy).
const publishAckTimeout = 10 * time.Second
