package broker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// streamConfigs are the three streams, all on file storage.
func streamConfigs(c *Conn) []jetstream.StreamConfig {
	base := func(name, subject, desc string, ret jetstream.RetentionPolicy) jetstream.StreamConfig {
		return jetstream.StreamConfig{
			Name:        name,
			Description: desc,
			Subjects:    []string{subject + ".>"},
			Retention:   ret,
			Storage:     jetstream.FileStorage,
			Replicas:    c.cfg.Replicas,
			Duplicates:  cmp.Or(max(c.cfg.DuplicateWindow, 0), DefaultDuplicateWindow),
			Discard:     jetstream.DiscardOld,
			MaxMsgs:     -1,
			MaxBytes:    -1,
			MaxAge:      0,
			AllowDirect: true,
		}
	}
	return []jetstream.StreamConfig{
		base(StreamJobs, SubjectJobs, "pipeline jobs (work queue, Nats-Msg-Id = job id)", jetstream.WorkQueuePolicy),
		base(StreamResults, SubjectResults, "pipeline results (Nats-Msg-Id = job id)", jetstream.LimitsPolicy),
		base(StreamDLQ, SubjectDLQ, "pipeline dead letters (Nats-Msg-Id = job id)", jetstream.LimitsPolicy),
	}
}

// ensureStreams creates the streams, the payload object store and the job
// ledger, or updates them to the configuration; running it again changes
// nothing. What the configuration leaves unset (the duplicate window, the
// stream limits) is read back from the existing streams, never re-asserted.
func ensureStreams(ctx context.Context, c *Conn) error {
	for _, sc := range streamConfigs(c) {
		have, err := storedConfig(ctx, c, sc.Name)
		if err != nil {
			return err
		}
		if have != nil {
			sc.Metadata = maps.Clone(have.Metadata)
			if c.cfg.DuplicateWindow <= 0 && have.Duplicates > 0 {
				sc.Duplicates = have.Duplicates
			}
		}
		if sc.Name != StreamJobs {
			applyLimits(c, &sc, have)
		}
		if _, err := c.js.CreateOrUpdateStream(ctx, sc); err != nil {
			return fmt.Errorf("creating or updating stream %s (%s, replicas %d): %w", sc.Name, sc.Subjects[0], sc.Replicas, err)
		}
		if sc.Name == StreamJobs {
			c.dupWindow.Store(int64(sc.Duplicates))
		}
	}
	return EnsureBuckets(ctx, c)
}

// storedConfig is the configuration of stream name as the server has it,
// nil when the stream does not exist.
func storedConfig(ctx context.Context, c *Conn, name string) (*jetstream.StreamConfig, error) {
	s, err := c.js.Stream(ctx, name)
	switch {
	case errors.Is(err, jetstream.ErrStreamNotFound):
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("looking up stream %s: %w", name, err)
	}
	cfg := s.CachedInfo().Config
	return &cfg, nil
}

// minDuplicateWindow is the shortest duplicate window the server accepts.
const minDuplicateWindow = 100 * time.Millisecond

// MetaMaxAge and MetaMaxBytes are the stream metadata keys holding the
// limits the sink applies (StreamLimits).
const (
	MetaMaxAge   = "pipeline.max_age"
	MetaMaxBytes = "pipeline.max_bytes"
)

// applyLimits records the configured StreamLimits in sc's metadata,
// keeping the existing stream's (have) setting for a limit that is not
// configured. The server's own MaxAge and MaxBytes stay unlimited: it
// would discard outcomes the index has not read; the sink applies the
// limits instead, to what the index holds (Sink, trim). A stream of an
// earlier version with the server's limits set has them moved over. The
// duplicate window of a stream with a max age is capped at that age (said
// when the cap changes the stream).
func applyLimits(c *Conn, sc *jetstream.StreamConfig, have *jetstream.StreamConfig) {
	var age time.Duration
	var size int64
	if have != nil {
		age, size = LimitsOf(*have)
		if _, ok := have.Metadata[MetaMaxAge]; !ok && (have.MaxAge > 0 || have.MaxBytes > 0) {
			age, size = max(have.MaxAge, 0), max(have.MaxBytes, 0)
			c.log.Info("stream limits now applied by the sink, to what the index holds, instead of the server", "stream", sc.Name, "max_age", age, "max_bytes", size)
		}
	}
	lim := c.cfg.StreamLimits
	if lim.MaxAge != nil {
		age = max(*lim.MaxAge, 0)
	}
	if lim.MaxBytes != nil {
		size = max(*lim.MaxBytes, 0)
	}
	if sc.Metadata == nil {
		sc.Metadata = map[string]string{}
	}
	sc.Metadata[MetaMaxAge] = age.String()
	sc.Metadata[MetaMaxBytes] = strconv.FormatInt(size, 10)
	sc.MaxAge, sc.MaxBytes = 0, -1
	if capped := max(age, minDuplicateWindow); age > 0 && sc.Duplicates > capped {
		if have == nil || have.Duplicates != capped {
			c.log.Warn("duplicate window capped at the streams' max age (a message id is remembered at most as long as the outcome is kept)", "stream", sc.Name, "duplicate_window", sc.Duplicates, "max_age", age)
		}
		sc.Duplicates = capped
	}
}

// LimitsOf reads the limits the sink applies from a stream's metadata
// (zero: none).
func LimitsOf(cfg jetstream.StreamConfig) (time.Duration, int64) {
	age, _ := time.ParseDuration(cfg.Metadata[MetaMaxAge])
	size, _ := strconv.ParseInt(cfg.Metadata[MetaMaxBytes], 10, 64)
	return max(age, 0), max(size, 0)
}

// EnsureConsumer creates the durable consumer, or updates it when its
// configuration drifted from want. When the server refuses the update the
// error lists what differs.
func (c *Conn) EnsureConsumer(ctx context.Context, stream string, want jetstream.ConsumerConfig) (jetstream.Consumer, error) {
	s, err := c.js.Stream(ctx, stream)
	if err != nil {
		return nil, fmt.Errorf("looking up stream %s: %w", stream, err)
	}
	existing, err := s.Consumer(ctx, want.Durable)
	switch {
	case errors.Is(err, jetstream.ErrConsumerNotFound):
		cons, err := s.CreateConsumer(ctx, want)
		if err != nil && !errors.Is(err, jetstream.ErrConsumerExists) {
			return nil, fmt.Errorf("creating consumer %s on %s: %w", want.Durable, stream, err)
		}
		if err == nil {
			return cons, nil
		}
		// Another process created it meanwhile: fall through to the check.
		existing, err = s.Consumer(ctx, want.Durable)
		if err != nil {
			return nil, fmt.Errorf("looking up consumer %s on %s: %w", want.Durable, stream, err)
		}
	case err != nil:
		return nil, fmt.Errorf("looking up consumer %s on %s: %w", want.Durable, stream, err)
	}
	diff := ConsumerDiff(existing.CachedInfo().Config, want)
	if len(diff) == 0 {
		return existing, nil
	}
	c.log.Info("consumer configuration drifted; updating", "stream", stream, "consumer", want.Durable, "differs", strings.Join(diff, "; "))
	cons, err := s.UpdateConsumer(ctx, want)
	if err != nil {
		return nil, fmt.Errorf("updating consumer %s on %s (differs: %s): %w", want.Durable, stream, strings.Join(diff, "; "), err)
	}
	return cons, nil
}

// ConsumerDiff names the settings of a consumer that the pipeline sets
// (EnsureConsumer) whose values differ between have and want.
func ConsumerDiff(have, want jetstream.ConsumerConfig) []string {
	var d []string
	add := func(name string, h, w any) {
		if fmt.Sprint(h) != fmt.Sprint(w) {
			d = append(d, fmt.Sprintf("%s %v, want %v", name, h, w))
		}
	}
	add("deliver_policy", have.DeliverPolicy, want.DeliverPolicy)
	add("ack_policy", have.AckPolicy, want.AckPolicy)
	add("ack_wait", have.AckWait, want.AckWait)
	add("max_deliver", have.MaxDeliver, want.MaxDeliver)
	add("backoff", have.BackOff, want.BackOff)
	add("filter_subject", have.FilterSubject, want.FilterSubject)
	add("replay_policy", have.ReplayPolicy, want.ReplayPolicy)
	add("max_waiting", have.MaxWaiting, want.MaxWaiting)
	add("max_ack_pending", have.MaxAckPending, want.MaxAckPending)
	add("max_batch", have.MaxRequestBatch, want.MaxRequestBatch)
	add("max_expires", have.MaxRequestExpires, want.MaxRequestExpires)
	add("inactive_threshold", have.InactiveThreshold, want.InactiveThreshold)
	if want.Replicas > 0 {
		add("num_replicas", have.Replicas, want.Replicas)
	}
	return d
}

// DuplicateWindow is the JOBS stream's duplicate window: the configured
// one, or the stream's own when none was configured.
func (c *Conn) DuplicateWindow() time.Duration {
	if d := time.Duration(c.dupWindow.Load()); d > 0 {
		return d
	}
	return cmp.Or(max(c.cfg.DuplicateWindow, 0), DefaultDuplicateWindow)
}

// StreamLimitsOf reads a stream's limits (StreamLimits; zero when unknown
// or unlimited).
func (c *Conn) StreamLimitsOf(ctx context.Context, name string) (time.Duration, int64) {
	s, err := c.js.Stream(ctx, name)
	if err != nil {
		return 0, 0
	}
	return LimitsOf(s.CachedInfo().Config)
}
