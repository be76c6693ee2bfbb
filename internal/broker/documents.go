package broker

import (
	"context"
	"errors"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// BucketDocuments is the KV bucket of long documents split into chunk
// jobs: per document, which chunk runs ended and whether the document's
// own outcome was stored (internal/ledger's Documents).
const BucketDocuments = "PIPELINE_DOCUMENTS"

// documentsConfig is the documents' bucket as EnsureBuckets makes it.
func documentsConfig(replicas int) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:      BucketDocuments,
		Description: "pipeline: the chunks of each long document that ended, and whether the document did",
		History:     1,
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
	}
}

// DocumentBucket opens the documents' KV bucket, which EnsureBuckets made
// with the streams; a server whose streams an older release made gets it
// now. Opening is a lookup: the workers of a fleet, all starting at once,
// do not each create a replicated bucket (three at once on a loaded
// three-node cluster outlasted the API's timeout).
func (c *Conn) DocumentBucket(ctx context.Context) (jetstream.KeyValue, error) {
	return lookupKV(ctx, c, documentsConfig(c.cfg.Replicas))
}

// lookupKV opens a bucket EnsureBuckets made with the streams by a
// lookup, creating it only when it is not there (a server whose streams
// an older release made), again on the server that took over when the
// embedded one changes hands.
func lookupKV(ctx context.Context, c *Conn, cfg jetstream.KeyValueConfig) (jetstream.KeyValue, error) {
	var kv jetstream.KeyValue
	err := c.RetryOnHandover(ctx, "opening key-value bucket "+cfg.Bucket, func() error {
		var err error
		if kv, err = c.js.KeyValue(ctx, cfg.Bucket); errors.Is(err, jetstream.ErrBucketNotFound) {
			kv, err = c.js.CreateOrUpdateKeyValue(ctx, cfg)
		}
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("opening key-value bucket %s (replicas %d): %w", cfg.Bucket, cfg.Replicas, err)
	}
	return kv, nil
}
