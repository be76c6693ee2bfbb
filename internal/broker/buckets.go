package broker

import (
	"context"
	"fmt"

	"github.com/llmpipeline/pipeline/internal/payload"
	"github.com/nats-io/nats.go/jetstream"
)

// BucketBatches is the KV bucket of batch mode: the provider batches in
// flight and the jobs they hold.
const BucketBatches = "PIPELINE_BATCHES"

// BatchBucket opens (creating it if needed) the KV bucket of batch mode.
func (c *Conn) BatchBucket(ctx context.Context) (jetstream.KeyValue, error) {
	var kv jetstream.KeyValue
	err := c.RetryOnHandover(ctx, "opening the batch bucket", func() error {
		var err error
		kv, err = c.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      BucketBatches,
			Description: "pipeline: provider batches in flight and the jobs each holds",
			History:     1,
			Storage:     jetstream.FileStorage,
			Replicas:    c.cfg.Replicas,
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("creating or updating key-value bucket %s (replicas %d): %w", BucketBatches, c.cfg.Replicas, err)
	}
	return kv, nil
}

// buckets are the KV and object store buckets next to the streams.
type buckets struct {
	payloads *payload.Store
	ledger   jetstream.KeyValue
}

// EnsureBuckets creates the object store for large payloads, the job
// ledger, the documents' bucket and the providers' limits, or updates
// them to the configuration; running it again changes nothing.
func EnsureBuckets(ctx context.Context, c *Conn) error {
	obs, err := c.js.CreateOrUpdateObjectStore(ctx, payload.BucketConfig(c.cfg.Replicas))
	if err != nil {
		return fmt.Errorf("creating or updating object store %s (replicas %d): %w", payload.Bucket, c.cfg.Replicas, err)
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
	for _, b := range []jetstream.KeyValueConfig{documentsConfig(c.cfg.Replicas), providerLimitsConfig(c.cfg.Replicas)} {
		if _, err := c.js.CreateOrUpdateKeyValue(ctx, b); err != nil {
			return fmt.Errorf("creating or updating key-value bucket %s (replicas %d): %w", b.Bucket, c.cfg.Replicas, err)
		}
	}
	c.buckets = buckets{payloads: payload.New(c.js, obs, c.nc, c.log), ledger: kv}
	return nil
}

// BucketLedger is the KV bucket of the job ledger.
const BucketLedger = "PIPELINE_LEDGER"

// Payloads is the object store of large message bodies.
func (c *Conn) Payloads() *payload.Store { return c.buckets.payloads }

// LedgerBucket is the job ledger's KV bucket (BucketLedger).
func (c *Conn) LedgerBucket() jetstream.KeyValue { return c.buckets.ledger }
