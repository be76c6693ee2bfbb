package payload

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Buckets and headers of large payloads.
const (
	// Bucket is the object store holding bodies over the max payload.
	Bucket = "PIPELINE_PAYLOADS"
	// Header names the object that holds the message's body; the
	// message itself then has an empty body.
	Header = "Pipeline-Payload"
	// HeaderSize is the body's size in bytes.
	HeaderSize = "Pipeline-Payload-Size"
	// HeaderDigest is the body's SHA-256, in hex.
	HeaderDigest = "Pipeline-Payload-Digest"

	// payloadHeadroom is kept free below the server's max payload for the
	// headers (Nats-Msg-Id and ours) that count against the same limit.
	payloadHeadroom = 16 << 10
	// payloadOpTimeout bounds one object store operation when the caller
	// set no deadline of its own.
	payloadOpTimeout = 2 * time.Minute
)

// Object name prefixes, one per kind of message (Offload's kind).
const (
	KindJobs    = "jobs"    // a job on the JOBS work queue
	KindResults = "results" // a result on RESULTS
	KindDLQ     = "dlq"     // a dead letter on DLQ
)

// ErrMissing is returned by Get when the object a message names
// is not (or no longer) in the object store.
var ErrMissing = errors.New("payload object missing")

// ErrCorrupt is returned by Get when the object a message names
// does not hold the body the message announces (another size, or content
// that does not match the message's digest): changed or damaged, it will
// not read better later.
var ErrCorrupt = errors.New("payload object does not match its message")

// Store puts and reads the bodies of large messages in the object store
// Bucket. Its methods are safe for concurrent use.
type Store struct {
	js  jetstream.JetStream
	obs jetstream.ObjectStore
	nc  *nats.Conn
	log *slog.Logger
}

// New is the Store over obs (the object store Bucket, see BucketConfig);
// js reads the streams whose messages name objects, nc's max payload sets
// InlineLimit, and log takes the warnings of best-effort deletes.
func New(js jetstream.JetStream, obs jetstream.ObjectStore, nc *nats.Conn, log *slog.Logger) *Store {
	return &Store{js: js, obs: obs, nc: nc, log: log}
}

// BucketConfig is the configuration of the object store Bucket with
// replicas copies of each object.
func BucketConfig(replicas int) jetstream.ObjectStoreConfig {
	return jetstream.ObjectStoreConfig{
		Bucket:      Bucket,
		Description: "pipeline: bodies of jobs, results and dead letters over the server's max payload",
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
	}
}

// InlineLimit is the largest body published inside a message: the
// connection's max payload (as the server announced it) minus room for
// the headers. Larger bodies go to the object store.
func (s *Store) InlineLimit() int {
	return max(int(s.nc.MaxPayload())-payloadHeadroom, 1024)
}

// payloadName is the object name of a body: deterministic in the kind, the
// message id and the content, so a retried put writes the same object and
// two different bodies under one message id never overwrite each other.
func payloadName(kind, msgID, digest string) string {
	return kind + "/" + msgID + "/" + digest
}

func digestOf(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// Offload puts m's body in the object store when it is over InlineLimit,
// and replaces it with the headers naming the object. It returns the
// object name ("" when the body stays inline).
func (s *Store) Offload(ctx context.Context, m *nats.Msg, kind string) (string, error) {
	if len(m.Data) <= s.InlineLimit() {
		return "", nil
	}
	digest := digestOf(m.Data)
	name := payloadName(kind, m.Header.Get(jetstream.MsgIDHeader), digest)
	ctx, cancel := WithDefaultTimeout(ctx, payloadOpTimeout)
	defer cancel()
	if _, err := s.obs.Put(ctx, jetstream.ObjectMeta{Name: name}, bytes.NewReader(m.Data)); err != nil {
		return "", fmt.Errorf("putting %d bytes as %s in object store %s: %w", len(m.Data), name, Bucket, err)
	}
	m.Header.Set(Header, name)
	m.Header.Set(HeaderSize, strconv.Itoa(len(m.Data)))
	m.Header.Set(HeaderDigest, digest)
	m.Data = nil
	return name, nil
}

// Size is the size of a message's body: the size its headers
// announce for a body in the object store, else len(data).
func Size(h nats.Header, data []byte) int64 {
	if h == nil || h.Get(Header) == "" {
		return int64(len(data))
	}
	n, err := strconv.ParseInt(h.Get(HeaderSize), 10, 64)
	if err != nil || n < 0 {
		return int64(len(data))
	}
	return n
}

// Get returns a message's body: data itself, or, when the headers name
// an object (Header), the object's content, checked against the
// announced size and digest. A missing object is ErrMissing.
func (s *Store) Get(ctx context.Context, h nats.Header, data []byte) ([]byte, error) {
	if h == nil {
		return data, nil
	}
	name := h.Get(Header)
	if name == "" {
		return data, nil
	}
	ctx, cancel := WithDefaultTimeout(ctx, payloadOpTimeout)
	defer cancel()
	body, err := s.obs.GetBytes(ctx, name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, fmt.Errorf("reading %s from object store %s: %w", name, Bucket, ErrMissing)
	}
	if errors.Is(err, jetstream.ErrDigestMismatch) {
		return nil, fmt.Errorf("reading %s from object store %s: %w: its chunks do not match the object's own digest (%w)", name, Bucket, ErrCorrupt, err)
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s from object store %s: %w", name, Bucket, err)
	}
	if want := Size(h, nil); h.Get(HeaderSize) != "" && int64(len(body)) != want {
		return nil, fmt.Errorf("reading %s from object store %s: %w: %d bytes, the message announces %d", name, Bucket, ErrCorrupt, len(body), want)
	}
	if want := h.Get(HeaderDigest); want != "" && digestOf(body) != want {
		return nil, fmt.Errorf("reading %s from object store %s: %w: content does not match the message's digest (sha256 %s)", name, Bucket, ErrCorrupt, want)
	}
	return body, nil
}

// Drop deletes an object once nothing refers to it any more (its
// job was removed from the work queue, or its message was not stored).
// Best effort: a failure is logged and leaves garbage, never a loss.
func (s *Store) Drop(ctx context.Context, name string) {
	if name == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := s.obs.Delete(ctx, name); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		s.log.Warn("deleting a payload object nothing refers to (left in the bucket)", "bucket", Bucket, "object", name, "err", err)
	}
}

// DropIfUnreferenced deletes object name unless the message at seq of
// stream (the one a duplicate publish found stored) refers to it: after a
// duplicate, the object put for the refused message is garbage unless it
// is the very object the stored one names (same id, same content).
func (s *Store) DropIfUnreferenced(ctx context.Context, stream string, seq uint64, name string) {
	if name == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	st, err := s.js.Stream(ctx, stream)
	if err != nil {
		s.log.Warn("checking whether a payload object is referenced (kept)", "object", name, "err", err)
		return
	}
	m, err := st.GetMsg(ctx, seq)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
	case err != nil:
		s.log.Warn("checking whether a payload object is referenced (kept)", "object", name, "err", err)
		return
	case m.Header != nil && m.Header.Get(Header) == name:
		return
	}
	s.Drop(ctx, name)
}

// WithDefaultTimeout bounds ctx by d unless it has a deadline already.
func WithDefaultTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}
