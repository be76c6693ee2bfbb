package broker

// Provider limits: what a provider's answers said of its rate limits
// (ratelimit.Learned, as JSON), one key per limit key (ratelimit.Key: a
// hash, never the API key), kept for ProviderLimitsTTL. A run reads it
// before its first call, so a process restarted on a data dir that has
// run before, or a new member of a fleet, starts at the provider's pace
// instead of probing it one call at a time.

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// BucketProviderLimits is the KV bucket of what providers said of their
// limits.
const BucketProviderLimits = "PIPELINE_PROVIDER_LIMITS"

// ProviderLimitsTTL is how long what a provider said is remembered (the
// bucket's MaxAge): an account's limits change seldom, and the first
// answers of a run correct a stale value anyway.
const ProviderLimitsTTL = 24 * time.Hour

func providerLimitsConfig(replicas int) jetstream.KeyValueConfig {
	return jetstream.KeyValueConfig{
		Bucket:      BucketProviderLimits,
		Description: "pipeline: what each provider's answers said of its rate limits, one key per limit key",
		History:     1,
		TTL:         ProviderLimitsTTL,
		Storage:     jetstream.FileStorage,
		Replicas:    replicas,
	}
}

// ProviderLimits is the fleet's memory of providers' limits (it is a
// ratelimit.Memory). Safe for concurrent use.
type ProviderLimits struct {
	kv jetstream.KeyValue
}

// ProviderLimits opens the bucket, which EnsureBuckets made with the
// streams; a server whose streams an older release made gets it now.
// Opening is a lookup, as for the documents' bucket: a fleet starting at
// once does not each create a replicated bucket.
func (c *Conn) ProviderLimits(ctx context.Context) (*ProviderLimits, error) {
	kv, err := lookupKV(ctx, c, providerLimitsConfig(c.cfg.Replicas))
	if err != nil {
		return nil, err
	}
	return &ProviderLimits{kv: kv}, nil
}

// Get returns what is remembered under key; false when nothing is.
func (p *ProviderLimits) Get(ctx context.Context, key string) ([]byte, bool, error) {
	if !validParamToken(key) {
		return nil, false, fmt.Errorf("reading provider limits: key %q: want letters, digits, - or _", key)
	}
	ctx, cancel := withParamsTimeout(ctx)
	defer cancel()
	e, err := p.kv.Get(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fmt.Errorf("reading provider limits from %s: %w", BucketProviderLimits, err)
	}
	return e.Value(), true, nil
}

// Put remembers value under key.
func (p *ProviderLimits) Put(ctx context.Context, key string, value []byte) error {
	if !validParamToken(key) {
		return fmt.Errorf("recording provider limits: key %q: want letters, digits, - or _", key)
	}
	ctx, cancel := withParamsTimeout(ctx)
	defer cancel()
	if _, err := p.kv.Put(ctx, key, value); err != nil {
		return fmt.Errorf("recording provider limits in %s: %w", BucketProviderLimits, err)
	}
	return nil
}
