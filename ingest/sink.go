package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

// Defaults of SinkConfig.
const (
	DefaultSinkBatch   = 500
	DefaultSinkMaxWait = 100 * time.Millisecond
	// sinkAckWait is short so that what a crashed sink held is indexed
	// soon by the next one (the suite's kill -9 and cluster scenarios
	// waited 30s for it); a batch being written is kept alive with
	// InProgress every sinkAckWait/3, however long SQLite makes it wait.
	sinkAckWait      = 10 * time.Second
	sinkMaxBackoff   = 30 * time.Second
	sinkFlushTimeout = 10 * time.Second
	idlePollInterval = 50 * time.Millisecond
)

func (cfg SinkConfig) withDefaults() SinkConfig {
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultSinkBatch
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = DefaultSinkMaxWait
	}
	return cfg
}

// sinkConsumerConfig: the durable "sink" consumer of RESULTS or DLQ. It
// never gives a message up (MaxDeliver -1): nothing leaves unstored.
func (c *Conn) sinkConsumerConfig(subject string, cfg SinkConfig) jetstream.ConsumerConfig {
	pending := max(4*cfg.Batch, 1024)
	return jetstream.ConsumerConfig{
		Durable:           SinkConsumer,
		Description:       "pipeline sink (analytics index)",
		DeliverPolicy:     jetstream.DeliverAllPolicy,
		AckPolicy:         jetstream.AckExplicitPolicy,
		AckWait:           sinkAckWait,
		MaxDeliver:        -1,
		FilterSubject:     subject + ".>",
		ReplayPolicy:      jetstream.ReplayInstantPolicy,
		MaxWaiting:        consumerMaxWaiting,
		MaxAckPending:     pending,
		MaxRequestBatch:   pending,
		MaxRequestExpires: maxRequestExpires,
		InactiveThreshold: 0,
		Replicas:          c.cfg.Replicas,
	}
}

// RunSink consumes RESULTS and DLQ with the durable "sink" consumer (one on
// each stream) and calls write with batches of up to Batch messages, waiting
// at most MaxWait to fill one. write is never called concurrently. Messages
// are acked only after write returns nil; on error they are naked with a
// growing delay and redelivered, so nothing is acked unstored. RunSink
// returns nil when ctx is done (after writing what it holds) or, with
// UntilIdle, once both consumers have nothing pending or unacked.
func (c *Conn) RunSink(ctx context.Context, cfg SinkConfig, write func(ctx context.Context, batch []SinkMsg) error) error {
	cfg = cfg.withDefaults()
	log := c.log
	if cfg.Logger != nil {
		log = cfg.Logger
	}
	var iters []jetstream.MessagesContext
	defer func() {
		for _, it := range iters {
			it.Stop()
		}
	}()
	for _, sc := range []struct{ stream, subject string }{{StreamResults, SubjectResults}, {StreamDLQ, SubjectDLQ}} {
		cons, err := c.ensureConsumer(ctx, sc.stream, c.sinkConsumerConfig(sc.subject, cfg))
		if err != nil {
			return err
		}
		it, err := cons.Messages(jetstream.PullMaxMessages(cfg.Batch), jetstream.WithMessagesErrOnMissingHeartbeat(false))
		if err != nil {
			return fmt.Errorf("consuming %s: %w", sc.stream, err)
		}
		iters = append(iters, it)
	}

	msgs := make(chan jetstream.Msg, cfg.Batch)
	done := make(chan struct{})
	var feeders sync.WaitGroup
	for _, it := range iters {
		feeders.Go(func() { feed(it, msgs, done, log) })
	}
	defer func() {
		close(done)
		for _, it := range iters {
			it.Stop()
		}
		feeders.Wait()
	}()

	s := &sinkLoop{c: c, cfg: cfg, log: log, write: write}
	return s.run(ctx, msgs)
}

// feed moves messages from one iterator to the sink loop.
func feed(it jetstream.MessagesContext, out chan<- jetstream.Msg, done <-chan struct{}, log *slog.Logger) {
	for {
		msg, err := it.Next()
		if err != nil {
			if errors.Is(err, jetstream.ErrMsgIteratorClosed) {
				return
			}
			log.Debug("sink consumer", "err", err)
			select {
			case <-done:
				return
			case <-time.After(100 * time.Millisecond):
			}
			continue
		}
		select {
		case out <- msg:
		case <-done:
			return // unacked: redelivered after the sink's ack wait
		}
	}
}

type sinkLoop struct {
	c     *Conn
	cfg   SinkConfig
	log   *slog.Logger
	write func(ctx context.Context, batch []SinkMsg) error
	fails int
}

func (s *sinkLoop) run(ctx context.Context, msgs <-chan jetstream.Msg) error {
	batch := make([]jetstream.Msg, 0, s.cfg.Batch)
	idleStreak := 0
	idleTick := time.NewTicker(max(s.cfg.MaxWait, idlePollInterval))
	defer idleTick.Stop()
	for {
		// Wait for the first message of a batch.
		select {
		case <-ctx.Done():
			return nil
		case m := <-msgs:
			batch = append(batch, m)
			idleStreak = 0
		case <-idleTick.C:
			if !s.cfg.UntilIdle {
				continue
			}
			idle, err := s.c.sinkIdleOnce(ctx)
			if err != nil {
				if ctx.Err() != nil {
					return nil
				}
				s.log.Warn("checking whether the sink is idle", "err", err)
				continue
			}
			if !idle || len(msgs) > 0 {
				idleStreak = 0
				continue
			}
			if idleStreak++; idleStreak >= 2 {
				return nil
			}
			continue
		}
		// Fill it up to Batch or MaxWait.
		timer := time.NewTimer(s.cfg.MaxWait)
	fill:
		for len(batch) < s.cfg.Batch {
			select {
			case m := <-msgs:
				batch = append(batch, m)
			case <-timer.C:
				break fill
			case <-ctx.Done():
				break fill
			}
		}
		timer.Stop()
		s.flush(ctx, batch)
		batch = batch[:0]
	}
}

// flush writes one batch and acks it, or naks it all when write fails. When
// ctx is done the batch is still written, within sinkFlushTimeout.
func (s *sinkLoop) flush(ctx context.Context, batch []jetstream.Msg) {
	wctx := ctx
	if ctx.Err() != nil {
		var cancel context.CancelFunc
		wctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), sinkFlushTimeout)
		defer cancel()
	}
	out := make([]SinkMsg, len(batch))
	for i, m := range batch {
		out[i] = toSinkMsg(m)
	}
	stopBeats := inProgressWhile(batch, sinkAckWait/3)
	err := s.write(wctx, out)
	stopBeats()
	if err != nil {
		s.fails++
		delay := jitter(min(time.Second<<min(s.fails-1, 5), sinkMaxBackoff))
		s.log.Warn("sink write failed; batch handed back", "messages", len(batch), "retry_in", delay, "err", err)
		for _, m := range batch {
			_ = m.NakWithDelay(delay)
		}
		return
	}
	s.fails = 0
	for _, m := range batch {
		if err := m.Ack(); err != nil {
			s.log.Warn("acking a stored sink message (redelivery is idempotent)", "subject", m.Subject(), "err", err)
		}
	}
}

// inProgressWhile tells the server every period that the batch is still
// being worked on, until the returned stop is called.
func inProgressWhile(batch []jetstream.Msg, period time.Duration) (stop func()) {
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		t := time.NewTicker(period)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			for _, m := range batch {
				_ = m.InProgress() // best effort: a lost one costs a redelivery, written idempotently
			}
		}
	})
	return func() {
		close(done)
		wg.Wait()
	}
}

func toSinkMsg(m jetstream.Msg) SinkMsg {
	sm := SinkMsg{Subject: m.Subject(), Data: m.Data(), MsgID: m.Headers().Get(jetstream.MsgIDHeader)}
	if meta, err := m.Metadata(); err == nil {
		sm.Stream = meta.Stream
		sm.Sequence = meta.Sequence.Stream
		sm.Time = meta.Timestamp
	}
	return sm
}

// SinkIdle blocks until the sink consumers of RESULTS and DLQ have nothing
// pending or unacked (seen twice in a row, polled every 50ms), or ctx ends.
// A stream whose sink consumer does not exist yet is idle only if empty.
func (c *Conn) SinkIdle(ctx context.Context) error {
	t := time.NewTicker(idlePollInterval)
	defer t.Stop()
	streak := 0
	for {
		idle, err := c.sinkIdleOnce(ctx)
		if err != nil {
			return err
		}
		if idle {
			if streak++; streak >= 2 {
				return nil
			}
		} else {
			streak = 0
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the sink to catch up: %w", ctx.Err())
		case <-t.C:
		}
	}
}

func (c *Conn) sinkIdleOnce(ctx context.Context) (bool, error) {
	for _, name := range []string{StreamResults, StreamDLQ} {
		s, err := c.js.Stream(ctx, name)
		if err != nil {
			return false, fmt.Errorf("looking up stream %s: %w", name, err)
		}
		cons, err := s.Consumer(ctx, SinkConsumer)
		if errors.Is(err, jetstream.ErrConsumerNotFound) {
			if s.CachedInfo().State.Msgs > 0 {
				return false, nil
			}
			continue
		}
		if err != nil {
			return false, fmt.Errorf("looking up consumer %s on %s: %w", SinkConsumer, name, err)
		}
		info := cons.CachedInfo()
		if info.NumPending > 0 || info.NumAckPending > 0 {
			return false, nil
		}
	}
	return true, nil
}
