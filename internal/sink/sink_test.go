package sink

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/index"
	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/payload"
	"github.com/llmpipeline/pipeline/internal/poll"
	"github.com/llmpipeline/pipeline/job"
)

// publishOutcomes stores n results and m dead letters directly.
func publishOutcomes(t *testing.T, c *broker.Conn, results, dead int) []string {
	t.Helper()
	var ids []string
	for i := range results + dead {
		id := fmt.Sprintf("out-%04d", i)
		subj := broker.SubjectResults + ".invoice"
		if i >= results {
			subj = broker.SubjectDLQ + ".invoice"
		}
		if _, err := c.JetStream().PublishMsg(t.Context(), broker.NewMsg(subj, id, []byte(`{"job_id":"`+id+`"}`))); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	return ids
}

// memIndex is a Index in memory that checks how the sink uses it.
type memIndex struct {
	t         *testing.T
	mu        sync.Mutex
	cursors   map[string]uint64
	stored    map[string]int  // message id -> times written
	offered   map[string]bool // written with a Record (handed over, not read back)
	failFirst int             // writes that fail before the index works
	failed    int
	maxBatch  int
	inWrite   bool
}

func newMemIndex(t *testing.T) *memIndex {
	return &memIndex{t: t, cursors: map[string]uint64{}, stored: map[string]int{}, offered: map[string]bool{}}
}

func (x *memIndex) Cursors(context.Context) (map[string]uint64, error) {
	x.mu.Lock()
	defer x.mu.Unlock()
	return maps.Clone(x.cursors), nil
}

func (x *memIndex) Write(_ context.Context, batch []Msg, cursors map[string]uint64) error {
	x.mu.Lock()
	if x.inWrite {
		x.t.Error("Write called concurrently")
	}
	x.inWrite = true
	x.mu.Unlock()
	defer func() {
		x.mu.Lock()
		x.inWrite = false
		x.mu.Unlock()
	}()
	x.mu.Lock()
	defer x.mu.Unlock()
	x.maxBatch = max(x.maxBatch, len(batch))
	if x.failed < x.failFirst {
		x.failed++
		return errors.New("database is locked")
	}
	for _, m := range batch {
		if m.MsgID == "" || m.Sequence == 0 || m.Stream == "" {
			x.t.Errorf("sink message without id or position: %+v", m)
		}
		x.stored[m.MsgID]++
		if m.Record != nil {
			x.offered[m.MsgID] = true
		}
	}
	for k, v := range cursors {
		x.cursors[k] = v
	}
	return nil
}

// check reports ids not stored exactly once, or stored and not in want.
func (x *memIndex) check(t *testing.T, want []string) {
	t.Helper()
	x.mu.Lock()
	defer x.mu.Unlock()
	var got []string
	for id, n := range x.stored {
		got = append(got, id)
		if n != 1 {
			t.Errorf("%s written %d times", id, n)
		}
	}
	slices.Sort(got)
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(got, want) {
		t.Errorf("stored %d ids %v\nwant %d %v", len(got), got, len(want), want)
	}
}

func (x *memIndex) cursor(stream string) uint64 {
	x.mu.Lock()
	defer x.mu.Unlock()
	return x.cursors[stream]
}

func lastSeq(t *testing.T, c *broker.Conn, stream string) uint64 {
	t.Helper()
	st, err := c.StreamState(t.Context(), stream)
	if err != nil {
		t.Fatal(err)
	}
	return st.LastSeq
}

// runSink runs a sink until idle.
func runSink(t *testing.T, c *broker.Conn, idx Index, cfg Config) *Sink {
	t.Helper()
	cfg.UntilIdle = true
	if cfg.MaxWait == 0 {
		cfg.MaxWait = 10 * time.Millisecond
	}
	if cfg.GapGrace == 0 {
		cfg.GapGrace = 10 * time.Millisecond
	}
	s := New(c, idx, cfg)
	if err := s.Run(t.Context()); err != nil {
		t.Fatal(err)
	}
	return s
}

func TestSinkReadsTheStreamsIntoTheIndex(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name      string
		results   int
		dead      int
		failFirst int
		batch     int
	}{
		{name: "all written", results: 30, dead: 7, batch: 10},
		{name: "write fails twice then the same batch is written", results: 20, dead: 5, failFirst: 2, batch: 500},
		{name: "empty", batch: 10},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c := newConn(t)
			ids := publishOutcomes(t, c, tc.results, tc.dead)
			idx := newMemIndex(t)
			idx.failFirst = tc.failFirst
			s := runSink(t, c, idx, Config{Batch: tc.batch})
			idx.check(t, ids)
			if idx.maxBatch > tc.batch {
				t.Errorf("batch of %d, above %d", idx.maxBatch, tc.batch)
			}
			if idx.failed != tc.failFirst {
				t.Errorf("%d failed writes, want %d", idx.failed, tc.failFirst)
			}
			for _, name := range []string{broker.StreamResults, broker.StreamDLQ} {
				last := lastSeq(t, c, name)
				if got := idx.cursor(name); got != last {
					t.Errorf("%s: cursor %d in the index, stream's last sequence %d", name, got, last)
				}
				if got := s.Progress()[name]; got != last {
					t.Errorf("%s: Progress %d, want %d", name, got, last)
				}
			}
			if err := s.Idle(t.Context()); err != nil {
				t.Errorf("Idle after Run: %v", err)
			}
		})
	}
}

func TestSinkResumesFromTheIndexCursor(t *testing.T) {
	t.Parallel()
	c := newConn(t)
	ids := publishOutcomes(t, c, 12, 4)
	idx := newMemIndex(t)
	idx.cursors[broker.StreamResults] = 5 // results 1..5 indexed by an earlier run
	runSink(t, c, idx, Config{})
	idx.check(t, slices.Concat(ids[5:12], ids[12:]))
	if got := idx.cursor(broker.StreamResults); got != 12 {
		t.Errorf("results cursor %d, want 12", got)
	}

	// A second run with nothing new writes nothing.
	before := maps.Clone(idx.stored)
	runSink(t, c, idx, Config{})
	if !maps.Equal(before, idx.stored) {
		t.Errorf("a run with nothing new wrote: %v -> %v", before, idx.stored)
	}
}

// TestSinkReadsDirectly: the direct-get read, which the sink takes when
// no consumer delivers (a cluster that just lost a node), takes what the
// stream holds (a body over the broker's message limit from the object
// store), passes over its deleted messages in the middle and at the end,
// and stops at what is due.
func TestSinkReadsDirectly(t *testing.T) {
	t.Parallel()
	c := newConn(t)
	ids := publishOutcomes(t, c, 12, 0)
	big := []byte(`{"job_id":"big","raw":"` + strings.Repeat("x", 2<<20) + `"}`) // 2 MiB, over the 1 MiB limit
	bigMsg := broker.NewMsg(broker.SubjectResults+".invoice", "big", big)
	if _, err := c.Payloads().Offload(t.Context(), bigMsg, payload.KindResults); err != nil {
		t.Fatal(err)
	}
	if _, err := c.JetStream().PublishMsg(t.Context(), bigMsg); err != nil { // sequence 13
		t.Fatal(err)
	}
	s, err := c.JetStream().Stream(t.Context(), broker.StreamResults)
	if err != nil {
		t.Fatal(err)
	}
	for _, seq := range []uint64{3, 9, 10} { // 9 and 10: at the end of what is due
		if err := s.DeleteMsg(t.Context(), seq); err != nil {
			t.Fatal(err)
		}
	}
	sink := New(c, newMemIndex(t), Config{})
	st := &sinkStream{name: broker.StreamResults, held: map[uint64]bool{}, due: 10}
	l := &sinkLoop{Sink: sink, streams: []*sinkStream{st}}
	if err := l.readDirect(t.Context(), s, st, 1, 100); err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range l.batch {
		got = append(got, m.MsgID)
	}
	if want := []string{ids[0], ids[1], ids[3], ids[4], ids[5], ids[6], ids[7]}; !slices.Equal(got, want) {
		t.Errorf("read %v, want %v", got, want)
	}
	for seq := uint64(1); seq <= 10; seq++ {
		absent, ok := st.held[seq]
		if want := seq == 3 || seq == 9 || seq == 10; !ok || absent != want {
			t.Errorf("sequence %d: held %v (known %v), want absent %v", seq, absent, ok, want)
		}
	}
	if _, ok := st.held[11]; ok {
		t.Error("sequence 11 was taken, beyond what is due")
	}

	st.due = 13
	l.batch = nil
	if err := l.readDirect(t.Context(), s, st, 11, 100); err != nil {
		t.Fatal(err)
	}
	if len(l.batch) != 3 || l.batch[2].MsgID != "big" || !bytes.Equal(l.batch[2].Data, big) {
		t.Fatalf("read %d messages, the last %q with %d bytes; want 3, the last the 2 MiB body from the object store", len(l.batch), l.batch[len(l.batch)-1].MsgID, len(l.batch[len(l.batch)-1].Data))
	}
}

func TestSinkMovesPastMessagesTheStreamNoLongerHolds(t *testing.T) {
	t.Parallel()
	c := newConn(t)
	ids := publishOutcomes(t, c, 10, 0)
	s, err := c.JetStream().Stream(t.Context(), broker.StreamResults)
	if err != nil {
		t.Fatal(err)
	}
	for _, seq := range []uint64{3, 7, 10} { // a hole in the middle and at the end
		if err := s.DeleteMsg(t.Context(), seq); err != nil {
			t.Fatal(err)
		}
	}
	idx := newMemIndex(t)
	runSink(t, c, idx, Config{})
	var want []string
	for i, id := range ids {
		if i+1 != 3 && i+1 != 7 && i+1 != 10 {
			want = append(want, id)
		}
	}
	idx.check(t, want)
	if got := idx.cursor(broker.StreamResults); got != 10 {
		t.Errorf("cursor %d, want 10 (past the deleted messages)", got)
	}

	// Purged: the cursor jumps to the stream's new start.
	for i := range 3 {
		if _, err := c.JetStream().PublishMsg(t.Context(), broker.NewMsg(broker.SubjectResults+".invoice", fmt.Sprintf("more-%d", i), []byte(`{}`))); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.Purge(t.Context()); err != nil {
		t.Fatal(err)
	}
	runSink(t, c, idx, Config{})
	if got := idx.cursor(broker.StreamResults); got != 13 {
		t.Errorf("after a purge: cursor %d, want 13", got)
	}
}

func TestSinkReadsAgainAStreamBehindItsCursor(t *testing.T) {
	t.Parallel()
	c := newConn(t)
	ids := publishOutcomes(t, c, 4, 2)
	idx := newMemIndex(t)
	// An index kept from a NATS store that was wiped: its cursors are
	// beyond what the new streams hold.
	idx.cursors[broker.StreamResults], idx.cursors[broker.StreamDLQ] = 1000, 1000
	runSink(t, c, idx, Config{})
	idx.check(t, ids)
	if got := idx.cursor(broker.StreamResults); got != 4 {
		t.Errorf("results cursor %d, want 4", got)
	}
}

func TestSinkTakesOffersAndReadsOnlyGaps(t *testing.T) {
	t.Parallel()
	c := newConn(t)
	ids := publishOutcomes(t, c, 10, 4)
	// Hand over the even results and every dead letter, as the workers of
	// the same process would; the odd results come from another process.
	msgs := slices.Concat(readAll(t, c, broker.StreamResults, ""), readAll(t, c, broker.StreamDLQ, ""))
	handed := map[string]bool{}
	offer := func(s *Sink) {
		for _, m := range msgs {
			if m.Stream == broker.StreamResults && m.Sequence%2 == 1 {
				continue
			}
			m.Record = "handed over"
			if !s.Offer(m) {
				t.Fatalf("offer of %s refused", m.MsgID)
			}
			handed[m.MsgID] = true
		}
		if s.Offer(Msg{Stream: broker.StreamResults, MsgID: "no-seq"}) {
			t.Error("an offer without a sequence (a duplicate publish) was taken")
		}
	}

	t.Run("gaps wait for their grace", func(t *testing.T) {
		idx := newMemIndex(t)
		s := New(c, idx, Config{MaxWait: 10 * time.Millisecond, GapGrace: time.Hour, UntilIdle: true})
		offer(s)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- s.Run(ctx) }()
		poll.Until(t, 30*time.Second, "the sink to index the 4 dead letters", func() bool { return s.Progress()[broker.StreamDLQ] == 4 })
		cancel()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
		idx.mu.Lock()
		defer idx.mu.Unlock()
		if len(idx.stored) != len(handed) {
			t.Errorf("%d written, want the %d handed over (the gaps are not due)", len(idx.stored), len(handed))
		}
		if got := idx.cursors[broker.StreamResults]; got != 0 {
			t.Errorf("results cursor %d past the gap at 1", got)
		}
	})

	t.Run("due gaps are read from the stream", func(t *testing.T) {
		idx := newMemIndex(t)
		// The offers are queued before Run, the grace is far longer than
		// taking them: each message is written once, from the hand-over
		// when there was one.
		s := New(c, idx, Config{MaxWait: 10 * time.Millisecond, GapGrace: 500 * time.Millisecond, UntilIdle: true})
		offer(s)
		if err := s.Run(t.Context()); err != nil {
			t.Fatal(err)
		}
		idx.check(t, ids)
		for _, id := range ids {
			if idx.offered[id] != handed[id] {
				t.Errorf("%s: written from an offer %v, handed over %v", id, idx.offered[id], handed[id])
			}
		}
		if got := idx.cursor(broker.StreamResults); got != 10 {
			t.Errorf("results cursor %d, want 10", got)
		}
	})
}

func TestReadStreamFilters(t *testing.T) {
	t.Parallel()
	c := newConn(t)
	publishOutcomes(t, c, 5, 3)
	if _, err := c.JetStream().PublishMsg(t.Context(), broker.NewMsg(broker.SubjectResults+".person", "p-1", []byte("{}"))); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		stream, filter string
		want           int
	}{
		{broker.StreamResults, "", 6},
		{broker.StreamResults, broker.SubjectResults + ".invoice", 5},
		{broker.StreamResults, broker.SubjectResults + ".person", 1},
		{broker.StreamResults, broker.SubjectResults + ".nothing", 0},
		{broker.StreamDLQ, "", 3},
		{broker.StreamJobs, "", 0},
	}
	for _, tc := range cases {
		t.Run(tc.stream+" "+tc.filter, func(t *testing.T) {
			got := readAll(t, c, tc.stream, tc.filter)
			if len(got) != tc.want {
				t.Errorf("read %d messages, want %d", len(got), tc.want)
			}
			for i := 1; i < len(got); i++ {
				if got[i].Sequence <= got[i-1].Sequence {
					t.Errorf("out of order: %d after %d", got[i].Sequence, got[i-1].Sequence)
				}
			}
		})
	}
	stop := errors.New("enough")
	err := ReadStream(t.Context(), c, broker.StreamResults, "", func(Msg) error { return stop })
	if !errors.Is(err, stop) {
		t.Errorf("ReadStream returned %v, want fn's error", err)
	}
}

// sinkOutcome is a RESULTS message as a worker encodes it: a first-pass
// success of about 1.5 KB (trace with the raw output, data, job).
func sinkOutcome(tb testing.TB, i int) []byte {
	tb.Helper()
	id := fmt.Sprintf("s-%08d", i)
	at := time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Millisecond)
	o := job.Outcome{
		JobID: id, Schema: "invoice", SchemaVersion: "3f9a", Status: job.StatusSucceeded, Model: "canned", Attempts: 1,
		Trace: []job.Attempt{{N: 1, Temperature: 0.7, FinishReason: "stop", PromptTokens: 420, CompletionTokens: 130, LatencyMS: 1,
			Raw: `{"invoice_number":"INV-1","vendor":"ACME \"Tools\"","total":1250.5,"currency":"EUR","lines":[{"sku":"A-1","qty":2,"price":125.25},{"sku":"B-2","qty":1,"price":1000}]}` + strings.Repeat(" ", 200)}},
		Deliveries: 1, StartedAt: at, FinishedAt: at.Add(time.Millisecond),
	}
	b, err := json.Marshal(o)
	if err != nil {
		tb.Fatal(err)
	}
	b = append(b[:len(b)-1], `,"data":{"invoice_number":"INV-1","vendor":"ACME \"Tools\"","total":1250.5,"currency":"EUR","lines":[{"sku":"A-1","qty":2,"price":125.25},{"sku":"B-2","qty":1,"price":1000}]}`...)
	return fmt.Appendf(b, `,"job":{"id":%q,"schema":"invoice","input":%q}}`, id, strings.Repeat("Invoice INV-1 from ACME. ", 24))
}

// BenchmarkSink runs the sink as `pipeline run` does, from a real RESULTS
// stream into a real SQLite file: consume, decode, write, ack. "consume"
// writes nothing (the sink loop's and the broker's share); "sqlite" decodes
// and writes with package index. cpu-µs/outcome is the process's CPU time (the
// embedded server's included) per outcome, the figure to compare.
func BenchmarkSink(b *testing.B) {
	for _, bc := range []struct {
		name  string
		store bool
	}{{"consume", false}, {"sqlite", true}} {
		b.Run(bc.name, func(b *testing.B) {
			c := newConn(b)
			for i := range b.N {
				if _, err := c.PublishAsync(b.Context(), broker.NewMsg(broker.SubjectResults+".invoice", fmt.Sprintf("s-%08d", i), sinkOutcome(b, i))); err != nil {
					b.Fatal(err)
				}
			}
			select {
			case <-c.JetStream().PublishAsyncComplete():
			case <-b.Context().Done():
				b.Fatal(b.Context().Err())
			}
			st, err := index.Open(filepath.Join(b.TempDir(), "pipeline.db"))
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			n := 0
			write := func(ctx context.Context, batch []Msg) error {
				n += len(batch)
				if !bc.store {
					return nil
				}
				outs := make([]job.Outcome, 0, len(batch))
				for _, m := range batch {
					o, err := job.DecodeOutcome(m.Data)
					if err != nil {
						return err
					}
					outs = append(outs, o)
				}
				return st.Write(ctx, outs)
			}
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuTime(b)
			sink := New(c, writeOnly(write), Config{UntilIdle: true, MaxWait: 20 * time.Millisecond, GapGrace: time.Millisecond})
			if err := sink.Run(b.Context()); err != nil {
				b.Fatal(err)
			}
			cpu := cpuTime(b) - cpu0
			b.StopTimer()
			if n < b.N {
				b.Fatalf("sink wrote %d of %d", n, b.N)
			}
			b.ReportMetric(float64(cpu.Microseconds())/float64(b.N), "cpu-µs/outcome")
		})
	}
}

// writeOnly is a Index that starts from nothing and calls write.
type writeOnly func(ctx context.Context, batch []Msg) error

func (w writeOnly) Cursors(context.Context) (map[string]uint64, error) { return nil, nil }

func (w writeOnly) Write(ctx context.Context, batch []Msg, _ map[string]uint64) error {
	return w(ctx, batch)
}

// cpuTime is the CPU time (user + system) this process used so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestSinkOfferDropsWhenTheSinkIsStuck: a sink that is not taking offers
// (its index locked, say) holds a worker at most offerWait, then the
// outcome is left to be read back from the stream.
func TestSinkOfferDropsWhenTheSinkIsStuck(t *testing.T) {
	t.Parallel()
	c := newConn(t)
	s := New(c, newMemIndex(t), Config{Batch: 1})
	m := Msg{Stream: broker.StreamResults, MsgID: "x"}
	for i := range s.offers.max {
		m.Sequence = uint64(i + 1)
		if !s.Offer(m) {
			t.Fatalf("offer %d refused with room in the queue", i+1)
		}
	}
	m.Sequence++
	start := time.Now()
	if s.Offer(m) {
		t.Fatal("offer taken by a sink that takes nothing")
	}
	// The first refusal waited for room; for the next second the sink
	// counts as stuck and the next refusal does not wait.
	if s.stuckUntil.Load() <= start.UnixNano() {
		t.Error("a wait that ran out did not mark the sink stuck")
	}
	m.Sequence++
	if s.Offer(m) {
		t.Fatal("offer taken by a sink that takes nothing")
	}
	if got := s.dropped.Load(); got != 2 {
		t.Errorf("%d offers counted as dropped, want 2", got)
	}
	if s.Offer(Msg{Stream: broker.StreamJobs, Sequence: 1}) {
		t.Error("an offer from the JOBS stream was taken")
	}
}

// TestSinkOfferWakesEveryWaitingWorker: when the loop takes a full queue,
// the room it makes goes to every worker waiting for it, not to one.
func TestSinkOfferWakesEveryWaitingWorker(t *testing.T) {
	t.Parallel()
	c := newConn(t)
	s := New(c, newMemIndex(t), Config{Batch: 2}) // room for 8
	for i := range s.offers.max {
		if !s.Offer(Msg{Stream: broker.StreamResults, Sequence: uint64(i + 1)}) {
			t.Fatal("offer refused with room in the queue")
		}
	}
	const waiters = 5
	results := make(chan bool, waiters)
	for i := range waiters {
		go func() {
			results <- s.Offer(Msg{Stream: broker.StreamResults, Sequence: uint64(100 + i)})
		}()
	}
	// Wait until all of them are blocked on a full queue, then make room
	// once, as the sink loop does.
	poll.Until(t, 30*time.Second, "every offer to wait for room", func() bool { return s.waiting.Load() == waiters })
	s.offers.take(nil)
	for range waiters {
		if !<-results {
			t.Error("a waiting offer was dropped though the loop made room for all")
		}
	}
	if got := s.dropped.Load(); got != 0 {
		t.Errorf("%d offers dropped", got)
	}
}
