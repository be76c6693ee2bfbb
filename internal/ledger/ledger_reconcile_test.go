package ledger_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/ledger"
	"github.com/llmpipeline/pipeline/internal/queue"
	"github.com/llmpipeline/pipeline/internal/queuetest"
	"github.com/llmpipeline/pipeline/internal/sink"
)

// oldOutcome is an outcome message as every release writes it (the job id
// and run in the body, Nats-Msg-Id the run's id), for a data dir made to
// look like one a release before the ledger left.
func oldOutcome(t *testing.T, c *broker.Conn, stream string, it queue.SubmitItem, run int) {
	t.Helper()
	subject := broker.SubjectResults + "." + it.Schema
	status := "succeeded"
	if stream == broker.StreamDLQ {
		subject, status = broker.SubjectDLQ+"."+it.Schema, "dead_lettered"
	}
	body := fmt.Appendf(nil, `{"job_id":%q,"schema":%q,"run":%d,"status":%q,"attempts":1,"job":%s}`, it.JobID, it.Schema, run, status, it.Data)
	ack, err := c.JetStream().PublishMsg(t.Context(), broker.NewMsg(subject, ledger.RunMsgID(it.JobID, run), body))
	if err != nil || ack.Stream != stream {
		t.Fatalf("publishing the old outcome of %s run %d: ack %+v, %v", it.JobID, run, ack, err)
	}
}

// pastWindow waits out a duplicate window of 100ms (the server forgets
// ids on a timer of the window's period, so an id lives up to twice it),
// so that the streams' deduplication cannot hide a second publish.
func pastWindow(t *testing.T) {
	t.Helper()
	<-time.After(300 * time.Millisecond) // the window's length is what is waited for, not an event
}

func ledgerItems(prefix string, n int) []queue.SubmitItem {
	items := queuetest.JobItems(prefix, "invoice", n)
	for i := range items {
		items[i].JobID = items[i].MsgID
	}
	return items
}

// TestReconcileLedgerAfterUpgrade: a data dir of a release that wrote no
// ledger entries (the outcomes are on the streams, the ledger is empty)
// and one of the first ledger format (one key per job): at start the
// ledger is rebuilt from them, saying how many, and re-submitting the
// original jobs publishes none; a second start reads nothing again.
func TestReconcileLedgerAfterUpgrade(t *testing.T) {
	t.Parallel()
	c := newConn(t, func(cfg *broker.Config) { cfg.DuplicateWindow = 100 * time.Millisecond })
	ctx := t.Context()
	items := ledgerItems("up", 40)
	// A job id that looks like a rerun's message id, ended as run 0.
	odd := queuetest.JobItem("odd~r2", "invoice")
	odd.JobID = odd.MsgID
	items = append(items, odd)
	for i, it := range items {
		stream := broker.StreamResults
		if i%3 == 0 {
			stream = broker.StreamDLQ
		}
		oldOutcome(t, c, stream, it, 0)
	}
	// up-0001 was replayed once: run 1 ended too.
	oldOutcome(t, c, broker.StreamResults, items[1], 1)
	// The first ledger's format: one key per job, its runs in the value.
	prev := queuetest.JobItem("prev-1", "invoice")
	prev.JobID = prev.MsgID
	entry, _ := jsonv2.Marshal(ledger.Entry{JobID: prev.JobID, Runs: []ledger.Run{{Run: 0, MsgID: prev.MsgID, Stream: broker.StreamResults, Seq: 999, At: time.Now().UTC()}}})
	if _, err := c.LedgerBucket().Put(ctx, ledger.Key(prev.JobID), entry); err != nil {
		t.Fatal(err)
	}
	pastWindow(t)

	r, err := ledger.New(c).Reconcile(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Rebuild || r.FromStreams != len(items)+1 || r.Migrated != 1 || r.Scanned != len(items)+1 {
		t.Errorf("reconciliation %+v, want a rebuild of %d runs from the streams and 1 of the previous format", r, len(items)+1)
	}
	if e, _, _ := ledger.New(c).Get(ctx, odd.JobID); len(e.Runs) != 1 || e.Runs[0].Run != 0 {
		t.Errorf("job %q: ledger %+v, want its run 0 (read from the outcome, not guessed from the message id)", odd.JobID, e)
	}
	if e, _, _ := ledger.New(c).Get(ctx, items[1].JobID); len(e.Runs) != 2 || e.Runs[0].Input == "" {
		t.Errorf("job %s: ledger %+v, want runs 0 and 1 with the input digest", items[1].JobID, e)
	}

	resubmit := append(append([]queue.SubmitItem{}, items...), prev)
	st := queuetest.Submit(t, c, resubmit)
	if st.Published != 0 || st.AlreadyDone != len(resubmit) {
		t.Errorf("re-submit after the upgrade: %+v, want all %d already done, none published", st, len(resubmit))
	}

	again, err := ledger.New(c).Reconcile(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	if again.Rebuild || again.Written() != 0 || again.Scanned != 0 {
		t.Errorf("second start: %+v, want nothing read or written (the marker is past every outcome)", again)
	}
}

// TestReconcileLedgerDeletedBucket: jobs ended by workers, then the ledger
// bucket deleted (a new one is created at the next connect) and the
// streams' outcomes of some jobs gone (limits), their runs only in the
// index: the rebuild restores every run, and a re-submit publishes none
// and the workers call nobody.
func TestReconcileLedgerDeletedBucket(t *testing.T) {
	t.Parallel()
	c := newConn(t, func(cfg *broker.Config) { cfg.DuplicateWindow = 100 * time.Millisecond })
	ctx := t.Context()
	items := ledgerItems("del", 30)
	queuetest.Submit(t, c, items)
	var calls queuetest.Counter
	h := queue.HandlerFunc(func(ctx context.Context, d *queue.Delivery) queue.Outcome {
		calls.Add(d.MsgID)
		return queue.Outcome{Action: queue.ActionResult, Schema: d.Job.Schema, Payload: queuetest.ResultFor(d)}
	})
	if _, err := ledger.New(c).Reconcile(ctx, nil); err != nil { // a start
		t.Fatal(err)
	}
	if err := queue.RunWorkers(ctx, c, queuetest.FastWorkers(queue.WorkerConfig{Concurrency: 4, UntilIdle: true}), h); err != nil {
		t.Fatal(err)
	}
	if err := ledger.New(c).AdvanceMarks(ctx); err != nil { // the end of the run
		t.Fatal(err)
	}
	if r, err := ledger.New(c).Reconcile(ctx, nil); err != nil || r.Rebuild || r.Scanned != 0 {
		t.Fatalf("the next start: %+v, %v; want nothing read (the run moved the markers past its outcomes)", r, err)
	}
	// Jobs the index knows of and the streams no longer hold.
	gone := ledgerItems("gone", 5)
	index := func(ctx context.Context, yield func(ledger.IndexedRun) bool) error {
		for _, it := range append(items[:3:3], gone...) { // some the streams hold too
			if !yield(ledger.IndexedRun{JobID: it.JobID, Dead: true, At: time.Now()}) {
				return nil
			}
		}
		return nil
	}

	if err := c.JetStream().DeleteKeyValue(ctx, broker.BucketLedger); err != nil {
		t.Fatal(err)
	}
	if err := broker.EnsureBuckets(ctx, c); err != nil { // what the next start does
		t.Fatal(err)
	}
	pastWindow(t)
	r, err := ledger.New(c).Reconcile(ctx, index)
	if err != nil {
		t.Fatal(err)
	}
	if !r.Rebuild || r.FromStreams != len(items) || r.FromIndex != len(gone) {
		t.Errorf("reconciliation %+v, want a rebuild of %d runs from the streams and %d from the index", r, len(items), len(gone))
	}
	st := queuetest.Submit(t, c, append(append([]queue.SubmitItem{}, items...), gone...))
	if st.Published != 0 || st.AlreadyDone != len(items)+len(gone) {
		t.Errorf("re-submit after the ledger was deleted: %+v, want none published", st)
	}
	if err := queue.RunWorkers(ctx, c, queuetest.FastWorkers(queue.WorkerConfig{Concurrency: 4, UntilIdle: true}), h); err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		if n := calls.Get(it.MsgID); n != 1 {
			t.Errorf("%s handled %d times, want 1", it.MsgID, n)
		}
	}
	if got := len(queuetest.ReadAll(t, c, broker.StreamResults, "")); got != len(items) {
		t.Errorf("%d results, want %d: a job was answered twice", got, len(items))
	}
}

// TestRepeatedOutcomeIsCounted: a job whose run's outcome is on the stream
// already (inside the duplicate window) but missing from the ledger is
// answered again; the stored outcome stays, and the answer that was not
// kept reaches queue.WorkerConfig.Repeated (a run counts its model calls), not
// Stored.
func TestRepeatedOutcomeIsCounted(t *testing.T) {
	t.Parallel()
	c := newConn(t)
	items := ledgerItems("rep", 3)
	for _, it := range items {
		oldOutcome(t, c, broker.StreamResults, it, 0)
	}
	queuetest.Submit(t, c, items)
	var stored, repeated queuetest.Counter
	h := queue.HandlerFunc(func(ctx context.Context, d *queue.Delivery) queue.Outcome {
		return queue.Outcome{Action: queue.ActionResult, Schema: d.Job.Schema, Payload: queuetest.ResultFor(d), Record: d.MsgID}
	})
	cfg := queuetest.FastWorkers(queue.WorkerConfig{Concurrency: 2, UntilIdle: true,
		Stored: func(m sink.Msg) { stored.Add(m.MsgID) },
		Repeated: func(m sink.Msg) {
			if m.Record != m.MsgID {
				t.Errorf("repeated outcome of %s carries record %v", m.MsgID, m.Record)
			}
			repeated.Add(m.MsgID)
		}})
	if err := queue.RunWorkers(t.Context(), c, cfg, h); err != nil {
		t.Fatal(err)
	}
	for _, it := range items {
		if s, r := stored.Get(it.MsgID), repeated.Get(it.MsgID); s != 0 || r != 1 {
			t.Errorf("%s: Stored %d times, Repeated %d; want 0 and 1", it.MsgID, s, r)
		}
	}
	if got := len(queuetest.ReadAll(t, c, broker.StreamResults, "")); got != len(items) {
		t.Errorf("%d results, want %d (the first ones kept)", got, len(items))
	}
}
