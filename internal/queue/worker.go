package queue

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/ledger"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrStopped is returned by RunWorkers when a handler asked to stop
// (ActionStop) without an error of its own.
var ErrStopped = errors.New("worker stopped by handler")

// AdvisoryMaxDeliveries is the subject on which the server announces that a
// job reached MaxDeliver on the workers consumer.
const AdvisoryMaxDeliveries = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + broker.StreamJobs + "." + broker.WorkerConsumer

const (
	orphanQueueGroup = "pipeline-orphans"
	shutdownNakDelay = time.Second
	// leftoverWait bounds the wait for handlers that ignore their cancelled
	// context after the shutdown grace.
	leftoverWait = 5 * time.Second
	// gatherWindow is the longest the fetcher waits for more free slots
	// before it fetches for the ones it has.
	gatherWindow = 5 * time.Millisecond
)

// inflight is one job being handled.
type inflight struct {
	msg     jetstream.Msg // nil for an orphan read from the stream
	settled atomic.Bool   // acked, naked or termed (first one wins for naks)
}

// delivered is one fetched job on its way from the fetcher to a handler
// goroutine.
type delivered struct {
	msg jetstream.Msg
	j   *inflight
	// ledger is the ledger read started when the job was fetched, under
	// the key its message id names (nil without one): it runs while the
	// job waits for a handler goroutine.
	ledger *ledger.Query
}

// settling is one handled job on its way to a settler goroutine.
type settling struct {
	j   *inflight
	d   *Delivery
	out Outcome
}

type runner struct {
	c      *broker.Conn
	ledger *ledger.Ledger
	docs   *docEnder // nil without WorkerConfig.Documents
	// hooks are told of every outcome stored (WorkerConfig.Stored and
	// Repeated).
	hooks OutcomeHooks
	cfg   WorkerConfig
	h     Handler
	log   *slog.Logger
	cons  jetstream.Consumer
	jobs  jetstream.Stream

	// sem holds a slot per job fetched and not yet handled (waiting in
	// queue or in Handle), and per orphan being handled: at most
	// Concurrency + prefetch. outstanding holds one per job fetched and
	// not yet settled (acked, naked or termed), so the jobs whose outcome
	// is being published are bounded too, and never more than
	// MaxAckPending.
	sem         chan struct{}
	outstanding chan struct{}
	queue       chan delivered // fetched jobs for the handler goroutines
	settleQ     chan settling  // handled jobs for the settler goroutines
	closing     atomic.Bool    // set once fetching has stopped: queued jobs are handed back
	workers     sync.WaitGroup // handler and settler goroutines
	wg          sync.WaitGroup // orphan handlers

	mu  sync.Mutex
	set map[*inflight]struct{}

	runCtx     context.Context // RunWorkers' ctx: once done, queued jobs are handed back
	handlerCtx context.Context // cancelled when the shutdown grace runs out
	pubCtx     context.Context // for result publishes and acks; cancelled on return

	stopOnce sync.Once
	stopCh   chan struct{}
	stopErr  error

	orphans *orphanage
}

// RunWorkers consumes jobs with the durable "workers" pull consumer until ctx
// is done (graceful: stop fetching, wait up to ShutdownGrace, nak the rest),
// until idle (UntilIdle), or until a handler returns ActionStop.
//
// At most Concurrency jobs are in Handle, run by as many long-lived
// goroutines; up to half as many more wait fetched ahead, and outcomes are
// stored and acked by settler goroutines so a handler slot is free as soon
// as Handle returns. Every job fetched gets InProgress heartbeats every
// Heartbeat until it is settled.
// A panic in Handle is recovered: the job is naked with a delay, and on its
// last delivery Handle is called once more with Delivery.Orphan set so the
// handler dead-letters it. Jobs that reach MaxDeliver without an answer
// (their worker died) are read back from the stream when the server's
// MAX_DELIVERIES advisory arrives (or, missed advisories, when the consumer
// is idle), handed to Handle with Orphan set, and removed from the stream
// once their outcome is stored.
func RunWorkers(ctx context.Context, c *broker.Conn, cfg WorkerConfig, h Handler) error {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return fmt.Errorf("configuring workers: %w", err)
	}
	log := cfg.Logger
	if log == nil {
		log = c.Logger()
	}
	var cons jetstream.Consumer
	var jobs jetstream.Stream
	err := c.RetryOnHandover(ctx, "setting up the workers' consumer", func() error {
		var err error
		if cons, err = c.EnsureConsumer(ctx, broker.StreamJobs, workerConsumerConfig(c, cfg)); err != nil {
			return err
		}
		if jobs, err = c.JetStream().Stream(ctx, broker.StreamJobs); err != nil {
			return fmt.Errorf("looking up stream %s: %w", broker.StreamJobs, err)
		}
		return nil
	})
	if err != nil {
		return err
	}
	handlerCtx, cancelHandlers := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelHandlers()
	pubCtx, cancelPub := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelPub()

	prefetch := prefetchFor(cfg.Concurrency)
	// Settling jobs are bounded by Concurrency on top of those fetched and
	// not handled, and everything by MaxAckPending (a pull may not ask for
	// more than MaxRequestBatch, which is MaxAckPending).
	outstanding := min(cfg.MaxAckPending, 2*cfg.Concurrency+prefetch)
	r := &runner{
		c: c, ledger: ledger.New(c), cfg: cfg, h: h, log: log, cons: cons, jobs: jobs,
		sem:         make(chan struct{}, cfg.Concurrency+prefetch),
		outstanding: make(chan struct{}, outstanding),
		queue:       make(chan delivered, cfg.Concurrency+prefetch),
		settleQ:     make(chan settling, outstanding),
		set:         make(map[*inflight]struct{}),
		runCtx:      ctx,
		handlerCtx:  handlerCtx,
		pubCtx:      pubCtx,
		stopCh:      make(chan struct{}),
		hooks:       OutcomeHooks{Stored: cfg.Stored, Repeated: cfg.Repeated},
	}
	if cfg.Documents != nil {
		states, err := ledger.NewDocuments(ctx, c)
		if err != nil {
			return err
		}
		r.docs = &docEnder{r: r, states: states, merger: cfg.Documents}
	}
	r.orphans = &orphanage{r: r, queue: make(chan uint64, 1024), failedSeqs: make(map[uint64]bool)}

	sub, err := c.NATS().QueueSubscribe(AdvisoryMaxDeliveries, orphanQueueGroup, r.orphans.onAdvisory)
	if err != nil {
		return fmt.Errorf("subscribing to max-deliveries advisories: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := c.NATS().Flush(); err != nil {
		return fmt.Errorf("subscribing to max-deliveries advisories: %w", err)
	}

	loopCtx, stopLoops := context.WithCancel(ctx)
	var bg sync.WaitGroup
	bg.Go(func() { r.heartbeats(loopCtx) })
	bg.Go(func() { r.orphans.orphanLoop(loopCtx) })
	// Long-lived goroutines keep their grown stacks: a goroutine per job
	// grew a fresh one to the validator's depth every time.
	var handlers sync.WaitGroup
	for range cfg.Concurrency {
		handlers.Go(r.handleLoop)
	}
	for range cfg.Concurrency {
		r.workers.Go(r.settleLoop)
	}
	r.workers.Go(func() {
		handlers.Wait()
		close(r.settleQ)
	})

	runErr := r.fetchLoop(ctx)

	// Nothing is fetched any more: hand back at once the jobs that were
	// fetched ahead and not started.
	r.closing.Store(true)
	close(r.queue)
	r.handBackQueued()
	stopLoops()
	bg.Wait()
	r.drain(cancelHandlers)
	// Acks and naks are fire-and-forget: make sure they left.
	if err := c.NATS().FlushTimeout(5 * time.Second); err != nil {
		log.Warn("flushing acks on return", "err", err)
	}
	if runErr != nil {
		return runErr
	}
	select {
	case <-r.stopCh:
		return r.stopErr
	default:
	}
	return nil
}

// fetchLoop takes work until ctx is done, a handler stops the worker, or
// (UntilIdle) the consumer is idle.
func (r *runner) fetchLoop(ctx context.Context) error {
	idleStreak := 0
	for {
		if ctx.Err() != nil || r.stopped() {
			return nil
		}
		if r.cfg.Gate != nil {
			if err := r.cfg.Gate(ctx); err != nil {
				if ctx.Err() != nil {
					return nil
				}
				return fmt.Errorf("waiting for the gate: %w", err)
			}
		}
		// One free slot at least, then all that are free.
		select {
		case r.sem <- struct{}{}:
		case <-ctx.Done():
			return nil
		case <-r.stopCh:
			return nil
		}
		n := r.gatherSlots(ctx)
		// As many outstanding places, waiting for settling jobs if need be.
		for i := range n {
			select {
			case r.outstanding <- struct{}{}:
				continue
			case <-ctx.Done():
			case <-r.stopCh:
			}
			for range n - i {
				<-r.sem
			}
			for range i {
				<-r.outstanding
			}
			return nil
		}
		got, err := r.fetch(ctx, n)
		for range n - got {
			<-r.sem
			<-r.outstanding
		}
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			r.log.Warn("fetching jobs", "err", err)
			select {
			case <-time.After(r.cfg.FetchWait):
			case <-ctx.Done():
			}
			continue
		}
		if got > 0 || !r.cfg.UntilIdle {
			idleStreak = 0
			continue
		}
		idle, err := r.idle(ctx)
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			r.log.Warn("checking whether the jobs consumer is idle", "err", err)
			idleStreak = 0
			continue
		}
		if !idle {
			idleStreak = 0
			continue
		}
		// Twice in a row, a fetch apart: an ack or a delayed nak in transit
		// shows up in one of the two.
		if idleStreak++; idleStreak >= 2 {
			return nil
		}
	}
}

// gatherSlots holds one slot already; it takes every free slot and, while
// fewer than a quarter of Concurrency are free, waits up to gatherWindow
// for more, so one fetch brings a batch rather than a job at a time (a
// fetch costs a subscription and a request). It returns the slots held.
func (r *runner) gatherSlots(ctx context.Context) int {
	n, target := 1, max(1, r.cfg.Concurrency/4)
	var timer <-chan time.Time
	for n < cap(r.sem) {
		select {
		case r.sem <- struct{}{}:
			n++
			continue
		default:
		}
		if n >= target {
			return n
		}
		if timer == nil {
			timer = time.After(gatherWindow)
		}
		select {
		case r.sem <- struct{}{}:
			n++
		case <-timer:
			return n
		case <-ctx.Done():
			return n
		}
	}
	return n
}

// fetch pulls up to n jobs and queues each for a handler goroutine; it
// returns how many it received (each holds a slot until handled and an
// outstanding place until settled).
func (r *runner) fetch(ctx context.Context, n int) (int, error) {
	batch, err := r.cons.Fetch(n, jetstream.FetchMaxWait(r.cfg.FetchWait))
	if err != nil {
		return 0, fmt.Errorf("fetching %d jobs: %w", n, err)
	}
	got := 0
	for msg := range batch.Messages() {
		got++
		if ctx.Err() != nil || r.stopped() {
			// Arrived after shutdown began: hand it back.
			r.nak(msg, shutdownNakDelay)
			r.handedBack(1)
			<-r.sem
			<-r.outstanding
			continue
		}
		// Tracked from now on, so heartbeats reach it while it waits.
		j := &inflight{msg: msg}
		r.track(j)
		q := delivered{msg: msg, j: j}
		if id := msg.Headers().Get(jetstream.MsgIDHeader); id != "" {
			k := ledger.RunOfMsgID(id)
			q.ledger = r.ledger.Ask(k.JobID, k.Run)
		}
		r.queue <- q // room: one slot per place
	}
	if err := batch.Error(); err != nil && !errors.Is(err, nats.ErrTimeout) && !errors.Is(err, context.DeadlineExceeded) {
		return got, fmt.Errorf("fetching %d jobs: %w", n, err)
	}
	return got, nil
}

// idle reports whether the consumer has nothing pending or unacked and
// nothing is in flight here; first it sweeps up stranded orphans.
func (r *runner) idle(ctx context.Context) (bool, error) {
	if r.inflightCount() > 0 || len(r.sem) > 0 || len(r.outstanding) > 0 {
		return false, nil
	}
	info, err := r.cons.Info(ctx)
	if err != nil {
		return false, err
	}
	if info.NumPending > 0 || info.NumAckPending > 0 {
		return false, nil
	}
	// Nothing pending or unacked: every job at or below the last delivered
	// sequence that is still stored has used up its deliveries.
	swept, err := r.orphans.sweep(ctx, info.Delivered.Stream)
	if err != nil {
		return false, err
	}
	return swept == 0 && len(r.sem) == 0, nil
}

func (r *runner) stopped() bool {
	select {
	case <-r.stopCh:
		return true
	default:
		return false
	}
}

// stop stops the worker with err; it reports whether this call did (the
// first one), so that one stop is logged once, not once per job in flight.
func (r *runner) stop(err error) (first bool) {
	r.stopOnce.Do(func() {
		if err == nil {
			err = ErrStopped
		}
		r.stopErr = err
		close(r.stopCh)
		first = true
	})
	return first
}

func (r *runner) track(j *inflight) {
	r.mu.Lock()
	r.set[j] = struct{}{}
	r.mu.Unlock()
}

func (r *runner) untrack(j *inflight) {
	r.mu.Lock()
	delete(r.set, j)
	r.mu.Unlock()
}

func (r *runner) inflightCount() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.set)
}

// heartbeats tells the server every in-flight job is still being worked on.
func (r *runner) heartbeats(ctx context.Context) {
	t := time.NewTicker(r.cfg.Heartbeat)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		r.mu.Lock()
		for j := range r.set {
			if j.msg != nil && !j.settled.Load() {
				_ = j.msg.InProgress()
			}
		}
		r.mu.Unlock()
	}
}

// handBackQueued naks, with a short delay, the jobs fetched ahead that no
// handler goroutine has started; the queue is closed.
func (r *runner) handBackQueued() {
	n := 0
	for q := range r.queue {
		r.handBack(q)
		n++
	}
	if n > 0 {
		r.log.Debug("handed back jobs fetched ahead", "jobs", n)
	}
}

func (r *runner) handBack(q delivered) {
	r.nakOnce(q.j, broker.Jitter(shutdownNakDelay))
	r.handedBack(1)
	r.untrack(q.j)
	<-r.sem
	<-r.outstanding
}

// handedBack reports n jobs handed back undone to WorkerConfig.HandedBack.
func (r *runner) handedBack(n int) {
	if n > 0 && r.cfg.HandedBack != nil {
		r.cfg.HandedBack(n)
	}
}

// handleLoop is one of Concurrency handler goroutines: it runs Handle for
// queued jobs and passes the outcome on to the settlers, so its slot is free
// for the next job while the outcome is published.
func (r *runner) handleLoop() {
	for q := range r.queue {
		if r.closing.Load() || r.stopped() || r.runCtx.Err() != nil {
			r.handBack(q)
			continue
		}
		d, out := r.handleMsg(q.msg, q.ledger)
		if out.Action == ActionStop {
			// Stop here, before this goroutine takes another job: a
			// handler that cannot go on (auth) is not called again.
			r.settle(q.j, d, out)
			r.untrack(q.j)
			<-r.sem
			<-r.outstanding
			continue
		}
		<-r.sem
		r.settleQ <- settling{j: q.j, d: d, out: out} // room: one per outstanding place
	}
}

// settleLoop is one of Concurrency settler goroutines: it stores handled
// jobs' outcomes and acks or naks them.
func (r *runner) settleLoop() {
	for s := range r.settleQ {
		r.settle(s.j, s.d, s.out)
		r.untrack(s.j)
		<-r.outstanding
	}
}

// drain waits for in-flight handlers up to ShutdownGrace; then it cancels
// their context, naks what is left and waits a little more for them.
func (r *runner) drain(cancelHandlers context.CancelFunc) {
	done := make(chan struct{})
	go func() {
		r.workers.Wait()
		r.wg.Wait()
		close(done)
	}()
	grace := time.NewTimer(r.cfg.ShutdownGrace)
	defer grace.Stop()
	select {
	case <-done:
		return
	case <-grace.C:
	}
	cancelHandlers()
	r.mu.Lock()
	left := 0
	for j := range r.set {
		if j.msg != nil && j.settled.CompareAndSwap(false, true) {
			_ = j.msg.NakWithDelay(broker.Jitter(shutdownNakDelay))
			left++
		}
	}
	r.mu.Unlock()
	r.handedBack(left)
	r.log.Warn("shutdown grace ran out; handed in-flight jobs back", "jobs", left, "grace", r.cfg.ShutdownGrace)
	select {
	case <-done:
	case <-time.After(leftoverWait):
		r.log.Error("handlers did not return after their context was cancelled", "wait", leftoverWait)
	}
}

// handleMsg runs the handler for one delivered job; the caller settles it.
func (r *runner) handleMsg(msg jetstream.Msg, ledger *ledger.Query) (*Delivery, Outcome) {
	d := &Delivery{
		SchemaToken: broker.SchemaOfSubject(msg.Subject()),
		MsgID:       msg.Headers().Get(jetstream.MsgIDHeader),
		MaxDeliver:  r.cfg.MaxDeliver,
		inProgress:  func() { _ = msg.InProgress() },
	}
	var seq uint64
	if meta, err := msg.Metadata(); err == nil {
		d.NumDelivered = int(meta.NumDelivered)
		seq = meta.Sequence.Stream
	}
	if out, ok := r.prepare(d, msg.Headers(), msg.Data(), seq, ledger); !ok {
		return d, out
	}

	out, ok := r.call(d)
	if !ok && d.Last() {
		// Last delivery and the handler panicked: its Orphan path
		// dead-letters the job instead of stranding it.
		d.Orphan = true
		out, ok = r.call(d)
	}
	if !ok {
		out = Outcome{Action: ActionRetry}
	}
	return d, out
}

// call runs Handle, turning a panic into ok = false.
func (r *runner) call(d *Delivery) (out Outcome, ok bool) {
	defer func() {
		if p := recover(); p != nil {
			r.log.Error("handler panicked", "msg_id", d.MsgID, "delivery", d.NumDelivered, "orphan", d.Orphan, "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			ok = false
		}
	}()
	return r.h.Handle(r.handlerCtx, d), true
}

// prefetchFor is how many fetched jobs may wait for a handler goroutine, so
// one that frees up starts its next job at once rather than after a fetch.
// Half the slots: the answers of one round of calls at a provider's fixed
// latency come back within milliseconds of each other and free most slots
// at once; with a quarter ahead, the rest waited for a fetch and its
// ledger reads (at 1024 slots, 120-137 ms between two jobs, against 77-102
// with half, in interleaved bench runs).
func prefetchFor(concurrency int) int {
	return max(1, concurrency/2)
}

func reasonOr(reason, def string) string {
	if reason == "" {
		return def
	}
	return reason
}

// fallbackMsgID names a job published without Nats-Msg-Id: its id when it
// parses, else its stream sequence (stable across redeliveries).
func fallbackMsgID(d *Delivery, seq uint64) string {
	if d.JobErr == nil && d.Job.ID != "" {
		return d.Job.ID
	}
	return broker.StreamJobs + "-" + strconv.FormatUint(seq, 10)
}
