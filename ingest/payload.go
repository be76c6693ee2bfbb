package ingest

// Payloads larger than the server's max payload (1 MiB by default) travel
// through the JetStream Object Store: the body is put in the bucket
// PIPELINE_PAYLOADS and the message carries only headers that name it.
// Every reader resolves such a message through Conn.Payload.

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Buckets and headers of large payloads.
const (
	// BucketPayloads is the object store holding bodies over the max payload.
	BucketPayloads = "PIPELINE_PAYLOADS"
	// HeaderPayload names the object that holds the message's body; the
	// message itself then has an empty body.
	HeaderPayload = "Pipeline-Payload"
	// HeaderPayloadSize is the body's size in bytes.
	HeaderPayloadSize = "Pipeline-Payload-Size"
	// HeaderPayloadDigest is the body's SHA-256, in hex.
	HeaderPayloadDigest = "Pipeline-Payload-Digest"

	// payloadHeadroom is kept free below the server's max payload for the
	// headers (Nats-Msg-Id and ours) that count against the same limit.
	payloadHeadroom = 16 << 10
	// payloadOpTimeout bounds one object store operation when the caller
	// set no deadline of its own.
	payloadOpTimeout = 2 * time.Minute
)

// Object name prefixes, one per kind of message.
const (
	payloadJobs    = "jobs"
	payloadResults = "results"
	payloadDLQ     = "dlq"
)

// ErrPayloadMissing is returned by Payload when the object a message names
// is not (or no longer) in the object store.
var ErrPayloadMissing = errors.New("payload object missing")

// ErrPayloadCorrupt is returned by Payload when the object a message names
// does not hold the body the message announces (another size, or content
// that does not match the message's digest): changed or damaged, it will
// not read better later.
var ErrPayloadCorrupt = errors.New("payload object does not match its message")

// buckets are the KV and object store buckets next to the streams.
type buckets struct {
	payloads jetstream.ObjectStore
	ledger   jetstream.KeyValue
}

// ensureBuckets creates the object store for large payloads and the job
// ledger, or updates them to the configuration; running it again changes
// nothing.
func (c *Conn) ensureBuckets(ctx context.Context) error {
	obs, err := c.js.CreateOrUpdateObjectStore(ctx, jetstream.ObjectStoreConfig{
		Bucket:      BucketPayloads,
		Description: "pipeline: bodies of jobs, results and dead letters over the server's max payload",
		Storage:     jetstream.FileStorage,
		Replicas:    c.cfg.Replicas,
	})
	if err != nil {
		return fmt.Errorf("creating or updating object store %s (replicas %d): %w", BucketPayloads, c.cfg.Replicas, err)
	}
	kv, err := c.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      BucketLedger,
		Description: "pipeline: which run of each job id ended, and where its outcome is stored",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    c.cfg.Replicas,
	})
	if err != nil {
		return fmt.Errorf("creating or updating key-value bucket %s (replicas %d): %w", BucketLedger, c.cfg.Replicas, err)
	}
	c.buckets = buckets{payloads: obs, ledger: kv}
	return nil
}

// InlineLimit is the largest body published inside a message: the
// connection's max payload (as the server announced it) minus room for
// the headers. Larger bodies go to the object store.
func (c *Conn) InlineLimit() int {
	return max(int(c.nc.MaxPayload())-payloadHeadroom, 1024)
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

// offload puts m's body in the object store when it is over InlineLimit,
// and replaces it with the headers naming the object. It returns the
// object name ("" when the body stays inline).
func (c *Conn) offload(ctx context.Context, m *nats.Msg, kind string) (string, error) {
	if len(m.Data) <= c.InlineLimit() {
		return "", nil
	}
	digest := digestOf(m.Data)
	name := payloadName(kind, m.Header.Get(jetstream.MsgIDHeader), digest)
	ctx, cancel := withDefaultTimeout(ctx, payloadOpTimeout)
	defer cancel()
	if _, err := c.buckets.payloads.Put(ctx, jetstream.ObjectMeta{Name: name}, bytes.NewReader(m.Data)); err != nil {
		return "", fmt.Errorf("putting %d bytes as %s in object store %s: %w", len(m.Data), name, BucketPayloads, err)
	}
	m.Header.Set(HeaderPayload, name)
	m.Header.Set(HeaderPayloadSize, strconv.Itoa(len(m.Data)))
	m.Header.Set(HeaderPayloadDigest, digest)
	m.Data = nil
	return name, nil
}

// PayloadSize is the size of a message's body: the size its headers
// announce for a body in the object store, else len(data).
func PayloadSize(h nats.Header, data []byte) int64 {
	if h == nil || h.Get(HeaderPayload) == "" {
		return int64(len(data))
	}
	n, err := strconv.ParseInt(h.Get(HeaderPayloadSize), 10, 64)
	if err != nil || n < 0 {
		return int64(len(data))
	}
	return n
}

// Payload returns a message's body: data itself, or, when the headers name
// an object (HeaderPayload), the object's content, checked against the
// announced size and digest. A missing object is ErrPayloadMissing.
func (c *Conn) Payload(ctx context.Context, h nats.Header, data []byte) ([]byte, error) {
	if h == nil {
		return data, nil
	}
	name := h.Get(HeaderPayload)
	if name == "" {
		return data, nil
	}
	ctx, cancel := withDefaultTimeout(ctx, payloadOpTimeout)
	defer cancel()
	body, err := c.buckets.payloads.GetBytes(ctx, name)
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, fmt.Errorf("reading %s from object store %s: %w", name, BucketPayloads, ErrPayloadMissing)
	}
	if errors.Is(err, jetstream.ErrDigestMismatch) {
		return nil, fmt.Errorf("reading %s from object store %s: %w: its chunks do not match the object's own digest (%w)", name, BucketPayloads, ErrPayloadCorrupt, err)
	}
	if err != nil {
		return nil, fmt.Errorf("reading %s from object store %s: %w", name, BucketPayloads, err)
	}
	if want := PayloadSize(h, nil); h.Get(HeaderPayloadSize) != "" && int64(len(body)) != want {
		return nil, fmt.Errorf("reading %s from object store %s: %w: %d bytes, the message announces %d", name, BucketPayloads, ErrPayloadCorrupt, len(body), want)
	}
	if want := h.Get(HeaderPayloadDigest); want != "" && digestOf(body) != want {
		return nil, fmt.Errorf("reading %s from object store %s: %w: content does not match the message's digest (sha256 %s)", name, BucketPayloads, ErrPayloadCorrupt, want)
	}
	return body, nil
}

// dropPayload deletes an object once nothing refers to it any more (its
// job was removed from the work queue, or its message was not stored).
// Best effort: a failure is logged and leaves garbage, never a loss.
func (c *Conn) dropPayload(ctx context.Context, name string) {
	if name == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	if err := c.buckets.payloads.Delete(ctx, name); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		c.log.Warn("deleting a payload object nothing refers to (left in the bucket)", "bucket", BucketPayloads, "object", name, "err", err)
	}
}

// dropIfUnreferenced deletes object name unless the message at seq of
// stream (the one a duplicate publish found stored) refers to it: after a
// duplicate, the object put for the refused message is garbage unless it
// is the very object the stored one names (same id, same content).
func (c *Conn) dropIfUnreferenced(ctx context.Context, stream string, seq uint64, name string) {
	if name == "" {
		return
	}
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
	defer cancel()
	s, err := c.js.Stream(ctx, stream)
	if err != nil {
		c.log.Warn("checking whether a payload object is referenced (kept)", "object", name, "err", err)
		return
	}
	m, err := s.GetMsg(ctx, seq)
	switch {
	case errors.Is(err, jetstream.ErrMsgNotFound):
	case err != nil:
		c.log.Warn("checking whether a payload object is referenced (kept)", "object", name, "err", err)
		return
	case m.Header != nil && m.Header.Get(HeaderPayload) == name:
		return
	}
	c.dropPayload(ctx, name)
}

// withDefaultTimeout bounds ctx by d unless it has a deadline already.
func withDefaultTimeout(ctx context.Context, d time.Duration) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return context.WithCancel(ctx)
	}
	return context.WithTimeout(ctx, d)
}

// rawSinkMsg is a message of stream read by a direct get, with its body
// resolved from the object store when it names one.
func (c *Conn) rawSinkMsg(ctx context.Context, stream string, m *jetstream.RawStreamMsg) (SinkMsg, error) {
	sm := SinkMsg{Subject: m.Subject, Data: m.Data, MsgID: m.Header.Get(jetstream.MsgIDHeader), Stream: stream, Sequence: m.Sequence, Time: m.Time}
	body, err := c.Payload(ctx, m.Header, m.Data)
	if err != nil {
		return sm, fmt.Errorf("message %s (%s seq %d): %w", sm.MsgID, stream, sm.Sequence, err)
	}
	sm.Data = body
	return sm, nil
}

// toSinkMsgResolved is toSinkMsg with the body resolved from the object
// store when the message names one.
func (c *Conn) toSinkMsgResolved(ctx context.Context, m jetstream.Msg) (SinkMsg, error) {
	sm := toSinkMsg(m)
	body, err := c.Payload(ctx, m.Headers(), sm.Data)
	if err != nil {
		return sm, fmt.Errorf("message %s (%s seq %d): %w", sm.MsgID, sm.Stream, sm.Sequence, err)
	}
	sm.Data = body
	return sm, nil
}
