package broker

import (
	"context"
	"fmt"

	"github.com/nats-io/nats.go/jetstream"
)

// BucketDocuments is the KV bucket of long documents split into chunk
// jobs: per document, which chunk runs ended and whether the document's
// own outcome was stored (internal/ledger's Documents).
const BucketDocuments = "PIPELINE_DOCUMENTS"

// DocumentBucket opens (creating it if needed) the documents' KV bucket.
func (c *Conn) DocumentBucket(ctx context.Context) (jetstream.KeyValue, error) {
	var kv jetstream.KeyValue
	err := c.RetryOnHandover(ctx, "opening the documents bucket", func() error {
		var err error
		kv, err = c.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
			Bucket:      BucketDocuments,
			Description: "pipeline: the chunks of each long document that ended, and whether the document did",
			History:     1,
			Storage:     jetstream.FileStorage,
			Replicas:    c.cfg.Replicas,
		})
		return err
	})
	if err != nil {
		return nil, fmt.Errorf("creating or updating key-value bucket %s (replicas %d): %w", BucketDocuments, c.cfg.Replicas, err)
	}
	return kv, nil
}
