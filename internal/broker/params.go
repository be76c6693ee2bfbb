package broker

// Model parameters: what a model refused with a 400 (a reasoning model's
// temperature, max_tokens), remembered for every process of the fleet in
// a KV bucket, one key per refusal, "<model key>.<parameter>". Keys live
// for ParamsTTL: a provider that starts taking the parameter again gets
// it after that.

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// BucketParams is the KV bucket of the parameters models refused.
const BucketParams = "PIPELINE_PARAMS"

// ParamsTTL is how long a refusal is remembered (the bucket's MaxAge).
const ParamsTTL = 30 * 24 * time.Hour

// ModelParams is the fleet's memory of refused parameters (it is an
// llm.ParamMemory). Safe for concurrent use.
type ModelParams struct {
	kv jetstream.KeyValue
}

// ModelParams opens (creating it if needed) the bucket of refused
// parameters.
func (c *Conn) ModelParams(ctx context.Context) (*ModelParams, error) {
	kv, err := c.js.CreateOrUpdateKeyValue(ctx, jetstream.KeyValueConfig{
		Bucket:      BucketParams,
		Description: "pipeline: request parameters a model refused, one key per model and parameter",
		History:     1,
		TTL:         ParamsTTL,
		Storage:     jetstream.FileStorage,
		Replicas:    c.cfg.Replicas,
	})
	if err != nil {
		return nil, fmt.Errorf("creating or updating key-value bucket %s (replicas %d): %w", BucketParams, c.cfg.Replicas, err)
	}
	return &ModelParams{kv: kv}, nil
}

func validParamToken(s string) bool {
	return s != "" && !strings.ContainsAny(s, ".*> ")
}

// paramsTimeout bounds a read or a write whose caller set no deadline.
const paramsTimeout = 5 * time.Second

func withParamsTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, paramsTimeout)
}

// Refused lists the parameters recorded under key.
func (p *ModelParams) Refused(ctx context.Context, key string) ([]string, error) {
	if !validParamToken(key) {
		return nil, fmt.Errorf("reading refused parameters: key %q: want letters, digits, - or _", key)
	}
	ctx, cancel := withParamsTimeout(ctx)
	defer cancel()
	l, err := p.kv.ListKeysFiltered(ctx, key+".*")
	if err != nil {
		if errors.Is(err, jetstream.ErrNoKeysFound) {
			return nil, nil
		}
		return nil, fmt.Errorf("reading refused parameters from %s: %w", BucketParams, err)
	}
	defer func() { _ = l.Stop() }()
	var out []string
	for k := range l.Keys() {
		out = append(out, strings.TrimPrefix(k, key+"."))
	}
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("reading refused parameters from %s: %w", BucketParams, err)
	}
	return out, nil
}

// Refuse records that the model under key refused param.
func (p *ModelParams) Refuse(ctx context.Context, key, param string) error {
	if !validParamToken(key) || !validParamToken(param) {
		return fmt.Errorf("recording a refused parameter: key %q, parameter %q: want letters, digits, - or _", key, param)
	}
	ctx, cancel := withParamsTimeout(ctx)
	defer cancel()
	if _, err := p.kv.Put(ctx, key+"."+param, []byte(time.Now().UTC().Format(time.RFC3339))); err != nil {
		return fmt.Errorf("recording refused parameter %s in %s: %w", param, BucketParams, err)
	}
	return nil
}
