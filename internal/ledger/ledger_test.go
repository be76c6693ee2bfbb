package ledger

import (
	"bytes"
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"
)

func TestLedgerKeyIsInjectiveAndValid(t *testing.T) {
	t.Parallel()
	ids := []string{"inv-0001", "a:b", "a=3Ab", "a~b", "a@b", "a+b", "a=b", "A_b", "x=40", "x@", "=", "==", "=3D"}
	seen := map[string]string{}
	for _, id := range ids {
		k := LedgerKey(id)
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
	if LedgerKey("inv-0001") != "inv-0001" {
		t.Errorf("plain ids should stay readable, got %q", LedgerKey("inv-0001"))
	}
}

func TestRunOfAndRunMsgID(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		msgID, jobID string
		run          int
	}{{"a", "a", 0}, {"a~r3", "a", 3}, {"a~r", "a", 0}, {"a~rx", "a", 0}, {"b~r2", "a", 0}, {"a~r12", "a", 12}} {
		if got := RunOf(tc.msgID, tc.jobID); got != tc.run {
			t.Errorf("RunOf(%q, %q) = %d, want %d", tc.msgID, tc.jobID, got, tc.run)
		}
	}
	if RunMsgID("a", 0) != "a" || RunMsgID("a", 2) != "a~r2" || RunOf(RunMsgID("x:y", 7), "x:y") != 7 {
		t.Error("RunMsgID does not round-trip through RunOf")
	}
}

// TestRecordRunFirstWriterWins: concurrent writers of one run agree on the
// first one's record; other runs add to the entry.
func TestRecordRunFirstWriterWins(t *testing.T) {
	t.Parallel()
	c := newConn(t)
	ctx := t.Context()
	var wg sync.WaitGroup
	got := make([]LedgerRun, 8)
	for i := range got {
		wg.Go(func() {
			r, err := c.recordRun(ctx, "job:1", LedgerRun{Run: 0, MsgID: "job:1", Stream: StreamResults, Seq: uint64(i + 1)})
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
	if _, err := c.recordRun(ctx, "job:1", LedgerRun{Run: 1, MsgID: "job:1~r1", Stream: StreamDLQ, Seq: 9}); err != nil {
		t.Fatal(err)
	}
	e, found, err := c.Ledger(ctx, "job:1")
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
	c := newConn(t, func(cfg *Config) { cfg.DuplicateWindow = 200 * time.Millisecond })
	items := jobItems("l", "invoice", 20)
	for i := range items {
		items[i].JobID = items[i].MsgID
	}
	submit(t, c, items)
	submitted := time.Now()
	var calls counter
	h := HandlerFunc(func(ctx context.Context, d *Delivery) Outcome {
		calls.add(d.MsgID)
		return Outcome{Action: ActionResult, Schema: d.Job.Schema, Payload: resultFor(d)}
	})
	if err := c.RunWorkers(t.Context(), fastWorkers(WorkerConfig{Concurrency: 4, UntilIdle: true}), h); err != nil {
		t.Fatal(err)
	}
	e, found, err := c.Ledger(t.Context(), items[0].JobID)
	if r, ok := e.Ended(0); err != nil || !found || !ok || r.Stream != StreamResults || r.Seq == 0 {
		t.Fatalf("ledger entry %+v found %v err %v", e, found, err)
	}

	// Past the window, three raw copies of every job (as producers that
	// skip submit would publish them). The server forgets ids on a timer of
	// the window's period, so an id lives up to twice the window.
	deadline := submitted.Add(time.Second)
	eventually(t, 5*time.Second, "the duplicate window to pass", func() bool { return time.Now().After(deadline) })
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
			ack, err := c.JetStream().PublishMsg(t.Context(), newMsg(SubjectJobs+"."+it.Schema, msgID, it.Data))
			if err != nil {
				t.Fatal(err)
			}
			if ack.Duplicate {
				t.Fatal("copy deduplicated: the window has not passed")
			}
		}
	}
	var done counter
	cfg := fastWorkers(WorkerConfig{Concurrency: 8, UntilIdle: true, AlreadyDone: func(id string) { done.add(id) }})
	if err := c.RunWorkers(t.Context(), cfg, h); err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		if n := calls.get(it.MsgID); n != 1 {
			t.Errorf("%s handled %d times, want 1", it.MsgID, n)
		}
		if n := done.get(it.MsgID); n != 3 {
			t.Errorf("%s acked as already done %d times, want 3", it.MsgID, n)
		}
		if n, m := done.get("copy-"+it.MsgID), calls.get("copy-"+it.MsgID); n != 1 || m != 0 {
			t.Errorf("the copy of %s under another message id: acked as already done %d times, handled %d; want 1, 0", it.MsgID, n, m)
		}
	}
	if got := len(readAll(t, c, StreamResults, "")); got != len(items) {
		t.Errorf("%d results, want %d", got, len(items))
	}

	// Submit consults the ledger: already done, or a new run with Rerun.
	st := submit(t, c, items)
	if st.AlreadyDone != len(items) || st.Published != 0 {
		t.Errorf("resubmit: %+v", st)
	}
	rerun := []SubmitItem{items[0]}
	rerun[0].Rerun = true
	if st := submit(t, c, rerun); st.Reruns != 1 || st.Published != 1 {
		t.Errorf("rerun: %+v", st)
	}
	if err := c.RunWorkers(t.Context(), fastWorkers(WorkerConfig{Concurrency: 2, UntilIdle: true}), h); err != nil {
		t.Fatal(err)
	}
	if n := calls.get(RunMsgID(items[0].JobID, 1)); n != 1 {
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
	if _, err := c.Submit(t.Context(), []SubmitItem{{Data: big, Schema: "invoice", MsgID: "big", JobID: "big"}}, nil); err != nil {
		t.Fatal(err)
	}
	answer := bytes.Repeat([]byte("z"), 3<<20)
	h := HandlerFunc(func(ctx context.Context, d *Delivery) Outcome {
		if d.JobErr != nil || !bytes.Equal(d.Data, big) || d.Size != int64(len(big)) {
			t.Errorf("job read back as %d bytes (err %v), want %d", len(d.Data), d.JobErr, len(big))
		}
		return Outcome{Action: ActionResult, Schema: "invoice", Payload: answer}
	})
	if err := c.RunWorkers(t.Context(), fastWorkers(WorkerConfig{Concurrency: 1, UntilIdle: true}), h); err != nil {
		t.Fatal(err)
	}
	res := readAll(t, c, StreamResults, "")
	if len(res) != 1 || !bytes.Equal(res[0].Data, answer) {
		t.Fatalf("results: %d messages, first %d bytes", len(res), len(res[0].Data))
	}
	obs, err := c.JetStream().ObjectStore(t.Context(), BucketPayloads)
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
	if len(names) != 1 || !strings.HasPrefix(names[0], payloadResults+"/big/") {
		t.Errorf("objects %v, want only the result's body", names)
	}
}

// TestGatheredLedgerReads: reads gathered from many callers, and one read
// of more keys than one request holds, answer each key as the bucket
// does: recorded runs ended, deleted and purged ones and unknown ones not,
// a job id with characters the key escapes found under its own key.
func TestGatheredLedgerReads(t *testing.T) {
	t.Parallel()
	c := newConn(t)
	ctx := t.Context()
	const n = 3*ledgerBatch + 17
	id := func(i int) string { return fmt.Sprintf("job:%04d", i) }
	want := make([]bool, n)
	for i := 0; i < n; i += 3 {
		if _, err := c.recordRun(ctx, id(i), LedgerRun{Run: i % 2, MsgID: id(i), Stream: StreamResults, Seq: uint64(i + 1)}); err != nil {
			t.Fatal(err)
		}
		want[i] = true
	}
	for i := 0; i < n; i += 9 { // every third recorded run goes again
		key := ledgerRunKey(id(i), i%2)
		var err error
		if i%2 == 0 {
			err = c.buckets.ledger.Delete(ctx, key)
		} else {
			err = c.buckets.ledger.Purge(ctx, key)
		}
		if err != nil {
			t.Fatal(err)
		}
		want[i] = false
	}
	keys := make([]runKey, n)
	for i := range keys {
		keys[i] = runKey{id(i), i % 2}
	}
	got, err := c.endedRuns(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	for i := range keys {
		if got[i] != want[i] {
			t.Errorf("endedRuns: %s run %d ended = %v, want %v", keys[i].jobID, keys[i].run, got[i], want[i])
		}
	}
	// The other run of each job never ended.
	if other, err := c.ledgerReads.ended(ctx, id(0), 1); err != nil || other {
		t.Errorf("run 1 of %s: ended %v, err %v; want false, nil", id(0), other, err)
	}

	var wg sync.WaitGroup
	gathered := make([]bool, n)
	errs := make([]error, n)
	for i := range keys {
		wg.Go(func() { gathered[i], errs[i] = c.ledgerReads.ended(ctx, keys[i].jobID, keys[i].run) })
	}
	wg.Wait()
	for i := range keys {
		if errs[i] != nil || gathered[i] != want[i] {
			t.Errorf("gathered read: %s run %d ended = %v (err %v), want %v", keys[i].jobID, keys[i].run, gathered[i], errs[i], want[i])
		}
	}
	// A deleted run recorded again reads as ended.
	if _, err := c.recordRun(ctx, id(0), LedgerRun{Run: 0, MsgID: id(0), Stream: StreamDLQ, Seq: 99}); err != nil {
		t.Fatal(err)
	}
	if again, err := c.ledgerReads.ended(ctx, id(0), 0); err != nil || !again {
		t.Errorf("run 0 of %s recorded after its delete: ended %v, err %v; want true, nil", id(0), again, err)
	}
}

// TestRunOfMsgIDGuessesTheLedgerKey: the key a fetched job's ledger read
// starts under, from its message id alone, is the one prepare checks for
// the usual ids; for the others prepare reads again under the job's own.
func TestRunOfMsgIDGuessesTheLedgerKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		msgID string
		want  runKey
	}{
		{"inv-1", runKey{"inv-1", 0}},
		{"inv-1~r3", runKey{"inv-1", 3}},
		{"a~rb~r12", runKey{"a~rb", 12}},
		{"a~r", runKey{"a~r", 0}},
		{"a~rx", runKey{"a~rx", 0}},
		{"~r2", runKey{"~r2", 0}},
	} {
		if got := runOfMsgID(tc.msgID); got != tc.want {
			t.Errorf("runOfMsgID(%q) = %+v, want %+v", tc.msgID, got, tc.want)
		}
		if tc.want.run > 0 && RunMsgID(tc.want.jobID, tc.want.run) != tc.msgID {
			t.Errorf("runOfMsgID(%q) does not invert RunMsgID", tc.msgID)
		}
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
	jobA := Job{ID: "doc.pdf", Schema: "invoice", Input: "total 12 EUR"}
	jobB := jobA
	jobB.Input = "total 13 EUR"
	if InputDigest(jobA) == InputDigest(jobB) || InputDigest(jobA) != InputDigest(Job{ID: "other", Schema: "invoice", Input: "total 12 EUR"}) {
		t.Fatal("InputDigest must differ with the input and not with the id")
	}
	if InputDigest(Job{Schema: "ab", Input: "c"}) == InputDigest(Job{Schema: "a", Input: "bc"}) {
		t.Fatal("InputDigest must keep the fields apart")
	}
	for _, id := range []string{"doc.pdf", "old-run"} {
		in := InputDigest(jobA)
		if id == "old-run" {
			in = "" // recorded before the ledger kept digests
		}
		if _, err := c.recordRun(ctx, id, LedgerRun{Run: 0, MsgID: id, Stream: StreamResults, Seq: 1, At: time.Now(), Input: in}); err != nil {
			t.Fatal(err)
		}
	}
	item := func(id string, j Job, rerunChanged bool) SubmitItem {
		return SubmitItem{Data: []byte(`{"id":"` + id + `","schema":"invoice","input":"` + j.Input + `"}`), Schema: "invoice",
			MsgID: id, JobID: id, Input: InputDigest(j), RerunChanged: rerunChanged}
	}
	noDigest := item("doc.pdf", jobB, false)
	noDigest.Input = ""
	s, err := c.Submit(ctx, []SubmitItem{item("doc.pdf", jobA, false), item("doc.pdf", jobB, false), item("old-run", jobB, false), noDigest}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.AlreadyDone != 3 || s.Changed != 1 || len(s.ChangedIDs) != 1 || s.ChangedIDs[0] != "doc.pdf" || s.Published != 0 {
		t.Fatalf("same, changed, no digest recorded, none given: %+v; want 3 already done, doc.pdf changed, none published", s)
	}

	s, err = c.Submit(ctx, []SubmitItem{item("doc.pdf", jobB, true)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Reruns != 1 || s.Published != 1 || s.Changed != 0 {
		t.Fatalf("RerunChanged of a changed job: %+v, want it published as a rerun", s)
	}
	// The rerun (doc.pdf~r1) ends with the new input.
	if _, err := c.recordRun(ctx, "doc.pdf", LedgerRun{Run: 1, MsgID: RunMsgID("doc.pdf", 1), Stream: StreamResults, Seq: 2, At: time.Now(), Input: InputDigest(jobB)}); err != nil {
		t.Fatal(err)
	}
	s, err = c.Submit(ctx, []SubmitItem{item("doc.pdf", jobB, true), item("doc.pdf", jobA, false)}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.AlreadyDone != 2 || s.Changed != 0 || s.Published != 0 {
		t.Fatalf("after the rerun ended: %+v; want the input of either run already done", s)
	}
}
