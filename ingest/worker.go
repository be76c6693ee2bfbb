package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrStopped is returned by RunWorkers when a handler asked to stop
// (ActionStop) without an error of its own.
var ErrStopped = errors.New("worker stopped by handler")

// AdvisoryMaxDeliveries is the subject on which the server announces that a
// job reached MaxDeliver on the workers consumer.
const AdvisoryMaxDeliveries = "$JS.EVENT.ADVISORY.CONSUMER.MAX_DELIVERIES." + StreamJobs + "." + WorkerConsumer

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
}

// settling is one handled job on its way to a settler goroutine.
type settling struct {
	j   *inflight
	d   *Delivery
	out Outcome
}

type runner struct {
	c    *Conn
	cfg  WorkerConfig
	h    Handler
	log  *slog.Logger
	cons jetstream.Consumer
	jobs jetstream.Stream

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

	orphans    chan uint64
	failedMu   sync.Mutex
	failedSeqs map[uint64]bool // orphans whose handling failed this run
}

// RunWorkers consumes jobs with the durable "workers" pull consumer until ctx
// is done (graceful: stop fetching, wait up to ShutdownGrace, nak the rest),
// until idle (UntilIdle), or until a handler returns ActionStop.
//
// At most Concurrency jobs are in Handle, run by as many long-lived
// goroutines; up to a quarter more wait fetched ahead, and outcomes are
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
func (c *Conn) RunWorkers(ctx context.Context, cfg WorkerConfig, h Handler) error {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return fmt.Errorf("configuring workers: %w", err)
	}
	log := discardIfNil(cfg.Logger)
	if cfg.Logger == nil {
		log = c.log
	}
	cons, err := c.ensureConsumer(ctx, StreamJobs, c.workerConsumerConfig(cfg))
	if err != nil {
		return err
	}
	jobs, err := c.js.Stream(ctx, StreamJobs)
	if err != nil {
		return fmt.Errorf("looking up stream %s: %w", StreamJobs, err)
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
		c: c, cfg: cfg, h: h, log: log, cons: cons, jobs: jobs,
		sem:         make(chan struct{}, cfg.Concurrency+prefetch),
		outstanding: make(chan struct{}, outstanding),
		queue:       make(chan delivered, cfg.Concurrency+prefetch),
		settleQ:     make(chan settling, outstanding),
		set:         make(map[*inflight]struct{}),
		runCtx:      ctx,
		handlerCtx:  handlerCtx,
		pubCtx:      pubCtx,
		stopCh:      make(chan struct{}),
		orphans:     make(chan uint64, 1024),
		failedSeqs:  make(map[uint64]bool),
	}

	sub, err := c.nc.QueueSubscribe(AdvisoryMaxDeliveries, orphanQueueGroup, r.onAdvisory)
	if err != nil {
		return fmt.Errorf("subscribing to max-deliveries advisories: %w", err)
	}
	defer func() { _ = sub.Unsubscribe() }()
	if err := c.nc.Flush(); err != nil {
		return fmt.Errorf("subscribing to max-deliveries advisories: %w", err)
	}

	loopCtx, stopLoops := context.WithCancel(ctx)
	var bg sync.WaitGroup
	bg.Go(func() { r.heartbeats(loopCtx) })
	bg.Go(func() { r.orphanLoop(loopCtx) })
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
	if err := c.nc.FlushTimeout(5 * time.Second); err != nil {
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
			<-r.sem
			<-r.outstanding
			continue
		}
		// Tracked from now on, so heartbeats reach it while it waits.
		j := &inflight{msg: msg}
		r.track(j)
		r.queue <- delivered{msg: msg, j: j} // room: one slot per place
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
	swept, err := r.sweep(ctx, info.Delivered.Stream)
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
	r.nakOnce(q.j, jitter(shutdownNakDelay))
	r.untrack(q.j)
	<-r.sem
	<-r.outstanding
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
		d, out := r.handleMsg(q.msg)
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
			_ = j.msg.NakWithDelay(jitter(shutdownNakDelay))
			left++
		}
	}
	r.mu.Unlock()
	r.log.Warn("shutdown grace ran out; handed in-flight jobs back", "jobs", left, "grace", r.cfg.ShutdownGrace)
	select {
	case <-done:
	case <-time.After(leftoverWait):
		r.log.Error("handlers did not return after their context was cancelled", "wait", leftoverWait)
	}
}

// handleMsg runs the handler for one delivered job; the caller settles it.
func (r *runner) handleMsg(msg jetstream.Msg) (*Delivery, Outcome) {
	d := &Delivery{
		Data:        msg.Data(),
		SchemaToken: lastToken(msg.Subject()),
		MsgID:       msg.Headers().Get(jetstream.MsgIDHeader),
		MaxDeliver:  r.cfg.MaxDeliver,
		inProgress:  func() { _ = msg.InProgress() },
	}
	var seq uint64
	if meta, err := msg.Metadata(); err == nil {
		d.NumDelivered = int(meta.NumDelivered)
		seq = meta.Sequence.Stream
	}
	d.Job, d.JobErr = ParseJob(d.Data)
	if d.MsgID == "" {
		d.MsgID = fallbackMsgID(d, seq)
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

// settle acts on the handler's outcome for a delivered job.
func (r *runner) settle(j *inflight, d *Delivery, out Outcome) {
	switch out.Action {
	case ActionResult, ActionDeadLetter:
		if d.NumDelivered > 1 {
			// An earlier delivery may have stored an outcome and lost its
			// ack; a model need not answer the same way twice, so the
			// other stream is checked (the same one deduplicates).
			other, err := r.otherOutcome(d, out)
			if err != nil {
				r.log.Warn("checking for an earlier outcome failed; job handed back", "msg_id", d.MsgID, "err", err)
				r.nakOnce(j, r.retryDelay(d, 0))
				return
			}
			if other != "" {
				j.settled.Store(true)
				if err := j.msg.Ack(); err != nil {
					r.log.Warn("acknowledging a job answered by an earlier delivery", "msg_id", d.MsgID, "err", err)
				}
				r.log.Warn("redelivered job already has an outcome from an earlier delivery; kept that one", "msg_id", d.MsgID, "delivery", d.NumDelivered, "stored_on", other)
				return
			}
		}
		err := r.store(d, out)
		if err != nil {
			if r.cfg.StoreFailed != nil {
				r.cfg.StoreFailed(err)
			}
			r.log.Warn("storing outcome failed; job handed back", "msg_id", d.MsgID, "err", err)
			r.nakOnce(j, r.retryDelay(d, 0))
			return
		}
		// The outcome is stored: settle even if the shutdown grace already
		// naked the job (an ack after a nak still removes it).
		j.settled.Store(true)
		if out.Action == ActionResult {
			err = j.msg.Ack()
		} else {
			err = j.msg.TermWithReason(reasonOr(out.Reason, "dead-lettered"))
		}
		if err != nil {
			r.log.Warn("acknowledging job (its outcome is stored; a redelivery is deduplicated)", "msg_id", d.MsgID, "err", err)
		}
	case ActionRetry:
		r.nakOnce(j, r.retryDelay(d, out.Delay))
	case ActionStop:
		r.nakOnce(j, r.retryDelay(d, out.Delay))
		if r.stop(out.Err) {
			r.log.Error("handler stopped the worker", "msg_id", d.MsgID, "err", out.Err)
		} else {
			r.log.Debug("job handed back; the worker is already stopping", "msg_id", d.MsgID, "err", out.Err)
		}
	default:
		r.log.Error("handler returned an unknown action; retrying the job", "msg_id", d.MsgID, "action", int(out.Action))
		r.nakOnce(j, r.retryDelay(d, out.Delay))
	}
}

// store publishes a result or dead letter with Nats-Msg-Id = the delivery's
// message id and waits for the stream's ack; then it hands the stored
// message to WorkerConfig.Stored, unless the stream already had one under
// this id (the first one stays, and may differ: the sink reads that one).
func (r *runner) store(d *Delivery, out Outcome) error {
	prefix := SubjectResults
	if out.Action == ActionDeadLetter {
		prefix = SubjectDLQ
	}
	schema := out.Schema
	if !isToken(schema) {
		schema = d.SchemaToken
	}
	msg := newMsg(prefix+"."+schema, d.MsgID, out.Payload)
	fut, err := r.c.publishAsync(r.pubCtx, msg)
	if err != nil {
		return fmt.Errorf("publishing to %s: %w", msg.Subject, err)
	}
	ack, err := r.c.awaitPubAck(r.pubCtx, fut)
	if err != nil {
		return err
	}
	if r.cfg.Stored != nil && !ack.Duplicate {
		r.cfg.Stored(SinkMsg{Subject: msg.Subject, Data: out.Payload, MsgID: d.MsgID,
			Stream: ack.Stream, Sequence: ack.Sequence, Time: time.Now(), Record: out.Record})
	}
	return nil
}

// otherOutcome reports the stream (StreamResults or StreamDLQ, "" for
// none) on which an earlier delivery stored a different kind of outcome
// for d within the duplicate window: a dead letter when out is a result,
// or the other way round.
func (r *runner) otherOutcome(d *Delivery, out Outcome) (string, error) {
	stream, prefix := StreamDLQ, SubjectDLQ
	if out.Action == ActionDeadLetter {
		stream, prefix = StreamResults, SubjectResults
	}
	// The subject store would use.
	filter := prefix + ".>"
	if isToken(out.Schema) {
		filter = prefix + "." + out.Schema
	} else if isToken(d.SchemaToken) {
		filter = prefix + "." + d.SchemaToken
	}
	ctx, cancel := context.WithTimeout(r.pubCtx, 30*time.Second)
	defer cancel()
	found, err := r.c.outcomeSince(ctx, stream, filter, d.MsgID, time.Now().Add(-r.c.cfg.DuplicateWindow))
	if err != nil || !found {
		return "", err
	}
	return stream, nil
}

func (r *runner) nakOnce(j *inflight, delay time.Duration) {
	if j.settled.CompareAndSwap(false, true) {
		r.nak(j.msg, delay)
	}
}

func (r *runner) nak(msg jetstream.Msg, delay time.Duration) {
	if err := msg.NakWithDelay(delay); err != nil {
		r.log.Warn("nak with delay failed; the job is redelivered after its ack wait", "subject", msg.Subject(), "err", err)
	}
}

// retryDelay is the handler's delay, or the backoff step for this delivery,
// plus up to 20% jitter.
func (r *runner) retryDelay(d *Delivery, want time.Duration) time.Duration {
	if want <= 0 {
		n := max(d.NumDelivered, 1)
		if len(r.cfg.BackOff) > 0 {
			want = r.cfg.BackOff[min(n-1, len(r.cfg.BackOff)-1)]
		} else {
			want = min(time.Second<<min(n-1, 5), 30*time.Second)
		}
	}
	return jitter(want)
}

// prefetchFor is how many fetched jobs may wait for a handler goroutine, so
// one that frees up starts its next job at once rather than after a fetch.
func prefetchFor(concurrency int) int {
	return max(1, concurrency/4)
}

func jitter(d time.Duration) time.Duration {
	if d <= 0 {
		return d
	}
	return d + rand.N(d/5+1)
}

func reasonOr(reason, def string) string {
	if reason == "" {
		return def
	}
	return reason
}

func lastToken(subject string) string {
	if i := strings.LastIndexByte(subject, '.'); i >= 0 {
		return subject[i+1:]
	}
	return subject
}

// fallbackMsgID names a job published without Nats-Msg-Id: its id when it
// parses, else its stream sequence (stable across redeliveries).
func fallbackMsgID(d *Delivery, seq uint64) string {
	if d.JobErr == nil && d.Job.ID != "" {
		return d.Job.ID
	}
	return StreamJobs + "-" + strconv.FormatUint(seq, 10)
}

// maxDeliveriesAdvisory is the part of the server's advisory we read.
type maxDeliveriesAdvisory struct {
	Stream     string `json:"stream"`
	Consumer   string `json:"consumer"`
	StreamSeq  uint64 `json:"stream_seq"`
	Deliveries uint64 `json:"deliveries"`
}

func (r *runner) onAdvisory(m *nats.Msg) {
	var a maxDeliveriesAdvisory
	if err := json.Unmarshal(m.Data, &a); err != nil || a.StreamSeq == 0 {
		r.log.Warn("unreadable max-deliveries advisory", "err", err)
		return
	}
	select {
	case r.orphans <- a.StreamSeq:
	default:
		// Full: the idle sweep finds it later.
		r.log.Warn("orphan queue full; job left for the sweep", "seq", a.StreamSeq)
	}
}

// orphanLoop handles the jobs announced by max-deliveries advisories, each
// holding a concurrency slot.
func (r *runner) orphanLoop(ctx context.Context) {
	for {
		var seq uint64
		select {
		case <-ctx.Done():
			return
		case seq = <-r.orphans:
		}
		select {
		case r.sem <- struct{}{}:
		case <-ctx.Done():
			return
		}
		r.wg.Add(1)
		go func() {
			defer r.wg.Done()
			defer func() { <-r.sem }()
			if _, err := r.handleOrphan(seq); err != nil {
				r.log.Error("handling a job that reached max deliveries", "seq", seq, "err", err)
			}
		}()
	}
}

// sweep handles jobs still in the work queue at or below upTo, the last
// delivered sequence of a consumer with nothing pending or unacked: they
// can never be delivered again (they reached MaxDeliver) and their advisory
// was missed. It returns how many it handled.
func (r *runner) sweep(ctx context.Context, upTo uint64) (int, error) {
	if upTo == 0 {
		return 0, nil
	}
	n := 0
	seq := uint64(1)
	for seq <= upTo {
		raw, err := r.jobs.GetMsg(ctx, seq, jetstream.WithGetMsgSubject(SubjectJobs+".>"))
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			return n, nil
		}
		if err != nil {
			return n, fmt.Errorf("reading stranded jobs from %s at %d: %w", StreamJobs, seq, err)
		}
		if raw.Sequence > upTo {
			return n, nil
		}
		seq = raw.Sequence + 1
		if r.failed(raw.Sequence) {
			continue
		}
		r.log.Warn("job reached max deliveries and its advisory was missed; handling it", "seq", raw.Sequence)
		handled, err := r.handleOrphanMsg(raw)
		if err != nil {
			r.log.Error("handling a stranded job", "seq", raw.Sequence, "err", err)
			continue
		}
		if handled {
			n++
		}
	}
	return n, nil
}

func (r *runner) failed(seq uint64) bool {
	r.failedMu.Lock()
	defer r.failedMu.Unlock()
	return r.failedSeqs[seq]
}

func (r *runner) markFailed(seq uint64) {
	r.failedMu.Lock()
	r.failedSeqs[seq] = true
	r.failedMu.Unlock()
}

// handleOrphan reads job seq from the stream and handles it as an orphan.
func (r *runner) handleOrphan(seq uint64) (bool, error) {
	raw, err := r.jobs.GetMsg(r.pubCtx, seq)
	if errors.Is(err, jetstream.ErrMsgNotFound) {
		return false, nil // another worker handled it already
	}
	if err != nil {
		return false, fmt.Errorf("reading job %d from %s: %w", seq, StreamJobs, err)
	}
	return r.handleOrphanMsg(raw)
}

// handleOrphanMsg calls the handler with Orphan set, stores its outcome and
// deletes the job from the work queue. Several workers may do this for the
// same job: the outcome's Nats-Msg-Id deduplicates the store, and the
// second delete finds nothing.
func (r *runner) handleOrphanMsg(raw *jetstream.RawStreamMsg) (bool, error) {
	d := &Delivery{
		Data:         raw.Data,
		SchemaToken:  lastToken(raw.Subject),
		NumDelivered: r.cfg.MaxDeliver,
		MaxDeliver:   r.cfg.MaxDeliver,
		Orphan:       true,
	}
	if raw.Header != nil {
		d.MsgID = raw.Header.Get(jetstream.MsgIDHeader)
	}
	d.Job, d.JobErr = ParseJob(d.Data)
	if d.MsgID == "" {
		d.MsgID = fallbackMsgID(d, raw.Sequence)
	}
	// Stranded is not the same as unanswered: a job whose outcome is
	// stored is removed, not dead-lettered a second time as abandoned.
	where, err := r.c.storedOutcome(r.pubCtx, d.MsgID, d.SchemaToken)
	if err != nil {
		return false, fmt.Errorf("checking whether orphan %s already has an outcome: %w", d.MsgID, err)
	}
	if where != "" {
		if err := r.jobs.DeleteMsg(r.pubCtx, raw.Sequence); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
			return false, fmt.Errorf("deleting answered job %s (seq %d) from %s: %w", d.MsgID, raw.Sequence, StreamJobs, err)
		}
		r.log.Warn("job was left in the work queue after its outcome was stored; removed it", "msg_id", d.MsgID, "seq", raw.Sequence, "outcome_on", where)
		return true, nil
	}
	j := &inflight{}
	r.track(j)
	defer r.untrack(j)
	out, ok := r.call(d)
	if !ok {
		r.markFailed(raw.Sequence)
		return false, fmt.Errorf("handler panicked on orphan %s; job left in %s at %d", d.MsgID, StreamJobs, raw.Sequence)
	}
	switch out.Action {
	case ActionResult, ActionDeadLetter:
	case ActionStop:
		r.markFailed(raw.Sequence)
		r.stop(out.Err)
		return false, fmt.Errorf("handler stopped the worker on orphan %s: %w", d.MsgID, out.Err)
	default:
		r.markFailed(raw.Sequence)
		return false, fmt.Errorf("handler did not dead-letter orphan %s (action %d); job left in %s at %d", d.MsgID, out.Action, StreamJobs, raw.Sequence)
	}
	if err := r.store(d, out); err != nil {
		return false, fmt.Errorf("storing the outcome of orphan %s: %w", d.MsgID, err)
	}
	if err := r.jobs.DeleteMsg(r.pubCtx, raw.Sequence); err != nil && !errors.Is(err, jetstream.ErrMsgNotFound) {
		return false, fmt.Errorf("deleting orphan %s (seq %d) from %s: %w", d.MsgID, raw.Sequence, StreamJobs, err)
	}
	r.log.Info("job reached max deliveries; outcome stored and job removed", "msg_id", d.MsgID, "seq", raw.Sequence, "action", int(out.Action))
	return true, nil
}
