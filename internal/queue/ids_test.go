package queue

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/ledger"
	"github.com/llmpipeline/pipeline/job"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// TestIDsThroughTheStreams: job ids and schema ids as users name them go
// through submit, the workers, the outcome streams and the ledger as they
// are given, on subjects of their own; what a release before encoded ids
// wrote (a job on pipeline.jobs.invoice, a ledger key "old=3Adone.0",
// spelled out here) is read as it was.
func TestIDsThroughTheStreams(t *testing.T) {
	t.Parallel()
	c := newConn(t)
	ctx := t.Context()

	// What the previous release left: a queued job and an ended run.
	old := nats.NewMsg("pipeline.jobs.invoice")
	old.Header.Set(jetstream.MsgIDHeader, "user@example.com")
	old.Data = []byte(`{"id":"user@example.com","schema":"invoice","input":"old"}`)
	if _, err := c.JetStream().PublishMsg(ctx, old); err != nil {
		t.Fatal(err)
	}
	if _, err := c.LedgerBucket().Create(ctx, "old=3Adone.0",
		[]byte(`{"job_id":"old:done","run":0,"msg_id":"old:done","stream":"RESULTS","seq":1,"at":"2026-01-01T00:00:00Z"}`)); err != nil {
		t.Fatal(err)
	}

	long := strings.Repeat("é", job.MaxJobIDBytes/2)
	jobs := []struct{ id, schema string }{
		{"inv.2024/03 #7", "My Invoice"},
		{"ana@example.com", "ticket.v2"},
		{"https://x.example/a?b=c", "ticket.v2"},
		{".", "foo-1.0.0"},
		{"..", "請求書"},
		{"ünïcode", "a%2Eb"},
		{long, "My Invoice"},
		{"scans/big file.pdf", "My Invoice"}, // over the inline limit: its body goes to the object store
	}
	var items []SubmitItem
	for _, j := range jobs {
		it := jobItem(j.id, j.schema)
		if j.id == "scans/big file.pdf" {
			it.Data = fmt.Appendf(nil, `{"id":%q,"schema":%q,"input":%q}`, j.id, j.schema, strings.Repeat("x", c.Payloads().InlineLimit()+1))
		}
		it.JobID = j.id
		items = append(items, it)
	}
	done := jobItem("old:done", "invoice")
	done.JobID = "old:done"
	st := submit(t, c, append(slices.Clone(items), done))
	if st.Published != len(jobs) || st.AlreadyDone != 1 {
		t.Fatalf("submit: %+v, want %d published and old:done already done (its ledger key as the old release wrote it)", st, len(jobs))
	}

	h := HandlerFunc(func(ctx context.Context, d *Delivery) Outcome {
		if d.JobErr != nil {
			t.Errorf("job %q: %v", d.MsgID, d.JobErr)
			return Outcome{Action: ActionDeadLetter, Payload: resultFor(d)}
		}
		if d.SchemaToken != d.Job.Schema || d.MsgID != d.Job.ID {
			t.Errorf("delivery of job %q (schema %q): schema from the subject %q, msg id %q", d.Job.ID, d.Job.Schema, d.SchemaToken, d.MsgID)
		}
		if d.Job.ID == "scans/big file.pdf" && d.Size <= int64(c.Payloads().InlineLimit()) {
			t.Errorf("job %q of %d bytes: not read from the object store", d.Job.ID, d.Size)
		}
		if d.Job.ID == "ana@example.com" {
			return Outcome{Action: ActionDeadLetter, Schema: d.Job.Schema, Payload: resultFor(d), Reason: "schema"}
		}
		return Outcome{Action: ActionResult, Schema: d.Job.Schema, Payload: resultFor(d)}
	})
	if err := RunWorkers(ctx, c, fastWorkers(WorkerConfig{Concurrency: 4, UntilIdle: true}), h); err != nil {
		t.Fatalf("RunWorkers: %v", err)
	}

	for _, tc := range []struct {
		stream, subject string
		ids             []string
	}{
		{broker.StreamResults, "pipeline.results.invoice", []string{"user@example.com"}},
		{broker.StreamResults, "pipeline.results.My%20Invoice", []string{"inv.2024/03 #7", long, "scans/big file.pdf"}},
		{broker.StreamResults, "pipeline.results.ticket%2Ev2", []string{"https://x.example/a?b=c"}},
		{broker.StreamDLQ, "pipeline.dlq.ticket%2Ev2", []string{"ana@example.com"}},
		{broker.StreamResults, "pipeline.results.foo-1%2E0%2E0", []string{"."}},
		{broker.StreamResults, "pipeline.results.%E8%AB%8B%E6%B1%82%E6%9B%B8", []string{".."}},
		{broker.StreamResults, "pipeline.results.a%252Eb", []string{"ünïcode"}},
	} {
		got := readAll(t, c, tc.stream, tc.subject)
		want := slices.Clone(tc.ids)
		slices.Sort(want)
		if !slices.Equal(msgIDs(got), want) {
			t.Errorf("%s on %s: msg ids %q, want %q", tc.stream, tc.subject, msgIDs(got), want)
		}
	}
	if all := readAll(t, c, broker.StreamResults, ""); len(all) != len(jobs) {
		t.Errorf("%d results, want %d", len(all), len(jobs))
	}

	for _, j := range jobs {
		e, found, err := ledger.New(c).Get(ctx, j.id)
		if err != nil || !found || len(e.Runs) != 1 || e.Runs[0].MsgID != j.id {
			t.Errorf("ledger of %q: %+v found %v err %v, want its one run", j.id, e, found, err)
		}
	}
	again := submit(t, c, items)
	if again.AlreadyDone != len(jobs) || again.Published != 0 {
		t.Errorf("resubmit: %+v, want all %d already done", again, len(jobs))
	}
}

// TestSubmitRefusesBadSchemaIDs: Submit checks the schema id it is given
// (a control character cannot be a schema id), naming the item.
func TestSubmitRefusesBadSchemaIDs(t *testing.T) {
	t.Parallel()
	c := newConn(t)
	for _, schema := range []string{"", "a\tb", strings.Repeat("s", job.MaxSchemaIDBytes+1)} {
		_, err := Submit(t.Context(), c, []SubmitItem{jobItem("j", schema)}, nil)
		if err == nil || !strings.Contains(err.Error(), fmt.Sprintf("schema %q", schema)) {
			t.Errorf("Submit with schema %q: %v", schema, err)
		}
	}
}

// TestLedgerReadsLongIDs: the ledger's gathered reads (256 keys a request)
// hold keys of 512-byte ids whose every byte is escaped (1536 characters):
// submit finds the ended runs of 300 such jobs.
func TestLedgerReadsLongIDs(t *testing.T) {
	t.Parallel()
	c := newConn(t)
	ctx := t.Context()
	var items []SubmitItem
	for i := range 300 {
		id := fmt.Sprintf("%04d", i) + strings.Repeat("ü", (job.MaxJobIDBytes-4)/2) // 512 bytes
		it := jobItem(id, "My Invoice")
		it.JobID = id
		items = append(items, it)
		if i%2 == 0 {
			if _, err := ledger.New(c).Record(ctx, id, ledger.Run{MsgID: id, Stream: broker.StreamResults, Seq: uint64(i + 1)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	if n := len(ledger.Key(items[0].JobID)); n < 1500 {
		t.Fatalf("key of %d characters, want the longest kind", n)
	}
	st := submit(t, c, items)
	if st.AlreadyDone != 150 || st.Published != 150 {
		t.Errorf("submit: %+v, want 150 already done and 150 published", st)
	}
}
