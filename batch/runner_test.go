package batch_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmpipeline/pipeline/batch"
	"github.com/llmpipeline/pipeline/heal"
	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/ledger"
	"github.com/llmpipeline/pipeline/internal/poll"
	"github.com/llmpipeline/pipeline/internal/queue"
	"github.com/llmpipeline/pipeline/job"
	"github.com/llmpipeline/pipeline/llm"
	"github.com/llmpipeline/pipeline/llm/batchtest"
	"github.com/llmpipeline/pipeline/model"
	"github.com/llmpipeline/pipeline/schemas"
	"github.com/llmpipeline/pipeline/worker"
)

// answer is the chat endpoint behind both the batches and the synchronous
// calls. The job's input names its fate: "ok" a valid answer, "heal" a
// wrong type first and a valid answer on the heal turn, "trunc" an answer
// cut at max tokens, "fail" a 500.
func answer(calls *atomic.Int64) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		body, _ := io.ReadAll(r.Body)
		var req struct {
			Messages []model.Message `json:"messages"`
		}
		_ = json.Unmarshal(body, &req)
		all := ""
		for _, m := range req.Messages {
			all += m.Content + "\n"
		}
		healTurn := strings.Count(all, "FATE:") > 0 && len(req.Messages) > 2
		content, finish := `{"n": 7}`, "stop"
		switch {
		case strings.Contains(all, "FATE:fail"):
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(500)
			_, _ = io.WriteString(w, `{"error":{"message":"The server had an error","type":"server_error","param":null,"code":null}}`)
			return
		case strings.Contains(all, "FATE:heal") && !healTurn:
			content = `{"n": "seven"}`
		case strings.Contains(all, "FATE:trunc"):
			content, finish = `{"n": 7`, "length"
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-4o-mini",
			"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": content, "refusal": nil}, "finish_reason": finish}},
			"usage":   map[string]any{"prompt_tokens": 100, "completion_tokens": 10, "total_tokens": 110},
		})
	})
}

type rig struct {
	t     *testing.T
	conn  *broker.Conn
	srv   *batchtest.Server
	calls atomic.Int64 // answers made (batch and sync)
	reg   *schemas.Registry
	kv    jetstream.KeyValue
	// observe, if set before start, is the runner's Config.Observe; run
	// is the runner start made.
	observe func(batch.Event)
	run     *batch.Runner
	// now, if set before start, is the runner's clock.
	now func() time.Time
	// size and wait, if set before start, are the runner's batch size
	// (default 10) and wait (default 20 ms).
	size int
	wait time.Duration
	// logs, if set before start, gets the runner's log.
	logs io.Writer
}

func newRig(t *testing.T, hold bool, opts ...func(*batchtest.Config)) *rig {
	t.Helper()
	r := &rig{t: t}
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "thing.json"), []byte(`{"type":"object","properties":{"n":{"type":"integer"}},"required":["n"]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	reg, err := schemas.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	r.reg = reg
	scfg := batchtest.Config{Answer: answer(&r.calls), Hold: hold, Key: "sk-test"}
	for _, o := range opts {
		o(&scfg)
	}
	r.srv = batchtest.New(scfg)
	t.Cleanup(r.srv.Close)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	r.conn, err = broker.Connect(ctx, broker.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = r.conn.Close() })
	r.kv, err = r.conn.BatchBucket(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// start runs the workers and a batch runner until the returned stop is
// called.
func (r *rig) start(heal string) (stop func()) {
	t := r.t
	t.Helper()
	cfg := llm.Config{BaseURL: r.srv.URL + "/v1", APIKey: "sk-test", Model: "gpt-4o-mini", BackoffBase: time.Millisecond, BackoffMax: time.Millisecond}
	b, err := llm.NewOpenAIBatch(cfg)
	if err != nil {
		t.Fatal(err)
	}
	syncModel, err := llm.NewOpenAI(cfg)
	if err != nil {
		t.Fatal(err)
	}
	loop, err := newLoop(&batch.Replay{Sync: syncModel})
	if err != nil {
		t.Fatal(err)
	}
	h, err := worker.New(worker.Config{Schemas: r.reg, Loop: loop, Model: "openai:gpt-4o-mini"})
	if err != nil {
		t.Fatal(err)
	}
	size := r.size
	if size == 0 {
		size = 10
	}
	wait := r.wait
	if wait == 0 {
		wait = 20 * time.Millisecond
	}
	var log *slog.Logger
	if r.logs != nil {
		log = slog.New(slog.NewTextHandler(r.logs, &slog.HandlerOptions{Level: slog.LevelWarn}))
	}
	run, err := batch.New(batch.Config{Batcher: b, Model: "openai:gpt-4o-mini", KV: r.kv, Conn: r.conn, Inner: h,
		Size: size, Wait: wait, Poll: 20 * time.Millisecond, Heal: heal, TransportRetries: 1, Observe: r.observe, Now: r.now, Logger: log})
	if err != nil {
		t.Fatal(err)
	}
	r.run = run
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() { _ = run.Run(ctx) })
	wg.Go(func() {
		_ = queue.RunWorkers(ctx, r.conn, queue.WorkerConfig{Concurrency: 8, AckWait: 5 * time.Second, FetchWait: 50 * time.Millisecond}, run)
	})
	return func() { cancel(); wg.Wait() }
}

func newLoop(m model.Model) (*heal.Loop, error) {
	return heal.New(m, heal.Config{MaxAttempts: 2, Temperature: 0.7, TemperatureStep: 0.2, TemperatureFloor: 0.1})
}

func (r *rig) submit(ids ...string) {
	r.t.Helper()
	var items []queue.SubmitItem
	for _, id := range ids {
		fate := id[:strings.Index(id, "-")]
		items = append(items, queue.SubmitItem{Data: fmt.Appendf(nil, `{"id":%q,"schema":"thing","input":"FATE:%s"}`, id, fate), Schema: "thing", MsgID: id, JobID: id})
	}
	if _, err := queue.Submit(r.t.Context(), r.conn, items, nil); err != nil {
		r.t.Fatal(err)
	}
}

// waitEnded waits until every id has an ended run in the ledger.
func (r *rig) waitEnded(ids ...string) {
	r.t.Helper()
	poll.UntilOK(r.t, 30*time.Second, "every job to end", func() error {
		e, err := ledger.New(r.conn).Ended(r.t.Context(), ids)
		if err != nil {
			r.t.Fatal(err)
		}
		if len(e) != len(ids) {
			return fmt.Errorf("not every job ended: %d of %v", len(e), ids)
		}
		return nil
	})
}

// outcomes reads every message of RESULTS and DLQ, by job id.
func (r *rig) outcomes() map[string][]job.Outcome {
	r.t.Helper()
	out := map[string][]job.Outcome{}
	js := r.conn.JetStream()
	for _, name := range []string{broker.StreamResults, broker.StreamDLQ} {
		st, err := js.Stream(r.t.Context(), name)
		if err != nil {
			r.t.Fatal(err)
		}
		info, err := st.Info(r.t.Context())
		if err != nil {
			r.t.Fatal(err)
		}
		for seq := info.State.FirstSeq; seq <= info.State.LastSeq && info.State.Msgs > 0; seq++ {
			m, err := st.GetMsg(r.t.Context(), seq)
			if err != nil {
				continue
			}
			var o job.Outcome
			if err := json.Unmarshal(m.Data, &o); err != nil {
				r.t.Fatalf("outcome %s/%d: %v", name, seq, err)
			}
			out[o.JobID] = append(out[o.JobID], o)
		}
	}
	return out
}

func (r *rig) noCustomIDTwice() {
	r.t.Helper()
	sub := r.srv.Submitted()
	seen := map[string]bool{}
	for _, id := range sub {
		if seen[id] {
			r.t.Errorf("custom_id %s submitted twice", id)
		}
		seen[id] = true
	}
}

func TestBatchRunEndsEveryJobOnce(t *testing.T) {
	t.Parallel()
	r := newRig(t, false)
	ids := []string{"ok-1", "ok-2", "ok-3", "heal-1", "trunc-1", "fail-1"}
	r.submit(ids...)
	stop := r.start(batch.HealBatch)
	defer stop()
	r.waitEnded(ids...)
	stop()
	got := r.outcomes()
	for _, id := range ids {
		if len(got[id]) != 1 {
			t.Fatalf("%s: %d outcomes, want 1", id, len(got[id]))
		}
	}
	for _, id := range []string{"ok-1", "ok-2", "ok-3"} {
		if o := got[id][0]; o.Status != job.StatusSucceeded || o.Attempts != 1 || string(o.Data) != `{"n":7}` {
			t.Errorf("%s: %+v", id, o)
		}
	}
	if o := got["heal-1"][0]; o.Status != job.StatusSucceeded || o.Attempts != 2 || o.Trace[0].Class != "schema" {
		t.Errorf("heal-1: healed in a second batch, got %+v", o)
	}
	if o := got["trunc-1"][0]; o.Status != job.StatusDeadLettered || o.Class != "truncated" {
		t.Errorf("trunc-1: %+v", o)
	}
	if o := got["fail-1"][0]; o.Status != job.StatusDeadLettered || o.Class != "transport" || o.Attempts != 0 {
		t.Errorf("fail-1: a 500 inside the batch is transport, never a heal attempt: %+v", o)
	}
	// The heal turn and the retry of the 500 went into later batches.
	if n := r.srv.Creates(); n < 2 {
		t.Errorf("%d batches, want the heal turn in a second one", n)
	}
	// fail-1: its first request and one retry (TransportRetries 1).
	fails := 0
	for _, id := range r.srv.Submitted() {
		if strings.Contains(id, "-a1-") {
			fails++
		}
	}
	if want := 6 + 1; fails != want {
		t.Errorf("%d first-attempt requests, want %d (six jobs, one retry)", fails, want)
	}
	r.noCustomIDTwice()
	// The ledger keeps what each job asked, so a resubmit can tell an
	// edited job from a done one.
	e, _, err := ledger.New(r.conn).Get(t.Context(), "ok-1")
	if err != nil {
		t.Fatal(err)
	}
	want := ledger.InputDigest(job.Job{ID: "ok-1", Schema: "thing", Input: "FATE:ok"})
	if len(e.Runs) != 1 || e.Runs[0].Input != want {
		t.Errorf("ledger of ok-1: %+v, want one run with input digest %s", e.Runs, want)
	}
}

func TestBatchHealSync(t *testing.T) {
	t.Parallel()
	r := newRig(t, false)
	r.size, r.wait = 2, 2*time.Second // one batch, however slow the machine
	r.submit("heal-1", "ok-1")
	stop := r.start(batch.HealSync)
	defer stop()
	r.waitEnded("heal-1", "ok-1")
	stop()
	got := r.outcomes()
	if o := got["heal-1"]; len(o) != 1 || o[0].Status != job.StatusSucceeded || o[0].Attempts != 2 {
		t.Fatalf("heal-1: %+v", o)
	}
	if n := r.srv.Creates(); n != 1 {
		t.Errorf("%d batches, want 1: the heal turn goes to the synchronous endpoint", n)
	}
	if n := r.calls.Load(); n != 3 {
		t.Errorf("%d answers, want 3 (two in the batch, one synchronous)", n)
	}
}

func TestBatchExpiredRequeues(t *testing.T) {
	t.Parallel()
	r := newRig(t, true)
	r.size, r.wait = 3, 2*time.Second // one first batch of the three, however slow the machine
	ids := []string{"ok-1", "ok-2", "ok-3"}
	r.submit(ids...)
	stop := r.start(batch.HealBatch)
	defer stop()
	first := r.waitBatch(1)
	r.srv.SetHold(false)
	r.srv.Expire(first, 1)
	r.waitEnded(ids...)
	stop()
	got := r.outcomes()
	for _, id := range ids {
		if len(got[id]) != 1 || got[id][0].Status != job.StatusSucceeded {
			t.Errorf("%s: %+v", id, got[id])
		}
	}
	if n := r.srv.Creates(); n < 2 {
		t.Errorf("%d batches, want the unanswered two in later ones", n)
	}
	if n := len(r.srv.Submitted()); n != 5 {
		t.Errorf("%d requests submitted, want 5", n)
	}
	r.noCustomIDTwice()
}

// A runner stopped after its batch was created, and a new one started:
// the new one polls the batch already created, submits nothing again, and
// every job ends once.
func TestBatchResumesAfterRestart(t *testing.T) {
	t.Parallel()
	r := newRig(t, true)
	r.size, r.wait = 3, 2*time.Second // one batch, however slow the machine: only it is released
	ids := []string{"ok-1", "ok-2", "heal-1"}
	r.submit(ids...)
	stop := r.start(batch.HealBatch)
	id := r.waitBatch(1)
	r.waitAcked()
	stop()
	if e, _ := ledger.New(r.conn).Ended(t.Context(), ids); len(e) != 0 {
		t.Fatalf("jobs ended before the batch answered: %v", e)
	}
	r.srv.SetHold(false)
	r.srv.Release(id)
	stop = r.start(batch.HealBatch)
	defer stop()
	r.waitEnded(ids...)
	stop()
	got := r.outcomes()
	for _, id := range ids {
		if len(got[id]) != 1 || got[id][0].Status != job.StatusSucceeded {
			t.Errorf("%s: %+v", id, got[id])
		}
	}
	if n := r.srv.Creates(); n != 2 {
		t.Errorf("%d batches, want 2 (the first, resumed, and the heal turn)", n)
	}
	sub := r.srv.Submitted()
	if n := len(sub); n != 4 {
		t.Errorf("%d requests, want 4: %v", n, sub)
	}
	r.noCustomIDTwice()
	recs, err := batch.Records(t.Context(), r.kv)
	if err != nil || len(recs) != 2 || !slices.ContainsFunc(recs, func(x batch.Record) bool { return x.ProviderID == id && x.State == batch.StateEnded }) {
		t.Errorf("records: %+v %v", recs, err)
	}
}

// waitBatch waits until the provider has created n batches, and returns
// the id of the nth.
func (r *rig) waitBatch(n int) string {
	r.t.Helper()
	var id string
	poll.UntilOK(r.t, 20*time.Second, fmt.Sprintf("batch %d to be created", n), func() error {
		b := r.srv.Batches()
		if len(b) < n {
			return fmt.Errorf("batch %d never created: %d batches", n, len(b))
		}
		id = b[n-1]
		return nil
	})
	return id
}

// waitAcked waits until the work queue holds no job.
func (r *rig) waitAcked() {
	r.t.Helper()
	poll.UntilOK(r.t, 20*time.Second, "every job to be acked", func() error {
		st, err := r.conn.JetStream().Stream(r.t.Context(), broker.StreamJobs)
		if err != nil {
			r.t.Fatal(err)
		}
		info, err := st.Info(r.t.Context())
		if err != nil {
			r.t.Fatal(err)
		}
		if info.State.Msgs != 0 {
			return fmt.Errorf("jobs never acked: %d in the queue", info.State.Msgs)
		}
		return nil
	})
}
