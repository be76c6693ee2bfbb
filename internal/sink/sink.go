package sink

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/nats-io/nats.go/jetstream"
)

// Defaults of Config, and the sink's pacing.
const (
	DefaultBatch    = 500
	DefaultMaxWait  = 100 * time.Millisecond
	DefaultGapGrace = 250 * time.Millisecond
	// offerWait bounds how long Offer holds a worker when the sink is
	// behind: a stalled index (SQLite locked) must not stall the workers.
	offerWait = 100 * time.Millisecond
	// stuckFor: after a wait ran out, a full queue refuses offers at once
	// for this long, so a stuck sink costs the workers one wait, not one
	// per outcome.
	stuckFor = time.Second
	// sinkMaxBackoff caps the delay between retries of a failed write: a
	// full disk that gets room again is written to within a few seconds.
	sinkMaxBackoff   = 2 * time.Second
	sinkFlushTimeout = 10 * time.Second
	idlePollInterval = 50 * time.Millisecond
)

func (cfg Config) withDefaults() Config {
	if cfg.Batch <= 0 {
		cfg.Batch = DefaultBatch
	}
	if cfg.MaxWait <= 0 {
		cfg.MaxWait = DefaultMaxWait
	}
	if cfg.GapGrace <= 0 {
		cfg.GapGrace = DefaultGapGrace
	}
	return cfg
}

// Sink indexes RESULTS and DLQ into a Index. The streams are the
// record; the index keeps a cursor per stream (every message up to it is
// indexed), written in the same transaction as the rows, and the sink
// resumes from it after a restart or a crash.
//
// The workers of the same process hand every outcome they stored over to
// Offer (WorkerConfig.Stored), with its stream sequence, so the sink does
// not read it back from the broker. What never arrives that way (other
// processes' outcomes, what a crash lost between the publish and the hand
// over, an offer dropped while the sink was busy) is a gap: a sequence the
// stream holds, missing for longer than a short grace. The sink reads gaps
// from the stream with direct gets (sinkread.go). Writing a message twice
// changes nothing, so an outcome that arrives both ways is harmless.
type Sink struct {
	c      *broker.Conn
	cfg    Config
	idx    Index
	log    *slog.Logger
	offers offerQueue

	mu      sync.Mutex
	cursors map[string]uint64 // committed, for Idle and Progress

	dropped    atomic.Int64 // offers refused because the sink was behind
	stuckUntil atomic.Int64 // unix ns: until then a full queue refuses at once
	waiting    atomic.Int64 // offers waiting for room now
	handed     int64        // messages written from an offer (loop only)
	read       int64        // messages written from the streams (loop only)
}

// New returns a sink writing into idx; Run starts it.
func New(c *broker.Conn, idx Index, cfg Config) *Sink {
	cfg = cfg.withDefaults()
	log := c.Logger()
	if cfg.Logger != nil {
		log = cfg.Logger
	}
	s := &Sink{c: c, cfg: cfg, idx: idx, log: log, cursors: map[string]uint64{}}
	s.offers.init(4 * cfg.Batch)
	return s
}

// Offer hands over a message the caller stored in RESULTS or DLQ (with its
// stream sequence from the publish's ack). When the sink is behind, Offer
// waits up to offerWait (100ms) for room: the workers slow down to the
// index's pace rather than make it read the message back from the broker,
// which costs more. After that the message is dropped and read from the
// stream later, and for the next second a full queue drops at once (a
// stuck sink must not hold the workers). It reports whether the sink took
// the message.
func (s *Sink) Offer(m Msg) bool {
	if m.Sequence == 0 || (m.Stream != broker.StreamResults && m.Stream != broker.StreamDLQ) {
		return false
	}
	if s.offers.put(m) {
		return true
	}
	if time.Now().UnixNano() < s.stuckUntil.Load() {
		// The last wait ran out a moment ago: the sink is stuck (its
		// index locked, say); do not hold every worker for it.
		s.dropped.Add(1)
		return false
	}
	s.waiting.Add(1)
	defer s.waiting.Add(-1)
	t := time.NewTimer(offerWait)
	defer t.Stop()
	for {
		select {
		case <-s.offers.space:
			if s.offers.put(m) {
				s.offers.ring(s.offers.space) // pass the room on to the next waiting worker
				return true
			}
		case <-t.C:
			s.stuckUntil.Store(time.Now().Add(stuckFor).UnixNano())
			s.dropped.Add(1)
			return false
		}
	}
}

// offerQueue carries offers from the workers to the sink loop: a bounded
// slice the loop takes whole, so a burst of outcomes wakes the loop once
// rather than once per outcome.
type offerQueue struct {
	mu    sync.Mutex
	items []Msg
	max   int
	bell  chan struct{} // rung when items stops being empty
	space chan struct{} // rung when the loop took the items
}

func (q *offerQueue) init(max int) {
	q.max, q.bell, q.space = max, make(chan struct{}, 1), make(chan struct{}, 1)
}

// put queues m unless the queue is full.
func (q *offerQueue) put(m Msg) bool {
	q.mu.Lock()
	if len(q.items) >= q.max {
		q.mu.Unlock()
		return false
	}
	q.items = append(q.items, m)
	first := len(q.items) == 1
	q.mu.Unlock()
	if first {
		q.ring(q.bell)
	}
	return true
}

// ring signals c without waiting (a signal already pending is enough).
func (q *offerQueue) ring(c chan struct{}) {
	select {
	case c <- struct{}{}:
	default:
	}
}

// take swaps the queued items for spare (emptied) and returns them.
func (q *offerQueue) take(spare []Msg) []Msg {
	q.mu.Lock()
	items := q.items
	q.items = spare[:0]
	q.mu.Unlock()
	q.ring(q.space)
	return items
}

func (q *offerQueue) len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.items)
}

// Progress returns, per stream, the sequence up to which the index holds
// every message.
func (s *Sink) Progress() map[string]uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return maps.Clone(s.cursors)
}

// sinkStream is the sink's view of one stream.
type sinkStream struct {
	name   string
	cursor uint64 // every sequence up to here is indexed (or absent)
	saved  uint64 // the cursor as the index has it
	// held: sequences above cursor the sink has; true once written (or
	// found absent), false while waiting in the batch.
	held map[uint64]bool
	// seen: the stream's last sequence as observed, oldest first; a
	// sequence up to one observed at least GapGrace ago is due.
	seen []observed
	due  uint64
}

type observed struct {
	at   time.Time
	last uint64
}

// missing returns the first sequence above cursor the sink does not have.
func (st *sinkStream) missing() uint64 {
	seq := st.cursor + 1
	for {
		if _, ok := st.held[seq]; !ok {
			return seq
		}
		seq++
	}
}

// advanced is where the cursor stands once every held sequence is written.
func (st *sinkStream) advanced() uint64 {
	c := st.cursor
	for {
		if _, ok := st.held[c+1]; !ok {
			return c
		}
		c++
	}
}

// commit moves the cursor over the written sequences.
func (st *sinkStream) commit() {
	for st.held[st.cursor+1] {
		delete(st.held, st.cursor+1)
		st.cursor++
	}
}

// jump moves the cursor to seq (the stream no longer holds what is below).
func (st *sinkStream) jump(seq uint64) {
	for s := range st.held {
		if s <= seq {
			delete(st.held, s)
		}
	}
	st.cursor = seq
	st.commit()
}

// Run indexes the streams until ctx is done (after writing what it holds,
// within sinkFlushTimeout) or, with UntilIdle, until the index holds every
// message of both streams. A failed write is retried with a growing delay
// (at most 2s) and nothing moves on meanwhile: nothing is skipped.
func (s *Sink) Run(ctx context.Context) error {
	cur, err := s.idx.Cursors(ctx)
	if err != nil {
		return fmt.Errorf("sink: %w", err)
	}
	streams := []*sinkStream{{name: broker.StreamResults}, {name: broker.StreamDLQ}}
	for _, st := range streams {
		st.cursor, st.saved, st.held = cur[st.name], cur[st.name], map[uint64]bool{}
		dropLegacySinkConsumer(ctx, s.c, st.name, s.log)
	}
	l := &sinkLoop{Sink: s, streams: streams, batch: make([]Msg, 0, s.cfg.Batch)}
	l.publish()
	defer func() {
		s.log.Debug("sink stopped", "handed_over", s.handed, "read_from_streams", s.read, "offers_dropped", s.dropped.Load(),
			"results_cursor", streams[0].cursor, "dlq_cursor", streams[1].cursor)
	}()
	return l.run(ctx)
}

type sinkLoop struct {
	*Sink
	streams []*sinkStream
	batch   []Msg
	fails   int
	// lastTrim is when the stream limits were last applied (trim).
	lastTrim time.Time
}

func (l *sinkLoop) stream(name string) *sinkStream {
	for _, st := range l.streams {
		if st.name == name {
			return st
		}
	}
	return nil
}

func (l *sinkLoop) run(ctx context.Context) error {
	tick := time.NewTicker(l.cfg.MaxWait)
	defer tick.Stop()
	idleStreak := 0
	var offered []Msg // the offers taken last, emptied and handed back as spare
	for {
		select {
		case <-ctx.Done():
			l.flushOnStop(ctx)
			return nil
		case <-l.offers.bell:
			offered = l.offers.take(offered)
			for i, m := range offered {
				l.take(m)
				if len(l.batch) >= l.cfg.Batch && !l.flush(ctx) {
					return nil
				}
				offered[i] = Msg{}
			}
			continue
		case <-tick.C:
		}
		caught, err := l.observe(ctx)
		if err != nil {
			if ctx.Err() != nil {
				l.flushOnStop(ctx)
				return nil
			}
			l.log.Warn("sink: reading the streams' state", "err", err)
		}
		if err == nil {
			if err := l.readGaps(ctx); err != nil {
				if ctx.Err() != nil {
					l.flushOnStop(ctx)
					return nil
				}
				l.log.Warn("sink: reading missing outcomes from the streams", "err", err)
			}
		}
		if (len(l.batch) > 0 || l.moved()) && !l.flush(ctx) {
			return nil
		}
		l.publish()
		l.trim(ctx, false)
		if !l.cfg.UntilIdle {
			continue
		}
		if err == nil && caught && len(l.batch) == 0 && l.offers.len() == 0 && l.caughtUp() {
			if idleStreak++; idleStreak >= 2 {
				l.trim(ctx, true)
				return nil
			}
		} else {
			idleStreak = 0
		}
	}
}

// take adds an offered message to the batch unless the sink has it.
func (l *sinkLoop) take(m Msg) {
	st := l.stream(m.Stream)
	if st == nil || m.Sequence <= st.cursor {
		return
	}
	if _, ok := st.held[m.Sequence]; ok {
		return
	}
	st.held[m.Sequence] = false
	l.batch = append(l.batch, m)
	l.handed++
}

// flush writes the batch with the cursors it completes, retrying with a
// growing delay until it is written. It returns false when ctx ended first
// (the batch is then written within sinkFlushTimeout, or left to the next
// run, which starts from the stored cursors).
func (l *sinkLoop) flush(ctx context.Context) bool {
	for {
		err := l.write(ctx)
		if err == nil {
			return true
		}
		if ctx.Err() != nil {
			l.flushOnStop(ctx)
			return false
		}
		l.fails++
		delay := broker.Jitter(min(time.Second<<min(l.fails-1, 5), sinkMaxBackoff))
		// The first failure is a warning; the retries that follow, every
		// couple of seconds, are not repeated at that level (the index
		// says once, at error level, when it cannot write at all).
		level := slog.LevelWarn
		if l.fails > 1 {
			level = slog.LevelDebug
		}
		l.log.Log(ctx, level, "sink write failed; retrying", "messages", len(l.batch), "failures", l.fails, "retry_in", delay, "err", err)
		select {
		case <-ctx.Done():
			l.flushOnStop(ctx)
			return false
		case <-time.After(delay):
		}
	}
}

// flushOnStop writes what the sink holds once ctx is done, bounded.
func (l *sinkLoop) flushOnStop(ctx context.Context) {
	if len(l.batch) == 0 && !l.moved() {
		return
	}
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), sinkFlushTimeout)
	defer cancel()
	if err := l.write(wctx); err != nil {
		l.log.Warn("sink: could not write its last batch; the next run reads it from the streams", "messages", len(l.batch), "err", err)
	}
}

func (l *sinkLoop) write(ctx context.Context) error {
	cursors := make(map[string]uint64, len(l.streams))
	for _, st := range l.streams {
		if c := st.advanced(); c != st.saved {
			cursors[st.name] = c
		}
	}
	if err := l.idx.Write(ctx, l.batch, cursors); err != nil {
		return err
	}
	if l.fails > 0 {
		l.log.Warn("sink write succeeded after failed attempts", "messages", len(l.batch), "failures", l.fails)
	}
	l.fails = 0
	// Everything held and not written was in the batch: all written now.
	for _, st := range l.streams {
		for seq := range st.held {
			st.held[seq] = true
		}
		st.commit()
		if c, ok := cursors[st.name]; ok {
			st.saved = c
		}
	}
	clear(l.batch)
	l.batch = l.batch[:0]
	l.publish()
	return nil
}

// moved reports whether a cursor moved without a message to write (only
// absent sequences, or the stream's first sequence jumped).
func (l *sinkLoop) moved() bool {
	for _, st := range l.streams {
		if st.advanced() != st.saved {
			return true
		}
	}
	return false
}

// caughtUp reports whether every stream's cursor covers all the sink has.
func (l *sinkLoop) caughtUp() bool {
	for _, st := range l.streams {
		if len(st.held) > 0 {
			return false
		}
	}
	return true
}

// publish makes the committed cursors visible to Progress and Idle.
func (l *sinkLoop) publish() {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, st := range l.streams {
		l.cursors[st.name] = st.cursor
	}
}

// Idle blocks until the index holds every message RESULTS and DLQ held
// when it was called (seen twice, polled every 50ms), or ctx ends. Call it
// after the workers stopped, before cancelling Run.
func (s *Sink) Idle(ctx context.Context) error {
	want := map[string]uint64{}
	for _, name := range []string{broker.StreamResults, broker.StreamDLQ} {
		info, err := s.c.StreamState(ctx, name)
		if err != nil {
			return err
		}
		want[name] = info.LastSeq
	}
	t := time.NewTicker(idlePollInterval)
	defer t.Stop()
	streak := 0
	for {
		got := s.Progress()
		done := true
		for name, last := range want {
			if got[name] < last {
				done = false
			}
		}
		if done {
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

// dropLegacySinkConsumer deletes the durable "sink" consumer earlier
// versions read a stream with; the cursors replace it. Best effort.
func dropLegacySinkConsumer(ctx context.Context, c *broker.Conn, stream string, log *slog.Logger) {
	err := c.JetStream().DeleteConsumer(ctx, stream, broker.SinkConsumer)
	switch {
	case err == nil:
		log.Info("sink: deleted the durable consumer of an earlier version (the index now keeps its own cursor)", "stream", stream, "consumer", broker.SinkConsumer)
	case errors.Is(err, jetstream.ErrConsumerNotFound):
	default:
		log.Debug("sink: deleting the earlier durable consumer", "stream", stream, "err", err)
	}
}
