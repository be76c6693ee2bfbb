package app

import (
	"context"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/llmpipeline/pipeline/batch"
	"github.com/llmpipeline/pipeline/internal/escape"
	"github.com/llmpipeline/pipeline/internal/queue"
	"github.com/llmpipeline/pipeline/internal/sink"
	"github.com/llmpipeline/pipeline/job"
	"github.com/llmpipeline/pipeline/llm"
)

// Status counts what this process's workers did, from their own
// outcomes: the progress bar on a terminal and the summary line at the end
// of `run` read it. Every method is safe for concurrent use.
type Status struct {
	start time.Time

	inHandle    atomic.Int64 // jobs in the handler now: what --concurrency bounds
	succeeded   atomic.Int64
	alreadyDone atomic.Int64 // acked without a model call: the ledger says they ended
	repeated    atomic.Int64 // answered, but an outcome of the run was stored already (it stays)
	calls       atomic.Int64 // model calls (attempts)
	tokens      atomic.Int64 // prompt + completion tokens
	handedBack  atomic.Int64 // jobs handed back undone on shutdown
	breaker     atomic.Value // string: the model breaker's state
	// census, in batch mode, reads the fleet's batches (batch.Runner's
	// Census); nil otherwise.
	census atomic.Pointer[func() batch.Census]

	mu   sync.Mutex
	dead map[job.Class]int // dead letters by class
}

// NewStatus is a status of a run started at now, its breaker closed.
func NewStatus(now time.Time) *Status {
	s := &Status{start: now, dead: map[job.Class]int{}}
	s.breaker.Store(llm.StateClosed)
	return s
}

// Handler wraps h to count the jobs in it.
func (s *Status) Handler(h queue.Handler) queue.Handler {
	return queue.HandlerFunc(func(ctx context.Context, d *queue.Delivery) queue.Outcome {
		s.inHandle.Add(1)
		defer s.inHandle.Add(-1)
		return h.Handle(ctx, d)
	})
}

// Stored counts one result or dead letter the stream acknowledged
// (queue.WorkerConfig.Stored).
func (s *Status) Stored(m sink.Msg) {
	o, ok := outcomeOf(m)
	if !ok {
		return // not an outcome: nothing to count
	}
	s.spent(o)
	if o.Status == job.StatusSucceeded {
		s.succeeded.Add(1)
		return
	}
	s.mu.Lock()
	s.dead[o.Class]++
	s.mu.Unlock()
}

// AlreadyDone counts a job acked without a model call, the ledger saying
// it ended (queue.WorkerConfig.AlreadyDone).
func (s *Status) AlreadyDone(string) { s.alreadyDone.Add(1) }

// HandedBack counts n jobs handed back undone on shutdown
// (queue.WorkerConfig.HandedBack).
func (s *Status) HandedBack(n int) { s.handedBack.Add(int64(n)) }

// HandedBackCount is the jobs handed back so far.
func (s *Status) HandedBackCount() int64 { return s.handedBack.Load() }

// SetBreaker records the primary model's breaker state for the progress line.
func (s *Status) SetBreaker(state string) { s.breaker.Store(state) }

// SetCensus gives the status batch mode's census of the fleet's batches.
func (s *Status) SetCensus(census func() batch.Census) { s.census.Store(&census) }

// Repeated counts a job the workers answered whose outcome was not
// kept, the run's stored one standing (queue.WorkerConfig.Repeated): its
// model calls were made all the same.
func (s *Status) Repeated(m sink.Msg) {
	s.repeated.Add(1)
	if o, ok := outcomeOf(m); ok {
		s.spent(o)
	}
}

// spent counts an outcome's model calls and tokens.
func (s *Status) spent(o job.Outcome) {
	s.calls.Add(int64(o.Attempts))
	var tokens int64
	for _, a := range o.Trace {
		tokens += int64(a.PromptTokens + a.CompletionTokens)
	}
	s.tokens.Add(tokens)
}

// outcomeOf is the outcome a worker handed over.
func outcomeOf(m sink.Msg) (job.Outcome, bool) {
	var o job.Outcome
	switch r := m.Record.(type) {
	case *job.Outcome:
		o = *r
	case job.Outcome:
		o = r
	default:
		var err error
		if o, err = job.DecodeOutcome(m.Data); err != nil {
			return o, false
		}
	}
	return o, true
}

// Snapshot is the status at one moment.
type Snapshot struct {
	Elapsed     time.Duration
	Done        int64 // outcomes stored plus jobs found already done
	Total       int64 // Done plus the jobs still waiting or unacked
	Succeeded   int64
	AlreadyDone int64
	Dead        map[string]int
	InFlight    int64
	Calls       int64
	Tokens      int64
	HandedBack  int64
	Breaker     string
	// Batches is set in batch mode.
	Batches *BatchCounts

	// Repeated: answered, their run's outcome already stored (it stays).
	Repeated int64
}

// BatchCounts are the fleet's batch-mode work in flight: batches not
// settled yet by state, the requests in them and the requests queued for
// the next batch.
type BatchCounts struct {
	InFlight  map[string]int // by the batch's state: submitting, the provider's status word, collecting
	InBatches int
	Queued    int
}

// BatchCountsOf is what the status line shows of a census: a batch in
// flight by the provider's status word while the provider has it, else by
// the record's state (submitting, collecting).
func BatchCountsOf(c batch.Census) *BatchCounts {
	b := &BatchCounts{InFlight: map[string]int{}, InBatches: c.InBatches, Queued: c.Queued}
	for k, n := range c.Batches {
		if !k.InFlight() {
			continue
		}
		word := k.State
		if k.State == batch.StateSubmitted && k.Status != "" {
			word = k.Status
		}
		b.InFlight[word] += n
	}
	return b
}

// held is the jobs batch mode holds: acked, not ended yet.
func (s Snapshot) held() int64 {
	if s.Batches == nil {
		return 0
	}
	return int64(s.Batches.InBatches + s.Batches.Queued)
}

// Snapshot is the status at now.
func (s *Status) Snapshot(now time.Time) Snapshot {
	snap := Snapshot{
		Elapsed: now.Sub(s.start), Succeeded: s.succeeded.Load(), AlreadyDone: s.alreadyDone.Load(), Repeated: s.repeated.Load(),
		InFlight: s.inHandle.Load(), Calls: s.calls.Load(), Tokens: s.tokens.Load(), HandedBack: s.handedBack.Load(),
		Breaker: s.breaker.Load().(string), Dead: map[string]int{},
	}
	s.mu.Lock()
	for k, v := range s.dead {
		snap.Dead[string(k)] = v
		snap.Done += int64(v)
	}
	s.mu.Unlock()
	snap.Done += snap.Succeeded + snap.AlreadyDone + snap.Repeated
	snap.Total = snap.Done
	if f := s.census.Load(); f != nil {
		snap.Batches = BatchCountsOf((*f)())
	}
	return snap
}

func (s Snapshot) deadLettered() int64 {
	var n int64
	for _, v := range s.Dead {
		n += int64(v)
	}
	return n
}

// byClass is "schema 3, truncated 2": the classes by count, then name.
func byClass(m map[string]int) string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool {
		if m[ks[i]] != m[ks[j]] {
			return m[ks[i]] > m[ks[j]]
		}
		return ks[i] < ks[j]
	})
	parts := make([]string, len(ks))
	for i, k := range ks {
		parts[i] = fmt.Sprintf("%s %d", escape.Line(k), m[k]) // a provider's status word in batch mode
	}
	return strings.Join(parts, ", ")
}

// StatusLine is what the progress bar shows beside the bar: done of total,
// rate, ETA, results, dead letters by class, jobs in flight (in the
// handler, as --concurrency counts them), in batch mode the fleet's
// batches in flight by state and the requests waiting in them or queued,
// and the breaker when not closed.
func StatusLine(s Snapshot) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%d/%d jobs", s.Done, s.Total)
	rate := 0.0
	if secs := s.Elapsed.Seconds(); secs > 0 {
		rate = float64(s.Done) / secs
	}
	fmt.Fprintf(&b, "  %.1f/s", rate)
	switch left := s.Total - s.Done; {
	case left <= 0:
		b.WriteString("  ETA 0s")
	case rate > 0:
		fmt.Fprintf(&b, "  ETA %s", (time.Duration(float64(left)/rate) * time.Second).Round(time.Second))
	default:
		b.WriteString("  ETA ?")
	}
	fmt.Fprintf(&b, "  results %d  dead letters %d", s.Succeeded, s.deadLettered())
	if len(s.Dead) > 0 {
		fmt.Fprintf(&b, " (%s)", byClass(s.Dead))
	}
	fmt.Fprintf(&b, "  in flight %d", s.InFlight)
	if bc := s.Batches; bc != nil {
		if len(bc.InFlight) == 0 {
			b.WriteString("  batches 0 in flight")
		} else {
			fmt.Fprintf(&b, "  batches %s", byClass(bc.InFlight))
		}
		fmt.Fprintf(&b, "  requests %d in batches", bc.InBatches)
		if bc.Queued > 0 {
			fmt.Fprintf(&b, ", %d queued", bc.Queued)
		}
	}
	if s.Breaker != "" && s.Breaker != llm.StateClosed {
		fmt.Fprintf(&b, "  breaker %s", escape.Line(s.Breaker))
	}
	return b.String()
}

// SummaryLine is the one line `run` ends with, on stderr.
func SummaryLine(s Snapshot) string {
	var b strings.Builder
	fmt.Fprintf(&b, "run: %d jobs in %s: %d succeeded, %d dead-lettered", s.Done, s.Elapsed.Round(time.Millisecond), s.Succeeded, s.deadLettered())
	if len(s.Dead) > 0 {
		fmt.Fprintf(&b, " (%s)", byClass(s.Dead))
	}
	if s.AlreadyDone > 0 {
		fmt.Fprintf(&b, ", %d already done", s.AlreadyDone)
	}
	if s.Repeated > 0 {
		fmt.Fprintf(&b, ", %d answered again (an outcome of their run was stored already and stays)", s.Repeated)
	}
	fmt.Fprintf(&b, ", %d model calls, %d tokens", s.Calls, s.Tokens)
	return b.String()
}

// PendingFunc reads the jobs still waiting or unacked on the consumer.
type PendingFunc func(ctx context.Context) (queue.PendingInfo, error)

// ShowProgress draws the status on a progress bar on w while the workers
// run, if w is a terminal; it returns the function that stops it. Total is
// what is done plus what the consumer still holds (pending and unacked)
// plus, in batch mode, the requests waiting in batches or queued for one,
// so it grows as jobs arrive.
func ShowProgress(ctx context.Context, w io.Writer, terminal bool, st *Status, pending PendingFunc) func() {
	if !terminal {
		return func() {}
	}
	// A known length from the start (the first update sets the real one):
	// a bar of unknown length (-1) runs a spinner goroutine of its own that
	// redraws it every 100 ms even after Exit, over the lines printed after
	// it ("stopped: N jobs handed back", the summary).
	bar := progressbar.NewOptions64(1, progressbar.OptionSetWriter(w), progressbar.OptionSetWidth(20),
		progressbar.OptionShowDescriptionAtLineEnd(), progressbar.OptionSetRenderBlankState(true),
		progressbar.OptionThrottle(200*time.Millisecond), progressbar.OptionSetElapsedTime(false),
		progressbar.OptionSetPredictTime(false))
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	update := func() {
		snap := st.Snapshot(time.Now())
		if p, err := pending(ctx); err == nil {
			snap.Total = snap.Done + int64(p.Pending) + int64(p.AckPending) + snap.held()
		}
		bar.ChangeMax64(max(snap.Total, 1))
		bar.Describe(StatusLine(snap))
		_ = bar.Set64(snap.Done) // a terminal write; nothing to do if it fails
	}
	go func() {
		defer close(done)
		t := time.NewTicker(500 * time.Millisecond)
		defer t.Stop()
		for {
			update()
			select {
			case <-ctx.Done():
				_ = bar.Exit()
				fmt.Fprintln(w)
				return
			case <-t.C:
			}
		}
	}()
	return func() { cancel(); <-done }
}
