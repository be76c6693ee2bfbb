package batch

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmpipeline/pipeline/heal"
	"github.com/llmpipeline/pipeline/llm"
)

// Keys of the PIPELINE_BATCHES bucket:
//
//	b.<batch key>  a Record: one provider batch, its state and its requests
//	r.<item key>   an Item: one job run handed to batch mode
//	q.<item key>   present while the item waits for a batch (queued)
const (
	prefixBatch = "b."
	prefixItem  = "r."
	prefixQueue = "q."
)

// Record states.
const (
	// StateSubmitting: written before the provider is asked to create the
	// batch; the provider may or may not have it.
	StateSubmitting = "submitting"
	// StateSubmitted: the provider accepted the batch (ProviderID is set).
	StateSubmitted = "submitted"
	// StateCollecting: the batch is done; one process reads its results.
	StateCollecting = "collecting"
	// StateEnded: every request of the batch was settled.
	StateEnded = "ended"
	// StateAbandoned: a submitting record whose batch the provider does
	// not have (or cannot say); its requests went into other batches.
	StateAbandoned = "abandoned"
)

// Item states.
const (
	itemQueued  = "queued"
	itemBatched = "batched"
	itemDone    = "done"
)

// Record is one batch as kept on JetStream.
type Record struct {
	Key        string          `json:"key"`
	Provider   string          `json:"provider"`
	Model      string          `json:"model"`
	ProviderID string          `json:"provider_id,omitempty"`
	State      string          `json:"state"`
	Status     llm.BatchStatus `json:"status"`
	Requests   []Request       `json:"requests"`
	Owner      string          `json:"owner"`
	CreatedAt  time.Time       `json:"created_at"`
	LeaseAt    time.Time       `json:"lease_at,omitzero"`
	EndedAt    time.Time       `json:"ended_at,omitzero"`
	// Note says what batch mode did about a batch the provider failed
	// (re-sent its requests, dead-lettered some), for `pipeline batches`.
	Note string `json:"note,omitempty"`
}

// Reason is why a batch ended as it did, for `pipeline batches`: the
// provider's message (a failed batch's first error) and what batch mode
// did about it; "" for a batch that simply ended.
func (r Record) Reason() string {
	msg := r.Status.Message
	if msg == "swept" {
		msg = ""
	}
	switch {
	case msg == "":
		return r.Note
	case r.Note == "":
		return msg
	}
	return msg + "; " + r.Note
}

// Request is one request of a batch: the item it serves and its custom id.
type Request struct {
	Item     string `json:"item"`
	CustomID string `json:"custom_id"`
	Attempt  int    `json:"attempt"`
}

// Item is one job run in batch mode: the job, the answers its earlier
// attempts got, and where its current request is.
type Item struct {
	Key         string          `json:"key"`
	MsgID       string          `json:"msg_id"`
	JobID       string          `json:"job_id"`
	SchemaToken string          `json:"schema_token"`
	Job         json.RawMessage `json:"job"`
	Deliveries  int             `json:"deliveries"`
	// Attempt is the heal attempt of the current request; Answers the
	// answers of the attempts before it.
	Attempt int             `json:"attempt"`
	Answers []model.Response `json:"answers,omitempty"`
	State   string          `json:"state"`
	Batch   string          `json:"batch,omitempty"`
	// CustomID is the current request's; CustomIDs every one submitted.
	CustomID  string   `json:"custom_id,omitempty"`
	CustomIDs []string `json:"custom_ids,omitempty"`
	// Transport counts the per-request errors of the current attempt;
	// Requeues the times it came back unanswered (expired, cancelled).
	Transport int `json:"transport,omitzero"`
	Requeues  int `json:"requeues,omitzero"`
	// Refused counts the batches the provider failed for a validation
	// error that named no line (the request may or may not be the one
	// refused): one re-send, then the job is dead-lettered.
	Refused int `json:"refused,omitzero"`
	// FromDelivery is set while the current request's batch was made
	// from an unacked delivery (a first attempt that was not parked): if
	// the batch is abandoned, the redelivery brings the job back.
	FromDelivery bool      `json:"from_delivery,omitzero"`
	Updated      time.Time `json:"updated"`
}

// itemKey is an item's key: a hash of the job's run id (message ids may
// hold characters KV keys may not).
func itemKey(msgID string) string {
	h := sha256.Sum256([]byte(msgID))
	return hex.EncodeToString(h[:10])
}

// customID names a request: the job run (the item key), the attempt and
// the batch, so no two requests ever share one (a request sent again goes
// into another batch under a new id) and an answer always finds its item.
// Anthropic allows 64 characters of [a-zA-Z0-9_-].
func customID(item string, attempt int, batch string) string {
	return fmt.Sprintf("%s-a%d-%s", item, attempt, batch)
}

// newKey is a new batch key: time-ordered, unique across processes.
func newKey(now time.Time) string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s%s", strings.ToLower(now.UTC().Format("20060102T150405")), hex.EncodeToString(b[:]))
}

// store is the bucket, typed.
type store struct {
	kv jetstream.KeyValue
}

func (s store) getRecord(ctx context.Context, key string) (Record, uint64, error) {
	var r Record
	rev, err := s.get(ctx, prefixBatch+key, &r)
	return r, rev, err
}

func (s store) getItem(ctx context.Context, key string) (Item, uint64, error) {
	var it Item
	rev, err := s.get(ctx, prefixItem+key, &it)
	return it, rev, err
}

// get reads key into v; jetstream.ErrKeyNotFound when absent.
func (s store) get(ctx context.Context, key string, v any) (uint64, error) {
	e, err := s.kv.Get(ctx, key)
	if err != nil {
		return 0, err
	}
	if err := json.Unmarshal(e.Value(), v); err != nil {
		return 0, fmt.Errorf("reading %s from %s: %w", key, s.kv.Bucket(), err)
	}
	return e.Revision(), nil
}

// put writes v at key: created when rev is 0 and create is set, replaced
// at revision rev otherwise (rev 0 without create: unconditionally).
func (s store) put(ctx context.Context, key string, v any, rev uint64, create bool) (uint64, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return 0, fmt.Errorf("encoding %s: %w", key, err)
	}
	switch {
	case rev != 0:
		return s.kv.Update(ctx, key, data, rev)
	case create:
		return s.kv.Create(ctx, key, data)
	default:
		return s.kv.Put(ctx, key, data)
	}
}

// keys lists the keys under prefix.
func (s store) keys(ctx context.Context, prefix string) ([]string, error) {
	l, err := s.kv.ListKeysFiltered(ctx, prefix+">")
	if err != nil {
		return nil, fmt.Errorf("listing %s in %s: %w", prefix, s.kv.Bucket(), err)
	}
	defer func() { _ = l.Stop() }()
	var out []string
	for k := range l.Keys() {
		out = append(out, strings.TrimPrefix(k, prefix))
	}
	return out, nil
}

// Records returns every batch kept in the bucket, newest first.
func Records(ctx context.Context, kv jetstream.KeyValue) ([]Record, error) {
	s := store{kv: kv}
	keys, err := s.keys(ctx, prefixBatch)
	if err != nil {
		return nil, err
	}
	out := make([]Record, 0, len(keys))
	for _, k := range keys {
		r, _, err := s.getRecord(ctx, k)
		if errors.Is(err, jetstream.ErrKeyNotFound) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	for i := 1; i < len(out); i++ {
		for j := i; j > 0 && out[j].CreatedAt.After(out[j-1].CreatedAt); j-- {
			out[j], out[j-1] = out[j-1], out[j]
		}
	}
	return out, nil
}

// conflict reports a compare-and-set that lost.
func conflict(err error) bool {
	return errors.Is(err, jetstream.ErrKeyExists) || errors.Is(err, jetstream.ErrKeyRevisionMismatch)
}
