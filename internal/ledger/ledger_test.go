package ledger_test

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/ledger"
	"github.com/llmpipeline/pipeline/internal/payload"
	"github.com/llmpipeline/pipeline/internal/poll"
	"github.com/llmpipeline/pipeline/internal/queue"
	"github.com/llmpipeline/pipeline/internal/queuetest"
	"github.com/llmpipeline/pipeline/job"
	"github.com/nats-io/nats.go/jetstream"
)

func TestLedgerKeyIsInjectiveAndValid(t *testing.T) {
	t.Parallel()
	ids := []string{"inv-0001", "a:b", "a=3Ab", "a~b", "a@b", "a+b", "a=b", "A_b", "x=40", "x@", "=", "==", "=3D"}
	seen := map[string]string{}
	for _, id := range ids {
		k := ledger.Key(id)
		for i := 0; i < len(k); i++ {
			c := k[i]
			if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '=') {
				t.Errorf("key %q of %q holds %q, not a KV key character", k, id, c)
			}
		}
		if other, dup := seen[k]; dup {
			t.Errorf("ids %q and %q share the key %q", other, id, k)
		}
		seen[k] = id
	}
	if ledger.Key("inv-0001") != "inv-0001" {
		t.Errorf("plain ids should stay readable, got %q", ledger.Key("inv-0001"))
	}
}

func TestRunOfAndRunMsgID(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		msgID, jobID string
		run          int
	}{{"a", "a", 0}, {"a~r3", "a", 3}, {"a~r", "a", 0}, {"a~rx", "a", 0}, {"b~r2", "a", 0}, {"a~r12", "a", 12}} {
		if got := ledger.RunOf(tc.msgID, tc.jobID); got != tc.run {
			t.Errorf("RunOf(%q, %q) = %d, want %d", tc.msgID, tc.jobID, got, tc.run)
		}
	}
	if ledger.RunMsgID("a", 0) != "a" || ledger.RunMsgID("a", 2) != "a~r2" || ledger.RunOf(ledger.RunMsgID("x:y", 7), "x:y") != 7 {
		t.Error("RunMsgID does not round-trip through ledger.RunOf")
	}
}

// TestRecordRunFirstWriterWins: concurrent writers of one run agree on the
// first one's record; other runs add to the entry.
func TestRecordRunFirstWriterWins(t *testing.T) {
	t.Parallel()
	c := newConn(t)
	ctx := t.Context()
	var wg sync.WaitGroup
	got := make([]ledger.Run, 8)
	for i := range got {
		wg.Go(func() {
			r, err := ledger.New(c).Record(ctx, "job:1", ledger.Run{Run: 0, MsgID: "job:1", Stream: broker.StreamResults, Seq: uint64(i + 1)})
			if err != nil {
				t.Error(err)
			}
			got[i] = r
		})
	}
	wg.Wait()
	for i := range got {
		if got[i].Seq != got[0].Seq {
			t.Fatalf("writers disagree on the run's outcome: %v", got)
		}
	}
	if _, err := ledger.New(c).Record(ctx, "job:1", ledger.Run{Run: 1, MsgID: "job:1~r1", Stream: broker.StreamDLQ, Seq: 9}); err != nil {
		t.Fatal(err)
	}
	e, found, err := ledger.New(c).Get(ctx, "job:1")
	if err != nil || !found {
		t.Fatalf("Ledger: %v %v", found, err)
	}
	if len(e.Runs) != 2 || e.LastRun() != 1 {
		t.Errorf("entry %+v, want runs 0 and 1", e)
	}
	if r, ok := e.Ended(0); !ok || r.Seq != got[0].Seq {
		t.Errorf("run 0 recorded as %+v, want seq %d", r, got[0].Seq)
	}
}

// TestLedgerSkipsEndedRuns: a job published again after its run ended is
// acked without calling the handler, also when several copies arrive at
// once; the ledger names the stored outcome; a rerun is handled.
func TestLedgerSkipsEndedRuns(t *testing.T) {
	t.Parallel()
	c := newConn(t, func(cfg *broker.Config) { cfg.DuplicateWindow = 200 * time.Millisecond })
	items := queuetest.JobItems("l", "invoice", 20)
	for i := range items {
		items[i].JobID = items[i].MsgID
	}
	queuetest.Submit(t, c, items)
	submitted := time.Now()
	var calls queuetest.Counter
	h := queue.HandlerFunc(func(ctx context.Context, d *queue.Delivery) queue.Outcome {
		calls.Add(d.MsgID)
		return queue.Outcome{Action: queue.ActionResult, Schema: d.Job.Schema, Payload: queuetest.ResultFor(d)}
	})
	if err := queue.RunWorkers(t.Context(), c, queuetest.FastWorkers(queue.WorkerConfig{Concurrency: 4, UntilIdle: true}), h); err != nil {
		t.Fatal(err)
	}
	e, found, err := ledger.New(c).Get(t.Context(), items[0].JobID)
	if r, ok := e.Ended(0); err != nil || !found || !ok || r.Stream != broker.StreamResults || r.Seq == 0 {
		t.Fatalf("ledger entry %+v found %v err %v", e, found, err)
	}

	// Past the window, three raw copies of every job (as producers that
	// skip submit would publish them). The server forgets ids on a timer of
	// the window's period, so an id lives up to twice the window.
	deadline := submitted.Add(time.Second)
	poll.Until(t, 5*time.Second, "the duplicate window to pass", func() bool { return time.Now().After(deadline) })
	// The first copy has the job's message id, the next two none (they
	// would deduplicate each other): the worker keys them on the job's id.
	// The last one has a message id of its own, which names another key
	// than the job's: the read started at fetch asks about the wrong run,
	// and the worker must ask again under the job's.
	for i := range 4 {
		for _, it := range items {
			msgID := it.MsgID
			switch i {
			case 1, 2:
				msgID = ""
			case 3:
				msgID = "copy-" + it.MsgID
			}
			ack, err := c.JetStream().PublishMsg(t.Context(), broker.NewMsg(broker.SubjectJobs+"."+it.Schema, msgID, it.Data))
			if err != nil {
				t.Fatal(err)
			}
			if ack.Duplicate {
				t.Fatal("copy deduplicated: the window has not passed")
			}
		}
	}
	var done queuetest.Counter
	cfg := queuetest.FastWorkers(queue.WorkerConfig{Concurrency: 8, UntilIdle: true, AlreadyDone: func(id string) { done.Add(id) }})
	if err := queue.RunWorkers(t.Context(), c, cfg, h); err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		if n := calls.Get(it.MsgID); n != 1 {
			t.Errorf("%s handled %d times, want 1", it.MsgID, n)
		}
		if n := done.Get(it.MsgID); n != 3 {
			t.Errorf("%s acked as already done %d times, want 3", it.MsgID, n)
		}
		if n, m := done.Get("copy-"+it.MsgID), calls.Get("copy-"+it.MsgID); n != 1 || m != 0 {
			t.Errorf("the copy of %s under another message id: acked as already done %d times, handled %d; want 1, 0", it.MsgID, n, m)
		}
	}
	if got := len(queuetest.ReadAll(t, c, broker.StreamResults, "")); got != len(items) {
		t.Errorf("%d results, want %d", got, len(items))
	}

	// Submit consults the ledger: already done, or a new run with Rerun.
	st := queuetest.Submit(t, c, items)
	if st.AlreadyDone != len(items) || st.Published != 0 {
		t.Errorf("resubmit: %+v", st)
	}
	rerun := []queue.SubmitItem{items[0]}
	rerun[0].Rerun = true
	if st := queuetest.Submit(t, c, rerun); st.Reruns != 1 || st.Published != 1 {
		t.Errorf("rerun: %+v", st)
	}
	if err := queue.RunWorkers(t.Context(), c, queuetest.FastWorkers(queue.WorkerConfig{Concurrency: 2, UntilIdle: true}), h); err != nil {
		t.Fatal(err)
	}
	if n := calls.Get(ledger.RunMsgID(items[0].JobID, 1)); n != 1 {
		t.Errorf("rerun handled %d times, want 1", n)
	}
}

// TestLargePayloadsRoundTrip: on a server at the default max payload, a
// job and a result three times over it are stored through the object
// store, read back whole by the worker and by ReadStream, and the job's
// body is deleted once the job is acked.
func TestLargePayloadsRoundTrip(t *testing.T) {
	t.Parallel()
	c := newConn(t)
	if c.NATS().MaxPayload() != 1<<20 {
		t.Fatalf("max payload %d, want the default 1 MiB", c.NATS().MaxPayload())
	}
	big := fmt.Appendf(nil, `{"id":"big","schema":"invoice","input":%q}`, strings.Repeat("y", 3<<20))
	if _, err := queue.Submit(t.Context(), c, []queue.SubmitItem{{Data: big, Schema: "invoice", MsgID: "big", JobID: "big"}}, nil); err != nil {
		t.Fatal(err)
	}
	answer := bytes.Repeat([]byte("z"), 3<<20)
	h := queue.HandlerFunc(func(ctx context.Context, d *queue.Delivery) queue.Outcome {
		if d.JobErr != nil || !bytes.Equal(d.Data, big) || d.Size != int64(len(big)) {
			t.Errorf("job read back as %d bytes (err %v), want %d", len(d.Data), d.JobErr, len(big))
		}
		return queue.Outcome{Action: queue.ActionResult, Schema: "invoice", Payload: answer}
	})
	if err := queue.RunWorkers(t.Context(), c, queuetest.FastWorkers(queue.WorkerConfig{Concurrency: 1, UntilIdle: true}), h); err != nil {
		t.Fatal(err)
	}
	res := queuetest.ReadAll(t, c, broker.StreamResults, "")
	if len(res) != 1 || !bytes.Equal(res[0].Data, answer) {
		t.Fatalf("results: %d messages, first %d bytes", len(res), len(res[0].Data))
	}
	obs, err := c.JetStream().ObjectStore(t.Context(), payload.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	infos, err := obs.List(t.Context())
	if err != nil && err != jetstream.ErrNoObjectsFound {
		t.Fatal(err)
	}
	var names []string
	for _, i := range infos {
		names = append(names, i.Name)
	}
	if len(names) != 1 || !strings.HasPrefix(names[0], payload.KindResults+"/big/") {
		t.Errorf("objects %v, want only the result's body", names)
	}
}

// TestSubmitTellsChangedFromDone: an item whose job id ended is already
// done when its input is the last run's, changed (not published, its id
// named) when it is another, published as the next run with RerunChanged,
// and already done again once that run ended (as is the first input: it
// ran too). Runs recorded without a digest, and items without one, are
// never taken for changed.
func TestSubmitTellsChangedFromDone(t *testing.T) {
	t.Parallel()
	c := newConn(t)
	ctx := t.Context()
	jobA := job.Job{ID: "doc.pdf", Schema: "invoice", Input: "total 12 EUR"}
	jobB := jobA
	jobB.Input = "total 13 EUR"
	if ledger.InputDigest(jobA) == ledger.InputDigest(jobB) || ledger.InputDigest(jobA) != ledger.InputDigest(job.Job{ID: "other", Schema: "invoice", Input: "total 12 EUR"}) {
		t.Fatal("InputDigest must differ with the input and not with the id")
	}
	if ledger.InputDigest(job.Job{Schema: "ab", Input: "c"}) == ledger.InputDigest(job.Job{Schema: "a", Input: "bc"}) {
		t.Fatal("InputDigest must keep the fields apart")
	}
	for _, id := range []string{"doc.pdf", "old-run"} {
		in := ledger.InputDigest(jobA)
		if id == "old-run" {
			in = "" // recorded before the ledger kept digests
		}
		if _, err := ledger.New(c).Record(ctx, id, ledger.Run{Run: 0, MsgID: id, Stream: broker.StreamResults, Seq: 1, At: time.Now(), Input: in}); err != nil {
			t.Fatal(err)
		}
	}
	item := func(id string, j job.Job, rerunChanged bool) queue.SubmitItem {
		return queue.SubmitItem{Data: []byte(`{"id":"` + id + `","schema":"invoice","input":"` + j.Input + `"}`), Schema: "invoice",
			MsgID: id, JobID: id, Input: ledger.InputDigest(j), RerunChanged: rerunChanged}
	}
	noDigest := item("doc.pdf", jobB, false)
	noDigest.Input = ""
	s, err := queue.Submit(ctx, c, []queue.SubmitItem{item("doc.pdf", jobA, false), item("doc.pdf", jobB, false), item("old-run", jobB, false), noDigest}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.AlreadyDone != 3 || s.Changed != 1 || len(s.ChangedIDs) != 1 || s.ChangedIDs[0] != "doc.pdf" || s.Published != 0 {
		t.Fatalf("same, changed, no digest recorded, none given: %+v; want 3 already done, doc.pdf changed, none published", s)
	}

	s, err = queue.Submit(ctx, c, []queue.SubmitItem{item("doc.pdf", jobB, true)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Reruns != 1 || s.Published != 1 || s.Changed != 0 {
		t.Fatalf("RerunChanged of a changed job: %+v, want it published as a rerun", s)
	}
	// The rerun (doc.pdf~r1) ends with the new input.
	if _, err := ledger.New(c).Record(ctx, "doc.pdf", ledger.Run{Run: 1, MsgID: ledger.RunMsgID("doc.pdf", 1), Stream: broker.StreamResults, Seq: 2, At: time.Now(), Input: ledger.InputDigest(jobB)}); err != nil {
		t.Fatal(err)
	}
	s, err = queue.Submit(ctx, c, []queue.SubmitItem{item("doc.pdf", jobB, true), item("doc.pdf", jobA, false)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.AlreadyDone != 2 || s.Changed != 0 || s.Published != 0 {
		t.Fatalf("after the rerun ended: %+v; want the input of either run already done", s)
	}
}
