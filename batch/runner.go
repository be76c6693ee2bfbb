package batch

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/queue"
	"github.com/llmpipeline/pipeline/internal/sink"
	"github.com/llmpipeline/pipeline/llm"
	"github.com/llmpipeline/pipeline/model"
)

// Defaults applied to zero Config fields.
const (
	DefaultSize        = 1000
	DefaultWait        = time.Minute
	DefaultPoll        = 30 * time.Second
	DefaultRequeues    = 5
	DefaultLease       = 5 * time.Minute
	DefaultKeepEnded   = 24 * time.Hour
	DefaultTransport   = 3
	defaultRetryDelay  = 5 * time.Second
	defaultStoreWindow = 30 * time.Second
)

// Heal modes.
const (
	HealBatch = "batch" // heal turns go into the next batch (the default)
	HealSync  = "sync"  // heal turns go to the synchronous endpoint
)

// Config configures a Runner.
type Config struct {
	// Batcher is the provider's batch endpoint. Required.
	Batcher llm.Batcher
	// Model is the model spec recorded with each batch.
	Model string
	// KV is the PIPELINE_BATCHES bucket (broker.Conn.BatchBucket). Required.
	KV jetstream.KeyValue
	// Conn stores outcomes (queue.StoreOutcome). Required.
	Conn *broker.Conn
	// Inner is the synchronous handler (worker.Handler) whose loop's model
	// is a *Replay: batch mode runs the jobs through it. Required.
	Inner queue.Handler
	// Size is the most requests per batch (default the provider's limit or
	// 1,000, whichever is lower); batches also stay under the provider's
	// byte limit.
	Size int
	// Wait is the longest a gathered request waits before its batch is
	// submitted (default 1 min).
	Wait time.Duration
	// Poll is how often a batch's status is read (default 30 s).
	Poll time.Duration
	// Heal is HealBatch ("" means it) or HealSync.
	Heal string
	// TransportRetries is how many times a request that failed inside a
	// batch (a 5xx, an errored result) is sent again, in later batches,
	// before the job is dead-lettered as transport (default 3).
	TransportRetries int
	// Requeues is how many times a request left unanswered by an expired
	// or cancelled batch is sent again (default 5).
	Requeues int
	// Lease is how long a process may take to read a done batch's results
	// before another one takes over (default 5 min).
	Lease time.Duration
	// KeepEnded is how long the record of a settled batch (ended, or
	// abandoned and swept) stays in the bucket, for `pipeline batches`
	// and the census, before a poll deletes it (default 24 h): every poll
	// reads every record, so the bucket must not grow with the history.
	KeepEnded time.Duration
	// Stored, if set, gets every outcome stored (the sink of the process);
	// Repeated every outcome not kept, because its run had one already
	// (queue.WorkerConfig's hooks of the same names).
	Stored, Repeated func(sink.Msg)
	// Paid, if set, gets the usage of every answer read from a batch, once
	// (budget and cost metric; the replays of the loop do not call it).
	Paid func(model.Usage)
	// Observe, if set, is called with every batch state change and every
	// request's outcome (metrics, progress).
	Observe func(Event)
	Logger  *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Event is what Config.Observe sees.
type Event struct {
	// Provider is the batch endpoint's provider (openai, anthropic).
	Provider string
	// Batch is set with State and Status for a batch's change of state:
	// the record's state (StateSubmitting ... StateAbandoned) and the
	// provider's status word ("" before the provider has the batch).
	Batch  string
	State  string
	Status string
	// Outcome is set for one request: OutcomeResult, OutcomeDeadLetter,
	// OutcomeHeal (went on to another attempt), OutcomeRetry (sent again
	// after an error) or OutcomeRequeued (unanswered by an expired,
	// cancelled or never created batch).
	Outcome string
}

func (c Config) withDefaults() Config {
	if c.Size <= 0 {
		c.Size = DefaultSize
	}
	if c.Batcher != nil {
		n, _ := c.Batcher.Limits()
		c.Size = min(c.Size, n)
	}
	if c.Wait <= 0 {
		c.Wait = DefaultWait
	}
	if c.Poll <= 0 {
		c.Poll = DefaultPoll
	}
	if c.Heal == "" {
		c.Heal = HealBatch
	}
	if c.TransportRetries == 0 {
		c.TransportRetries = DefaultTransport
	}
	if c.TransportRetries < 0 {
		c.TransportRetries = 0
	}
	if c.Requeues <= 0 {
		c.Requeues = DefaultRequeues
	}
	if c.Lease <= 0 {
		c.Lease = DefaultLease
	}
	if c.KeepEnded <= 0 {
		c.KeepEnded = DefaultKeepEnded
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

func (c Config) validate() error {
	var errs []error
	if c.Batcher == nil {
		errs = append(errs, errors.New("a Batcher is required"))
	}
	if c.KV == nil {
		errs = append(errs, errors.New("a KV bucket is required"))
	}
	if c.Conn == nil {
		errs = append(errs, errors.New("a NATS Conn is required"))
	}
	if c.Inner == nil {
		errs = append(errs, errors.New("an Inner handler is required"))
	}
	if c.Heal != HealBatch && c.Heal != HealSync {
		errs = append(errs, fmt.Errorf("the heal mode must be %q or %q, got %q", HealBatch, HealSync, c.Heal))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("configuring batch mode: %w", err)
	}
	return nil
}

// Runner gathers first attempts (and heal turns) into provider batches,
// keeps them on JetStream, polls them and settles every answer through the
// synchronous handler's loop. It implements queue.Handler for the
// workers: a job is acked once its request is part of a batch the provider
// accepted. Its work is done by three parts over one shared core: the
// gatherer (entries into batches, submit.go), the poller (the batches'
// states, collect.go and failed.go) and the settler (each request's
// answer, through the loop, to an outcome or the queue, settle.go).
type Runner struct {
	*core
	gather *gatherer
	poll   *poller
	settle *settler
}

var _ queue.Handler = (*Runner)(nil)

// core is what the parts of a Runner share: the configuration, the
// bucket, the census, the stop and the enqueued-token limit.
type core struct {
	cfg   Config
	st    store
	owner string
	log   *slog.Logger

	census census // the bucket's batches, for Census

	halt  *halt // an account-level failure stops the runner
	limit limit // the enqueued-token limit: holding, and the batch caps learned
}

// gatherer collects entries (deliveries' first attempts, queued requests)
// into batches and submits them.
type gatherer struct {
	*core
	settle *settler

	in chan *entry

	mu      sync.Mutex
	pending map[string]bool // item keys gathered and not yet submitted
}

// poller reads the fleet's batches and settles the done ones.
type poller struct {
	*core
	gather *gatherer
	settle *settler

	tickMu sync.Mutex // one poll at a time (the census counts one)
}

// settler takes one request's answer (or its failure) through the loop to
// an outcome stored, or back into the queue.
type settler struct {
	*core

	refusedParams sync.Map // request parameters a model refused, warned about once
}

// entry is one request on its way into a batch.
type entry struct {
	item Item
	rev  uint64 // the item's revision (0: a new item from a delivery)
	req  model.Request
	size int
	done chan error // for a delivery waiting to be acked; nil otherwise
}

// New returns a Runner; Run starts it.
func New(cfg Config) (*Runner, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	c := &core{cfg: cfg, st: store{kv: cfg.KV}, owner: newKey(cfg.Now()), log: cfg.Logger, halt: newHalt()}
	s := &settler{core: c}
	g := &gatherer{core: c, settle: s, in: make(chan *entry), pending: map[string]bool{}}
	return &Runner{core: c, gather: g, poll: &poller{core: c, gather: g, settle: s}, settle: s}, nil
}

// Run gathers, submits and polls until ctx is done, or until an
// account-level failure (a refused key) stops it: it returns that failure
// then (Err), with every request left where it was.
func (r *Runner) Run(ctx context.Context) error {
	ctx, cancel := r.untilStopped(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { r.gather.run(ctx) })
	wg.Go(func() { r.poll.loop(ctx) })
	wg.Wait()
	return r.Err()
}

// Handle implements queue.Handler: the job's first attempt is captured
// and gathered; the delivery is acked (ActionHandOff) once its request is
// in a batch the provider accepted. A job the loop ends without calling
// the model (invalid, unknown schema) gets the synchronous handler's
// outcome. A chunk of a long document is answered by the synchronous
// handler too: its document ends when the runtime settles its last chunk's
// delivery, which a handed-off job's outcome does not go through.
func (r *Runner) Handle(ctx context.Context, d *queue.Delivery) queue.Outcome {
	if d.JobErr != nil || d.Orphan || d.Job.Chunk != nil {
		return r.cfg.Inner.Handle(ctx, d)
	}
	if r.halt.stopped() {
		return r.stopOutcome()
	}
	key := itemKey(d.MsgID)
	if held, err := r.held(ctx, key); err != nil {
		if r.stopOn(err) {
			return r.stopOutcome()
		}
		return queue.Outcome{Action: queue.ActionRetry, Delay: defaultRetryDelay, Reason: err.Error()}
	} else if held {
		return queue.Outcome{Action: queue.ActionHandOff}
	}
	s := &script{capture: true}
	out := r.cfg.Inner.Handle(withScript(ctx, s), d)
	if s.captured == nil {
		return out
	}
	e := &entry{
		item: Item{Key: key, MsgID: d.MsgID, JobID: d.Job.ID, SchemaToken: d.SchemaToken, Job: d.Data,
			Deliveries: d.NumDelivered, Attempt: s.captured.Attempt},
		req:  *s.captured,
		done: make(chan error, 1),
	}
	e.size, _ = r.cfg.Batcher.Size(llm.BatchRequest{CustomID: customID(key, e.item.Attempt, newKey(time.Now())), Request: e.req})
	if r.limit.holding() {
		// The enqueued-token limit was reached: the request waits in the
		// queue for the batches in flight to finish; the delivery is done.
		if err := r.settle.park(ctx, e.item); err != nil {
			return queue.Outcome{Action: queue.ActionRetry, Delay: defaultRetryDelay, Reason: err.Error()}
		}
		return queue.Outcome{Action: queue.ActionHandOff}
	}
	select {
	case r.gather.in <- e:
	case <-r.halt.done:
		return r.stopOutcome()
	case <-ctx.Done():
		return queue.Outcome{Action: queue.ActionRetry, Delay: defaultRetryDelay, Reason: "worker stopping"}
	}
	select {
	case err := <-e.done:
		if err != nil {
			if r.stopOn(err) || r.halt.stopped() {
				return r.stopOutcome()
			}
			return queue.Outcome{Action: queue.ActionRetry, Delay: defaultRetryDelay, Reason: "submitting the batch: " + err.Error()}
		}
		return queue.Outcome{Action: queue.ActionHandOff}
	case <-ctx.Done():
		// The gatherer still owns the entry: should its batch be created,
		// the redelivery finds the job held.
		return queue.Outcome{Action: queue.ActionRetry, Delay: defaultRetryDelay, Reason: "worker stopping"}
	}
}

// held reports whether the job run is already in batch mode's keeping: in
// a batch the provider accepted, queued for one, or done. An item in a
// batch still "submitting" (its process died between create and record)
// is resolved first: adopted when the provider has the batch, else the
// record is abandoned and the job gathered anew.
func (r *Runner) held(ctx context.Context, key string) (bool, error) {
	it, _, err := r.st.getItem(ctx, key)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	if it.State != itemBatched {
		return true, nil
	}
	rec, rev, err := r.st.getRecord(ctx, it.Batch)
	if errors.Is(err, jetstream.ErrKeyNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	switch rec.State {
	case StateAbandoned:
		return false, nil
	case StateSubmitting:
		return r.resolve(ctx, rec, rev)
	}
	return true, nil
}

// resolve settles a record left "submitting": the provider is asked for a
// batch created with its key (OpenAI keeps it in the metadata); found, the
// record is adopted, else abandoned (Anthropic cannot say: a batch created
// in the instant before the crash is then never read).
func (r *Runner) resolve(ctx context.Context, rec Record, rev uint64) (bool, error) {
	st, found, err := r.cfg.Batcher.Find(ctx, rec.Key)
	if err != nil {
		return false, fmt.Errorf("looking for batch %s at the provider: %w", rec.Key, err)
	}
	if found {
		rec.State, rec.ProviderID, rec.Status = StateSubmitted, st.ID, st
		r.log.Info("adopted a batch whose creation was not recorded", "batch", rec.Key, "id", st.ID)
	} else {
		rec.State, rec.EndedAt = StateAbandoned, r.cfg.Now().UTC()
		r.log.Warn("abandoned a batch record whose batch the provider does not have", "batch", rec.Key)
	}
	rev, err = r.st.put(ctx, prefixBatch+rec.Key, rec, rev, false)
	if err != nil {
		if conflict(err) {
			return false, fmt.Errorf("batch %s changed while being resolved; try again", rec.Key)
		}
		return false, err
	}
	r.changed(rec, rev)
	return found, nil
}

// observe hands e to Config.Observe, with the provider.
func (r *core) observe(e Event) {
	if r.cfg.Observe != nil {
		e.Provider = r.cfg.Batcher.Provider()
		r.cfg.Observe(e)
	}
}

// outcome reports one request's outcome.
func (r *core) outcome(o string) {
	r.observe(Event{Outcome: o})
}

// changed reports a batch record this process wrote at rev: it counts in
// the census at once and Config.Observe sees the change.
func (r *core) changed(rec Record, rev uint64) {
	r.census.note(rec, rev)
	r.observe(Event{Batch: rec.Key, State: rec.State, Status: rec.Status.Status})
}

// Pending is how many job runs batch mode holds (queued or in a batch).
func (r *Runner) Pending(ctx context.Context) (int, error) {
	keys, err := r.st.keys(ctx, prefixItem)
	return len(keys), err
}

// Cancel asks the provider to cancel the batch with provider id or key
// id; the pollers then settle it (its unanswered requests go into later
// batches).
func Cancel(ctx context.Context, kv jetstream.KeyValue, b llm.Batcher, id string) (llm.BatchStatus, error) {
	recs, err := Records(ctx, kv)
	if err != nil {
		return llm.BatchStatus{}, err
	}
	for _, rec := range recs {
		if rec.ProviderID == id || rec.Key == id {
			if rec.ProviderID == "" {
				return llm.BatchStatus{}, fmt.Errorf("batch %s was never created at the provider (%s)", id, rec.State)
			}
			return b.Cancel(ctx, rec.ProviderID)
		}
	}
	return llm.BatchStatus{}, fmt.Errorf("no batch %s in %s", id, broker.BucketBatches)
}
