package queue

import (
	"fmt"
	"slices"
	"time"

	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/nats-io/nats.go/jetstream"
)

// Defaults of WorkerConfig.
const (
	DefaultConcurrency   = 16
	DefaultAckWait       = 60 * time.Second
	DefaultMaxDeliver    = 5
	DefaultShutdownGrace = 30 * time.Second
	DefaultFetchWait     = time.Second
	maxRequestExpires    = time.Minute
	consumerMaxWaiting   = 512
)

func (cfg WorkerConfig) withDefaults() WorkerConfig {
	if cfg.Concurrency <= 0 {
		cfg.Concurrency = DefaultConcurrency
	}
	if cfg.AckWait <= 0 {
		cfg.AckWait = DefaultAckWait
	}
	if cfg.MaxDeliver == 0 {
		cfg.MaxDeliver = DefaultMaxDeliver
	}
	if len(cfg.BackOff) > 0 {
		// The server replaces AckWait with BackOff[0]: say so in the config.
		cfg.AckWait = cfg.BackOff[0]
	}
	if cfg.Heartbeat <= 0 {
		shortest := cfg.AckWait
		for _, b := range cfg.BackOff {
			shortest = min(shortest, b)
		}
		cfg.Heartbeat = shortest / 3
	}
	if cfg.ShutdownGrace <= 0 {
		cfg.ShutdownGrace = DefaultShutdownGrace
	}
	if cfg.MaxAckPending <= 0 {
		cfg.MaxAckPending = max(1024, 4*cfg.Concurrency)
	}
	if cfg.FetchWait <= 0 {
		cfg.FetchWait = DefaultFetchWait
	}
	if cfg.MaxJobBytes <= 0 {
		cfg.MaxJobBytes = DefaultMaxJobBytes
	}
	return cfg
}

func (cfg WorkerConfig) validate() error {
	if cfg.MaxDeliver < 1 {
		return fmt.Errorf("max deliver %d: must be at least 1", cfg.MaxDeliver)
	}
	if cfg.MaxAckPending < cfg.Concurrency {
		return fmt.Errorf("max ack pending %d is below concurrency %d: delivery would stop silently", cfg.MaxAckPending, cfg.Concurrency)
	}
	if len(cfg.BackOff) > cfg.MaxDeliver {
		return fmt.Errorf("backoff has %d steps, more than max deliver %d", len(cfg.BackOff), cfg.MaxDeliver)
	}
	for i, b := range cfg.BackOff {
		if b <= 0 {
			return fmt.Errorf("backoff step %d is %v: must be positive", i, b)
		}
		if cfg.Heartbeat >= b {
			return fmt.Errorf("heartbeat %v is not inside backoff step %d (%v)", cfg.Heartbeat, i, b)
		}
	}
	if cfg.Heartbeat >= cfg.AckWait {
		return fmt.Errorf("heartbeat %v is not inside ack wait %v", cfg.Heartbeat, cfg.AckWait)
	}
	return nil
}

// workerConsumerConfig spells out every setting of the "workers" consumer.
func workerConsumerConfig(c *broker.Conn, cfg WorkerConfig) jetstream.ConsumerConfig {
	return jetstream.ConsumerConfig{
		Durable:           broker.WorkerConsumer,
		Description:       "pipeline workers",
		DeliverPolicy:     jetstream.DeliverAllPolicy,
		AckPolicy:         jetstream.AckExplicitPolicy,
		AckWait:           cfg.AckWait,
		MaxDeliver:        cfg.MaxDeliver,
		BackOff:           slices.Clone(cfg.BackOff),
		FilterSubject:     broker.SubjectJobs + ".>",
		ReplayPolicy:      jetstream.ReplayInstantPolicy,
		MaxWaiting:        consumerMaxWaiting,
		MaxAckPending:     cfg.MaxAckPending,
		MaxRequestBatch:   cfg.MaxAckPending,
		MaxRequestExpires: maxRequestExpires,
		InactiveThreshold: 0,
		Replicas:          c.Config().Replicas,
	}
}
