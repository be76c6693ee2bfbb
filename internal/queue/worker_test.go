package queue

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/poll"
	"github.com/llmpipeline/pipeline/internal/sink"
	"github.com/llmpipeline/pipeline/job"
	"github.com/nats-io/nats.go/jetstream"
)

// resultFor is what the test handlers store: the job id and its delivery.
func resultFor(d *Delivery) []byte {
	return fmt.Appendf(nil, `{"job_id":%q,"delivery":%d,"orphan":%v}`, d.MsgID, d.NumDelivered, d.Orphan)
}

func TestRunWorkersOutcomes(t *testing.T) {
	t.Parallel()
	c := newConn(t)
	items := append(jobItems("ok", "invoice", 30), jobItems("bad", "person", 10)...)
	// A message that is not a job at all, published without a msg id.
	if _, err := c.JetStream().Publish(t.Context(), broker.SubjectJobs+".invoice", []byte("not json")); err != nil {
		t.Fatal(err)
	}
	submit(t, c, items)

	var calls counter
	var invalid atomic.Int32
	h := HandlerFunc(func(ctx context.Context, d *Delivery) Outcome {
		calls.add(d.MsgID)
		switch {
		case d.JobErr != nil:
			if !errors.Is(d.JobErr, job.ErrInvalid) {
				t.Errorf("JobErr %v does not wrap job.ErrInvalid", d.JobErr)
			}
			invalid.Add(1)
			return Outcome{Action: ActionDeadLetter, Payload: resultFor(d), Reason: "invalid_job"}
		case strings.HasPrefix(d.Job.ID, "bad"):
			return Outcome{Action: ActionDeadLetter, Schema: d.Job.Schema, Payload: resultFor(d), Reason: "schema"}
		default:
			if d.SchemaToken != d.Job.Schema {
				t.Errorf("SchemaToken %q, job schema %q", d.SchemaToken, d.Job.Schema)
			}
			return Outcome{Action: ActionResult, Schema: d.Job.Schema, Payload: resultFor(d)}
		}
	})
	if err := RunWorkers(t.Context(), c, fastWorkers(WorkerConfig{Concurrency: 8, UntilIdle: true}), h); err != nil {
		t.Fatalf("RunWorkers: %v", err)
	}

	if calls.len() != len(items)+1 {
		t.Errorf("handled %d distinct messages, want %d", calls.len(), len(items)+1)
	}
	for _, it := range items {
		if n := calls.get(it.MsgID); n != 1 {
			t.Errorf("job %s handled %d times", it.MsgID, n)
		}
	}
	if invalid.Load() != 1 {
		t.Errorf("invalid jobs seen %d, want 1", invalid.Load())
	}
	results := readAll(t, c, broker.StreamResults, "")
	if want := msgIDs(toSink(items[:30])); !slices.Equal(msgIDs(results), want) {
		t.Errorf("results ids = %v\nwant %v", msgIDs(results), want)
	}
	for _, m := range results {
		if m.Subject != broker.SubjectResults+".invoice" {
			t.Errorf("result on %s", m.Subject)
		}
		if !strings.Contains(string(m.Data), m.MsgID) {
			t.Errorf("result %s payload %s", m.MsgID, m.Data)
		}
	}
	dlq := readAll(t, c, broker.StreamDLQ, broker.SubjectDLQ+".person")
	if want := msgIDs(toSink(items[30:])); !slices.Equal(msgIDs(dlq), want) {
		t.Errorf("dead letters ids = %v\nwant %v", msgIDs(dlq), want)
	}
	bad := readAll(t, c, broker.StreamDLQ, broker.SubjectDLQ+".invoice")
	if len(bad) != 1 || !strings.HasPrefix(bad[0].MsgID, broker.StreamJobs+"-") {
		t.Errorf("invalid message dead letter = %+v; want one with a stream-sequence id", bad)
	}
	var p PendingInfo
	poll.Until(t, 5*time.Second, "queue emptied", func() bool {
		var err error
		p, err = Pending(t.Context(), c)
		return err == nil && p.Jobs == 0 && p.AckPending == 0
	})
	if p.Pending != 0 || p.Results != 30 || p.DeadLetters != 11 {
		t.Errorf("Pending = %+v after run", p)
	}
}

func toSink(items []SubmitItem) []sink.Msg {
	out := make([]sink.Msg, len(items))
	for i, it := range items {
		out[i] = sink.Msg{MsgID: it.MsgID}
	}
	return out
}

func TestRunWorkersRetryAndLastDelivery(t *testing.T) {
	t.Parallel()
	const retryDelay = 150 * time.Millisecond
	cases := []struct {
		name       string
		maxDeliver int
		succeedOn  int // delivery that returns a result; 0: never
		wantDLQ    bool
		panics     bool
	}{
		{name: "retry then result", maxDeliver: 5, succeedOn: 3},
		{name: "dead letter on last delivery", maxDeliver: 3},
		{name: "panic then result", maxDeliver: 5, succeedOn: 2, panics: true},
		{name: "panic on every delivery goes to orphan path", maxDeliver: 2, panics: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newConn(t)
			submit(t, c, []SubmitItem{jobItem("j1", "invoice")})
			var mu sync.Mutex
			var seen []string
			var lastAt time.Time
			var gaps []time.Duration
			h := HandlerFunc(func(ctx context.Context, d *Delivery) Outcome {
				mu.Lock()
				seen = append(seen, fmt.Sprintf("%d/%d last=%v orphan=%v", d.NumDelivered, d.MaxDeliver, d.Last(), d.Orphan))
				if !lastAt.IsZero() && !d.Orphan {
					gaps = append(gaps, time.Since(lastAt))
				}
				lastAt = time.Now()
				mu.Unlock()
				switch {
				case d.NumDelivered == tc.succeedOn:
					return Outcome{Action: ActionResult, Payload: resultFor(d)}
				case d.Orphan || (!tc.panics && d.Last()):
					return Outcome{Action: ActionDeadLetter, Payload: resultFor(d), Reason: "transport"}
				case tc.panics:
					panic("handler bug")
				}
				return Outcome{Action: ActionRetry, Delay: retryDelay}
			})
			// A panic naks with the default backoff step (1s on the first delivery).
			cfg := fastWorkers(WorkerConfig{MaxDeliver: tc.maxDeliver, UntilIdle: true})
			if err := RunWorkers(t.Context(), c, cfg, h); err != nil {
				t.Fatalf("RunWorkers: %v", err)
			}
			mu.Lock()
			defer mu.Unlock()
			var want []string
			switch {
			case tc.succeedOn > 0:
				for i := 1; i <= tc.succeedOn; i++ {
					want = append(want, fmt.Sprintf("%d/%d last=%v orphan=false", i, tc.maxDeliver, i == tc.maxDeliver))
				}
			case tc.panics:
				for i := 1; i <= tc.maxDeliver; i++ {
					want = append(want, fmt.Sprintf("%d/%d last=%v orphan=false", i, tc.maxDeliver, i == tc.maxDeliver))
				}
				want = append(want, fmt.Sprintf("%d/%d last=true orphan=true", tc.maxDeliver, tc.maxDeliver))
			default:
				for i := 1; i <= tc.maxDeliver; i++ {
					want = append(want, fmt.Sprintf("%d/%d last=%v orphan=false", i, tc.maxDeliver, i == tc.maxDeliver))
				}
			}
			if !slices.Equal(seen, want) {
				t.Errorf("deliveries:\n got %q\nwant %q", seen, want)
			}
			if !tc.panics {
				for i, g := range gaps {
					if g < retryDelay {
						t.Errorf("redelivery %d came %v after the nak, before its delay %v", i+2, g, retryDelay)
					}
				}
			}
			results, dlq := readAll(t, c, broker.StreamResults, ""), readAll(t, c, broker.StreamDLQ, "")
			if got := len(results) + len(dlq); got != 1 {
				t.Fatalf("%d results + %d dead letters, want exactly one outcome", len(results), len(dlq))
			}
			if (len(dlq) == 1) != (tc.succeedOn == 0) {
				t.Errorf("dead-lettered = %v, want %v", len(dlq) == 1, tc.succeedOn == 0)
			}
			poll.Until(t, 5*time.Second, "work queue emptied", func() bool {
				p, err := Pending(t.Context(), c)
				return err == nil && p.Jobs == 0
			})
		})
	}
}

func TestRunWorkersConcurrencyBound(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name        string
		concurrency int
		jobs        int
	}{
		{"one", 1, 5},
		{"four", 4, 40},
		{"thirty-two", 32, 200},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newConn(t)
			submit(t, c, jobItems("conc", "invoice", tc.jobs))
			var cur, peak atomic.Int32
			reached := make(chan struct{})
			var once sync.Once
			h := HandlerFunc(func(ctx context.Context, d *Delivery) Outcome {
				n := cur.Add(1)
				defer cur.Add(-1)
				for {
					p := peak.Load()
					if n <= p || peak.CompareAndSwap(p, n) {
						break
					}
				}
				if int(n) == tc.concurrency {
					once.Do(func() { close(reached) })
				}
				select { // hold the slot until the bound was reached once
				case <-reached:
				case <-time.After(5 * time.Second):
				}
				return Outcome{Action: ActionResult, Payload: resultFor(d)}
			})
			err := RunWorkers(t.Context(), c, fastWorkers(WorkerConfig{Concurrency: tc.concurrency, UntilIdle: true}), h)
			if err != nil {
				t.Fatal(err)
			}
			if int(peak.Load()) != tc.concurrency {
				t.Errorf("peak in flight %d, want exactly the concurrency %d", peak.Load(), tc.concurrency)
			}
			if n := len(readAll(t, c, broker.StreamResults, "")); n != tc.jobs {
				t.Errorf("%d results, want %d", n, tc.jobs)
			}
		})
	}
}

func TestRunWorkersStop(t *testing.T) {
	t.Parallel()
	c := newConn(t)
	submit(t, c, jobItems("stop", "invoice", 5))
	errAuth := errors.New("model said 401")
	h := HandlerFunc(func(ctx context.Context, d *Delivery) Outcome {
		if d.Job.ID == "stop-0002" {
			return Outcome{Action: ActionStop, Err: errAuth, Delay: time.Second}
		}
		return Outcome{Action: ActionResult, Payload: resultFor(d)}
	})
	err := RunWorkers(t.Context(), c, fastWorkers(WorkerConfig{Concurrency: 1}), h)
	if !errors.Is(err, errAuth) {
		t.Fatalf("RunWorkers = %v, want the handler's error", err)
	}
	if dlq := readAll(t, c, broker.StreamDLQ, ""); len(dlq) != 0 {
		t.Errorf("stop dead-lettered %d jobs", len(dlq))
	}
	// The stopping job and those after it stay in the queue; the others
	// are acked (acks are processed by the server asynchronously).
	var p PendingInfo
	poll.Until(t, 5*time.Second, "stored jobs acked", func() bool {
		var err error
		p, err = Pending(t.Context(), c)
		return err == nil && p.Jobs == 5-p.Results
	})
	if p.Jobs < 1 || p.Results > 4 {
		t.Errorf("after stop: %+v", p)
	}
}

func TestRunWorkersGracefulShutdown(t *testing.T) {
	t.Parallel()
	c := newConn(t)
	const n = 6
	submit(t, c, jobItems("grace", "invoice", n))

	// First run: two jobs finish within the grace, four block until their
	// context is cancelled when the grace runs out.
	ctx, cancel := context.WithCancel(t.Context())
	started := make(chan string, n)
	release := make(chan struct{})
	var cancelled atomic.Int32
	first := HandlerFunc(func(hctx context.Context, d *Delivery) Outcome {
		started <- d.MsgID
		if d.MsgID < "grace-0002" {
			<-release
			return Outcome{Action: ActionResult, Payload: resultFor(d)}
		}
		<-hctx.Done()
		cancelled.Add(1)
		return Outcome{Action: ActionRetry}
	})
	wait := runWorkers(ctx, c, fastWorkers(WorkerConfig{Concurrency: n, ShutdownGrace: 300 * time.Millisecond}), first)
	for range n {
		<-started
	}
	cancel()
	close(release)
	if err := wait(); err != nil {
		t.Fatalf("first RunWorkers = %v, want nil on shutdown", err)
	}
	if cancelled.Load() != n-2 {
		t.Errorf("%d handler contexts cancelled at the end of the grace, want %d", cancelled.Load(), n-2)
	}
	if got := len(readAll(t, c, broker.StreamResults, "")); got != 2 {
		t.Errorf("%d results stored by the first run, want 2", got)
	}

	// Second run finishes the naked jobs.
	var calls counter
	second := HandlerFunc(func(ctx context.Context, d *Delivery) Outcome {
		calls.add(d.MsgID)
		return Outcome{Action: ActionResult, Payload: resultFor(d)}
	})
	if err := RunWorkers(t.Context(), c, fastWorkers(WorkerConfig{UntilIdle: true}), second); err != nil {
		t.Fatal(err)
	}
	if calls.len() != n-2 {
		t.Errorf("second run handled %d jobs, want %d", calls.len(), n-2)
	}
	if got := readAll(t, c, broker.StreamResults, ""); len(got) != n {
		t.Errorf("%d results in all, want %d: %v", len(got), n, msgIDs(got))
	}
}

func TestRunWorkersUntilIdleEmpty(t *testing.T) {
	t.Parallel()
	c := newConn(t)
	h := HandlerFunc(func(ctx context.Context, d *Delivery) Outcome {
		t.Errorf("handler called for %s", d.MsgID)
		return Outcome{Action: ActionResult}
	})
	if err := RunWorkers(t.Context(), c, fastWorkers(WorkerConfig{UntilIdle: true}), h); err != nil {
		t.Fatal(err)
	}
}

func TestRunWorkersGate(t *testing.T) {
	t.Parallel()
	c := newConn(t)
	submit(t, c, jobItems("gate", "invoice", 3))
	open := make(chan struct{})
	var gateCalls atomic.Int32
	gate := func(ctx context.Context) error {
		gateCalls.Add(1)
		select {
		case <-open:
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	var handled atomic.Int32
	h := HandlerFunc(func(ctx context.Context, d *Delivery) Outcome {
		handled.Add(1)
		return Outcome{Action: ActionResult, Payload: resultFor(d)}
	})
	wait := runWorkers(t.Context(), c, fastWorkers(WorkerConfig{UntilIdle: true, Gate: gate}), h)
	poll.Until(t, 5*time.Second, "gate called", func() bool { return gateCalls.Load() > 0 })
	if handled.Load() != 0 {
		t.Errorf("%d jobs handled while the gate was closed", handled.Load())
	}
	close(open)
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	if handled.Load() != 3 {
		t.Errorf("%d handled, want 3", handled.Load())
	}
}

// deadWorker fetches every job from the workers consumer and never answers,
// as a worker killed with -9 would, until each reached MaxDeliver.
func deadWorker(t *testing.T, c *broker.Conn, cfg WorkerConfig, jobs int) {
	t.Helper()
	cons, err := c.EnsureConsumer(t.Context(), broker.StreamJobs, workerConsumerConfig(c, cfg.withDefaults()))
	if err != nil {
		t.Fatal(err)
	}
	for delivery := 1; delivery <= cfg.MaxDeliver; delivery++ {
		got := 0
		for got < jobs {
			batch, err := cons.Fetch(jobs-got, jetstream.FetchMaxWait(5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			n := 0
			for m := range batch.Messages() {
				meta, _ := m.Metadata()
				if int(meta.NumDelivered) != delivery {
					t.Fatalf("dead worker got delivery %d, expected %d", meta.NumDelivered, delivery)
				}
				n++
			}
			if n == 0 {
				t.Fatalf("dead worker: delivery %d of %d jobs not redelivered (got %d)", delivery, jobs, got)
			}
			got += n
		}
	}
}

func TestOrphanFromAdvisory(t *testing.T) {
	t.Parallel()
	c := newConn(t)
	const n = 3
	items := jobItems("orphan", "invoice", n)
	submit(t, c, items)
	cfg := fastWorkers(WorkerConfig{MaxDeliver: 2, AckWait: 300 * time.Millisecond})
	// A worker took every job twice and died. The server notices the
	// exhausted deliveries when the next pull arrives: the live worker's.
	deadWorker(t, c, cfg, n)

	orphans := make(chan string, n)
	h := HandlerFunc(func(ctx context.Context, d *Delivery) Outcome {
		if !d.Orphan || !d.Last() {
			t.Errorf("live worker got a non-orphan delivery %s #%d", d.MsgID, d.NumDelivered)
			return Outcome{Action: ActionRetry}
		}
		orphans <- d.MsgID
		return Outcome{Action: ActionDeadLetter, Schema: d.Job.Schema, Payload: resultFor(d), Reason: "worker died"}
	})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	wait := runWorkers(ctx, c, cfg, h)
	for range n {
		select {
		case <-orphans:
		case <-time.After(10 * time.Second):
			t.Fatal("orphans not handled from the advisory")
		}
	}
	poll.Until(t, 5*time.Second, "work queue emptied", func() bool {
		p, err := Pending(t.Context(), c)
		return err == nil && p.Jobs == 0
	})
	cancel()
	if err := wait(); err != nil {
		t.Fatal(err)
	}
	dlq := readAll(t, c, broker.StreamDLQ, "")
	if !slices.Equal(msgIDs(dlq), msgIDs(toSink(items))) {
		t.Errorf("dead letters %v, want %v", msgIDs(dlq), msgIDs(toSink(items)))
	}
}

func TestOrphanSweptWhenAdvisoryMissed(t *testing.T) {
	t.Parallel()
	c := newConn(t)
	const n = 4
	items := jobItems("stranded", "invoice", n)
	submit(t, c, items)
	cfg := fastWorkers(WorkerConfig{MaxDeliver: 2, AckWait: 300 * time.Millisecond})
	deadWorker(t, c, cfg, n)
	// A pull while no worker listens: the advisories are sent and lost.
	cons, err := c.JetStream().Consumer(t.Context(), broker.StreamJobs, broker.WorkerConsumer)
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 5*time.Second, "jobs past max deliver", func() bool {
		if _, err := cons.FetchNoWait(1); err != nil {
			t.Fatal(err)
		}
		p, err := Pending(t.Context(), c)
		return err == nil && p.AckPending == 0 && p.Pending == 0 && p.Jobs == n
	})
	var orphans counter
	h := HandlerFunc(func(ctx context.Context, d *Delivery) Outcome {
		if !d.Orphan {
			t.Errorf("non-orphan delivery of %s", d.MsgID)
		}
		orphans.add(d.MsgID)
		return Outcome{Action: ActionDeadLetter, Payload: resultFor(d)}
	})
	cfg.UntilIdle = true
	if err := RunWorkers(t.Context(), c, cfg, h); err != nil {
		t.Fatal(err)
	}
	if orphans.len() != n {
		t.Errorf("%d orphans handled, want %d", orphans.len(), n)
	}
	if p, _ := Pending(t.Context(), c); p.Jobs != 0 || p.DeadLetters != n {
		t.Errorf("after sweep: %+v", p)
	}
}

func TestWorkerConfigValidate(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		cfg  WorkerConfig
		want string
	}{
		{"ack pending below concurrency", WorkerConfig{Concurrency: 64, MaxAckPending: 10}, "max ack pending"},
		{"backoff longer than deliveries", WorkerConfig{MaxDeliver: 2, BackOff: []time.Duration{time.Second, time.Second, time.Second}}, "backoff has 3 steps"},
		{"heartbeat outside ack wait", WorkerConfig{AckWait: time.Second, Heartbeat: 2 * time.Second}, "heartbeat"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.cfg.withDefaults().validate()
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("validate = %v, want it to say %q", err, tc.want)
			}
		})
	}
}

func TestWorkerConsumerDriftUpdated(t *testing.T) {
	t.Parallel()
	c := newConn(t)
	h := HandlerFunc(func(ctx context.Context, d *Delivery) Outcome { return Outcome{Action: ActionResult} })
	for _, ackWait := range []time.Duration{10 * time.Second, 20 * time.Second} {
		cfg := fastWorkers(WorkerConfig{AckWait: ackWait, MaxDeliver: 4, Concurrency: 300, UntilIdle: true})
		if err := RunWorkers(t.Context(), c, cfg, h); err != nil {
			t.Fatal(err)
		}
		cons, err := c.JetStream().Consumer(t.Context(), broker.StreamJobs, broker.WorkerConsumer)
		if err != nil {
			t.Fatal(err)
		}
		got := cons.CachedInfo().Config
		if d := broker.ConsumerDiff(got, workerConsumerConfig(c, cfg.withDefaults())); len(d) > 0 {
			t.Errorf("consumer differs from flags after RunWorkers: %v", d)
		}
		if got.AckWait != ackWait || got.MaxAckPending != 1200 || got.AckPolicy != jetstream.AckExplicitPolicy {
			t.Errorf("consumer config %+v", got)
		}
	}
}

// TestStrandedJobWithOutcomeRemoved: a job left in the work queue after its
// outcome was stored (a cluster lost the removal that follows the ack) is
// removed, not dead-lettered a second time as abandoned. Found by the
// faults suite's R3 scenario.
func TestStrandedJobWithOutcomeRemoved(t *testing.T) {
	t.Parallel()
	c := newConn(t)
	const n = 4
	items := jobItems("answered", "invoice", n)
	submit(t, c, items)
	// Jobs 0 and 1 have a result, job 2 a dead letter; job 3 nothing.
	for i, subj := range []string{broker.SubjectResults + ".invoice", broker.SubjectResults + ".invoice", broker.SubjectDLQ + ".invoice"} {
		id := items[i].MsgID
		if _, err := c.JetStream().PublishMsg(t.Context(), broker.NewMsg(subj, id, []byte(`{"job_id":"`+id+`"}`))); err != nil {
			t.Fatal(err)
		}
	}
	cfg := fastWorkers(WorkerConfig{MaxDeliver: 1, AckWait: 300 * time.Millisecond})
	deadWorker(t, c, cfg, n)
	cons, err := c.JetStream().Consumer(t.Context(), broker.StreamJobs, broker.WorkerConsumer)
	if err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 5*time.Second, "jobs past max deliver", func() bool {
		if _, err := cons.FetchNoWait(1); err != nil {
			t.Fatal(err)
		}
		p, err := Pending(t.Context(), c)
		return err == nil && p.AckPending == 0 && p.Pending == 0 && p.Jobs == n
	})
	var orphans counter
	h := HandlerFunc(func(ctx context.Context, d *Delivery) Outcome {
		orphans.add(d.MsgID)
		return Outcome{Action: ActionDeadLetter, Payload: resultFor(d)}
	})
	cfg.UntilIdle = true
	if err := RunWorkers(t.Context(), c, cfg, h); err != nil {
		t.Fatal(err)
	}
	if orphans.len() != 1 {
		t.Errorf("handler called for %d orphans, want 1 (only the unanswered job)", orphans.len())
	}
	p, err := Pending(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	if p.Jobs != 0 || p.Results != 2 || p.DeadLetters != 2 {
		t.Errorf("after the sweep: %d jobs, %d results, %d dead letters; want 0, 2, 2", p.Jobs, p.Results, p.DeadLetters)
	}
}

// TestRedeliveredJobKeepsItsFirstOutcome: a job whose first delivery stored
// an outcome and lost its ack comes back; a model that now answers
// otherwise must not give it a second outcome on the other stream.
func TestRedeliveredJobKeepsItsFirstOutcome(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name         string
		stored, then Action // what the first delivery stored, what the second decides
	}{
		{"result then dead letter", ActionResult, ActionDeadLetter},
		{"dead letter then result", ActionDeadLetter, ActionResult},
		{"nothing stored then dead letter", 0, ActionDeadLetter},
		{"result then result (deduplicated)", ActionResult, ActionResult},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newConn(t)
			items := jobItems("again", "invoice", 1)
			submit(t, c, items)
			id := items[0].MsgID
			subject := map[Action]string{ActionResult: broker.SubjectResults + ".invoice", ActionDeadLetter: broker.SubjectDLQ + ".invoice"}
			if tc.stored != 0 {
				if _, err := c.JetStream().PublishMsg(t.Context(), broker.NewMsg(subject[tc.stored], id, []byte(`{"job_id":"`+id+`","first":true}`))); err != nil {
					t.Fatal(err)
				}
			}
			// The first delivery, never acked (its worker lost the ack).
			cfg := fastWorkers(WorkerConfig{MaxDeliver: 3, AckWait: 300 * time.Millisecond, UntilIdle: true})
			cons, err := c.EnsureConsumer(t.Context(), broker.StreamJobs, workerConsumerConfig(c, cfg.withDefaults()))
			if err != nil {
				t.Fatal(err)
			}
			batch, err := cons.Fetch(1, jetstream.FetchMaxWait(5*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			for range batch.Messages() {
			}
			var calls counter
			h := HandlerFunc(func(ctx context.Context, d *Delivery) Outcome {
				calls.add(d.MsgID)
				if d.NumDelivered < 2 {
					t.Errorf("delivery %d, want a redelivery", d.NumDelivered)
				}
				return Outcome{Action: tc.then, Schema: "invoice", Payload: []byte(`{"job_id":"` + d.MsgID + `","second":true}`)}
			})
			if err := RunWorkers(t.Context(), c, cfg, h); err != nil {
				t.Fatal(err)
			}
			if calls.get(id) != 1 {
				t.Errorf("handler called %d times, want 1", calls.get(id))
			}
			p, err := Pending(t.Context(), c)
			if err != nil {
				t.Fatal(err)
			}
			want := tc.stored
			if want == 0 {
				want = tc.then
			}
			wantResults, wantDead := uint64(0), uint64(0)
			if want == ActionResult {
				wantResults = 1
			} else {
				wantDead = 1
			}
			if p.Jobs != 0 || p.Results != wantResults || p.DeadLetters != wantDead {
				t.Errorf("%d jobs, %d results, %d dead letters; want 0, %d, %d", p.Jobs, p.Results, p.DeadLetters, wantResults, wantDead)
			}
		})
	}
}

// TestPrefetchedJobsHandedBackOnStop: with every handler busy, the jobs
// fetched ahead wait in the queue; on stop they are naked at once (another
// worker gets them as second deliveries while the first worker's handlers
// are still running), never handed to the stopping worker's handlers.
func TestPrefetchedJobsHandedBackOnStop(t *testing.T) {
	t.Parallel()
	c := newConn(t)
	const k, n = 4, 20
	submit(t, c, jobItems("pre", "invoice", n))

	started := make(chan string, n)
	release := make(chan struct{})
	var firstCalls counter
	first := HandlerFunc(func(ctx context.Context, d *Delivery) Outcome {
		firstCalls.add(d.MsgID)
		started <- d.MsgID
		<-release
		return Outcome{Action: ActionResult, Payload: resultFor(d)}
	})
	ctx, cancel := context.WithCancel(t.Context())
	wait := runWorkers(ctx, c, fastWorkers(WorkerConfig{Concurrency: k, ShutdownGrace: 20 * time.Second}), first)
	for range k {
		<-started
	}
	// The prefetched job is delivered too: k running plus prefetchFor(k).
	want := k + prefetchFor(k)
	poll.Until(t, 5*time.Second, "jobs fetched ahead", func() bool {
		p, err := Pending(t.Context(), c)
		return err == nil && p.AckPending == want
	})
	cancel()

	redelivered := make(chan string, n)
	second := HandlerFunc(func(ctx context.Context, d *Delivery) Outcome {
		if d.NumDelivered > 1 {
			redelivered <- d.MsgID
		}
		return Outcome{Action: ActionResult, Payload: resultFor(d)}
	})
	ctx2, cancel2 := context.WithCancel(t.Context())
	defer cancel2()
	wait2 := runWorkers(ctx2, c, fastWorkers(WorkerConfig{Concurrency: k}), second)
	handedBack := map[string]bool{}
	for len(handedBack) < prefetchFor(k) {
		select {
		case id := <-redelivered:
			handedBack[id] = true
		case <-time.After(10 * time.Second):
			t.Fatalf("prefetched jobs not handed back while the handlers run: got %v", handedBack)
		}
	}
	close(release)
	if err := wait(); err != nil {
		t.Fatalf("first RunWorkers = %v", err)
	}
	for id := range handedBack {
		if firstCalls.get(id) != 0 {
			t.Errorf("job %s was handed back but also handled by the stopping worker", id)
		}
	}
	if firstCalls.len() != k {
		t.Errorf("stopping worker handled %d jobs, want its %d running ones", firstCalls.len(), k)
	}
	poll.Until(t, 10*time.Second, "every job stored", func() bool {
		p, err := Pending(t.Context(), c)
		return err == nil && p.Results == n
	})
	cancel2()
	if err := wait2(); err != nil {
		t.Fatal(err)
	}
}
