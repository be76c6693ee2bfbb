package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/payload"
	"github.com/llmpipeline/pipeline/internal/queue"
	"github.com/llmpipeline/pipeline/internal/sink"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/tidwall/gjson"

	"github.com/llmpipeline/pipeline/internal/app"
)

// externalServer starts a nats-server in this process with JetStream and
// nats-server's default max payload (1 MiB), and returns its URL.
func externalServer(t *testing.T) string {
	t.Helper()
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: server.RANDOM_PORT, JetStream: true,
		StoreDir: t.TempDir(), NoLog: true, NoSigs: true})
	if err != nil {
		t.Fatal(err)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		t.Fatal("nats-server not ready")
	}
	t.Cleanup(func() { srv.Shutdown(); srv.WaitForShutdown() })
	return srv.ClientURL()
}

// connFor connects the test to the store the commands used: the external
// server, or the data dir's embedded server (the commands have exited).
func connFor(t *testing.T, conn []string) *broker.Conn {
	t.Helper()
	cfg := broker.Config{}
	for i := 0; i+1 < len(conn); i += 2 {
		switch conn[i] {
		case "--nats-url":
			cfg.URL = conn[i+1]
		case "--data-dir":
			cfg.DataDir = conn[i+1]
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	c, err := broker.Connect(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// bigJob is a job whose input is n bytes.
func bigJob(id, schema string, n int) string {
	input := strings.Repeat("Invoice line: 3 bolts at 1.20 EUR. ", n/35+1)[:n]
	b, _ := json.Marshal(map[string]string{"id": id, "schema": schema, "input": input})
	return string(b)
}

// jobObjects lists the job bodies left in the payload object store.
func jobObjects(t *testing.T, c *broker.Conn) []string {
	t.Helper()
	obs, err := c.JetStream().ObjectStore(t.Context(), payload.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	infos, err := obs.List(t.Context())
	if err != nil && err != jetstream.ErrNoObjectsFound {
		t.Fatal(err)
	}
	var out []string
	for _, i := range infos {
		if strings.HasPrefix(i.Name, "jobs/") {
			out = append(out, i.Name)
		}
	}
	return out
}

// TestJobOverMaxPayloadEndsOnce: a 2 MiB job (twice the server's max
// payload) through submit and run with --sim-force grammar ends once, as a
// dead letter of its real class with its whole transcript, on the embedded
// server and on an external one left at the default max payload; nothing
// stays on JOBS or in the object store's job bodies, and the index rebuilt
// from the streams holds the same dead letter.
func TestJobOverMaxPayloadEndsOnce(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name     string
		external bool
	}{{"embedded", false}, {"external default max payload", true}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			conn := []string{"--data-dir", dir}
			if tc.external {
				conn = append(conn, "--nats-url", externalServer(t))
			}
			const size = 2 << 20
			jobs := bigJob("big-1", "invoice", size) + "\n" + `{"id":"small-1","schema":"invoice","input":"Invoice 7 from ACME, total 12 EUR"}` + "\n"
			out := mustCLI(t, jobs, append(append([]string{"submit", "--json"}, conn...), "-")...)
			if !strings.Contains(out, `"published":2`) {
				t.Fatalf("submit: %s", out)
			}
			mustCLI(t, "", append([]string{"run", "--until-idle", "--sim-latency", "0", "--sim-force", "grammar", "--max-attempts", "2"}, conn...)...)

			dead := jsonLines(t, mustCLI(t, "", "dlq", "list", "--json", "--data-dir", dir))
			if len(dead) != 2 {
				t.Fatalf("%d dead letters, want 2 (both jobs fail on grammar): %v", len(dead), dead)
			}
			show := func() map[string]any {
				var o map[string]any
				if err := json.Unmarshal([]byte(mustCLI(t, "", "dlq", "show", "--json", "--data-dir", dir, "big-1")), &o); err != nil {
					t.Fatal(err)
				}
				return o
			}
			o := show()
			if o["class"] != "exhausted" && o["class"] != "grammar" {
				t.Errorf("class %v, want the real class (grammar failures used up the attempts), reason %v", o["class"], o["reason"])
			}
			if trace, _ := o["trace"].([]any); len(trace) != 2 {
				t.Errorf("transcript has %d attempts, want 2", len(trace))
			}
			var job struct{ Input string }
			b, _ := json.Marshal(o["job"])
			if err := json.Unmarshal(b, &job); err != nil || len(job.Input) != size {
				t.Errorf("dead letter holds a job input of %d bytes, want %d (%v)", len(job.Input), size, err)
			}

			c := connFor(t, conn)
			defer c.Close()
			p, err := queue.Pending(t.Context(), c)
			if err != nil {
				t.Fatal(err)
			}
			if p.Jobs != 0 || p.DeadLetters != 2 || p.Results != 0 {
				t.Errorf("streams: %d jobs left, %d dead letters, %d results; want 0, 2, 0", p.Jobs, p.DeadLetters, p.Results)
			}
			if left := jobObjects(t, c); len(left) != 0 {
				t.Errorf("job bodies left in the object store after their jobs ended: %v", left)
			}
			// The big dead letter went through the object store.
			var offloaded int
			if err := sink.ReadStream(t.Context(), c, broker.StreamDLQ, "", func(m sink.Msg) error {
				if len(m.Data) > c.Payloads().InlineLimit() {
					offloaded++
				}
				return nil
			}); err != nil {
				t.Fatal(err)
			}
			if offloaded != 1 {
				t.Errorf("%d dead letters over the inline limit read back whole, want 1", offloaded)
			}
			if tc.external {
				if c.NATS().MaxPayload() != server.MAX_PAYLOAD_SIZE {
					t.Errorf("max payload %d", c.NATS().MaxPayload())
				}
			}
			c.Close()

			// The sink reads the big dead letter back from the stream.
			mustCLI(t, "", append([]string{"dlq", "rebuild"}, conn...)...)
			if again := show(); fmt.Sprint(again["trace"]) != fmt.Sprint(o["trace"]) {
				t.Errorf("rebuilt index has another transcript for big-1")
			}
		})
	}
}

// TestAnswerOverMaxPayloadFailsSchema: a 2 MiB model answer that fails the
// schema ends as a dead letter of its real class with both raw answers in
// its transcript, not as "abandoned" with its attempts lost. The
// request allows an answer that long (--max-tokens), so the answer is read
// whole rather than cut at the body bound.
func TestAnswerOverMaxPayloadFailsSchema(t *testing.T) {
	t.Parallel()
	wantTestKeys(t)
	huge := `{"subject": "` + strings.Repeat("x", 2<<20) + `"}` // misses the required fields
	srv := newOpenAIServer(t, 200, huge)
	dir := t.TempDir()
	mustCLI(t, `{"id":"t-big","schema":"ticket","input":"From: Ana <ana@example.com>: I cannot log in."}`+"\n", "submit", "--data-dir", dir, "-")
	mustCLI(t, "", "run", "--data-dir", dir, "--until-idle", "--model", "openai:m", "--llm-url", srv.URL+"/v1", "--max-attempts", "2", "--max-tokens", "100000")

	var o map[string]any
	if err := json.Unmarshal([]byte(mustCLI(t, "", "dlq", "show", "--json", "--data-dir", dir, "t-big")), &o); err != nil {
		t.Fatal(err)
	}
	if o["class"] != "no_progress" && o["class"] != "exhausted" && o["class"] != "schema" {
		t.Errorf("class %v (reason %v), want the schema failure's class", o["class"], o["reason"])
	}
	trace, _ := o["trace"].([]any)
	if len(trace) != 2 {
		t.Fatalf("transcript has %d attempts, want 2", len(trace))
	}
	for i, a := range trace {
		if raw, _ := a.(map[string]any)["raw"].(string); len(raw) != len(huge) {
			t.Errorf("attempt %d raw answer is %d bytes, want %d", i+1, len(raw), len(huge))
		}
	}
	if srv.calls() != 2 {
		t.Errorf("%d model calls, want 2", srv.calls())
	}
}

// TestSubmitMaxJobBytes: a line over --max-job-bytes is rejected with its
// line number and nothing is published; under the default limit the same
// file (a 2 MiB line among 200 good ones) is published whole.
func TestSubmitMaxJobBytes(t *testing.T) {
	t.Parallel()
	var b strings.Builder
	for i := range 200 {
		if i == 100 {
			b.WriteString(bigJob("big", "invoice", 2<<20) + "\n")
		}
		fmt.Fprintf(&b, `{"id":"j-%03d","schema":"invoice","input":"invoice %d"}`+"\n", i, i)
	}
	file := filepath.Join(t.TempDir(), "jobs.jsonl")
	if err := os.WriteFile(file, []byte(b.String()), 0o600); err != nil {
		t.Fatal(err)
	}

	dir := t.TempDir()
	out, errs, code := runCLI(t, "", "submit", "--json", "--data-dir", dir, "--max-job-bytes", "1MiB", file)
	if code != exitNegative {
		t.Fatalf("exit %d, want %d\n%s", code, exitNegative, errs)
	}
	if want := fmt.Sprintf("%s:101: job is %d bytes, over --max-job-bytes %d", file, len(bigJob("big", "invoice", 2<<20)), 1<<20); !strings.Contains(errs, want) {
		t.Errorf("stderr lacks %q:\n%s", want, errs)
	}
	if !strings.Contains(out, `"published":0`) || !strings.Contains(out, `"rejected":1`) {
		t.Errorf("stdout %s", out)
	}
	c := connFor(t, []string{"--data-dir", dir})
	p, err := queue.Pending(t.Context(), c)
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	if p.Jobs != 0 {
		t.Errorf("%d jobs published although a line was rejected", p.Jobs)
	}

	out = mustCLI(t, "", "submit", "--json", "--data-dir", dir, file)
	if !strings.Contains(out, `"published":201`) {
		t.Errorf("submit with the default limit: %s", out)
	}
}

// TestWorkerDeadLettersJobOverLimit: jobs published straight onto
// pipeline.jobs.invoice over the workers' --max-job-bytes, inline and in
// the object store, are dead-lettered invalid_job naming size and limit,
// without calling the model.
func TestWorkerDeadLettersJobOverLimit(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	c := connFor(t, []string{"--data-dir", dir})
	inline := bigJob("inline-big", "invoice", 600<<10)
	m := nats.NewMsg(broker.SubjectJobs + ".invoice")
	m.Header.Set(jetstream.MsgIDHeader, "inline-big")
	m.Data = []byte(inline)
	if _, err := c.JetStream().PublishMsg(t.Context(), m); err != nil {
		t.Fatal(err)
	}
	offloaded := bigJob("stored-big", "invoice", 3<<20)
	if _, err := queue.Submit(t.Context(), c, []queue.SubmitItem{{Data: []byte(offloaded), Schema: "invoice", MsgID: "stored-big"}}, nil); err != nil {
		t.Fatal(err)
	}
	c.Close()

	mustCLI(t, "", "run", "--data-dir", dir, "--until-idle", "--sim-latency", "0", "--max-job-bytes", "512KiB")
	for id, size := range map[string]int{"inline-big": len(inline), "stored-big": len(offloaded)} {
		var o map[string]any
		if err := json.Unmarshal([]byte(mustCLI(t, "", "dlq", "show", "--json", "--data-dir", dir, id)), &o); err != nil {
			t.Fatal(err)
		}
		reason, _ := o["reason"].(string)
		if o["class"] != "invalid_job" || !strings.Contains(reason, fmt.Sprintf("job is %d bytes, over the limit of %d bytes", size, 512<<10)) {
			t.Errorf("%s: class %v reason %q", id, o["class"], reason)
		}
		if o["attempts"].(float64) != 0 {
			t.Errorf("%s: %v model calls", id, o["attempts"])
		}
	}
	c = connFor(t, []string{"--data-dir", dir})
	defer c.Close()
	if left := jobObjects(t, c); len(left) != 0 {
		t.Errorf("job bodies left in the object store: %v", left)
	}
}

// TestResubmitAfterDuplicateWindow: the same file submitted again after
// the duplicate window is already done (the ledger), publishes nothing and
// calls the model for nothing; a copy that slips past submit is acked by
// the workers without a model call; --rerun makes a second run.
func TestResubmitAfterDuplicateWindow(t *testing.T) {
	t.Parallel()
	wantTestKeys(t)
	schemaDir := personSchemas(t, `{"type":"object","required":["name"],"properties":{"name":{"type":"string"}}}`)
	srv := newOpenAIServer(t, 200, `{"name": "Ana"}`)
	dir := t.TempDir()
	var b strings.Builder
	const n = 5
	for i := range n {
		fmt.Fprintf(&b, `{"id":"p:%d@x","schema":"person","input":"person %d"}`+"\n", i, i)
	}
	conn := []string{"--data-dir", dir, "--duplicate-window", "1s"}
	common := append([]string{"--schemas", schemaDir}, conn...)
	submit := func(extra ...string) map[string]any {
		t.Helper()
		lines := jsonLines(t, mustCLI(t, b.String(), append(append(append([]string{"submit", "--json"}, common...), extra...), "-")...))
		return lines[0]
	}
	run := func() {
		t.Helper()
		mustCLI(t, "", append([]string{"run", "--until-idle", "--model", "openai:m", "--llm-url", srv.URL + "/v1"}, common...)...)
	}
	first := time.Now()
	if s := submit(); s["published"] != float64(n) {
		t.Fatalf("first submit %v", s)
	}
	run()
	if srv.calls() != n {
		t.Fatalf("%d model calls, want %d", srv.calls(), n)
	}
	// Past the window the streams no longer know the ids: only the ledger does.
	<-time.After(time.Until(first.Add(1500 * time.Millisecond))) // the duplicate window's length is what is waited for, not an event
	if s := submit(); s["published"] != float64(0) || s["already_done"] != float64(n) {
		t.Errorf("second submit %v, want published 0 and already_done %d", s, n)
	}
	human := mustCLI(t, b.String(), append(append([]string{"submit"}, common...), "-")...)
	if !strings.Contains(human, fmt.Sprintf("already done %d", n)) {
		t.Errorf("human line %q lacks the already-done count", human)
	}

	// A copy published past submit (another producer) is not answered twice.
	c := connFor(t, common)
	m := nats.NewMsg(broker.SubjectJobs + ".person")
	m.Header.Set(jetstream.MsgIDHeader, "p:0@x")
	m.Data = []byte(`{"id":"p:0@x","schema":"person","input":"person 0"}`)
	ack, err := c.JetStream().PublishMsg(t.Context(), m)
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	if ack.Duplicate {
		t.Fatal("the copy was deduplicated by the stream: the duplicate window has not passed")
	}
	run()
	if srv.calls() != n {
		t.Errorf("%d model calls after the copy, want still %d", srv.calls(), n)
	}
	results := jsonLines(t, mustCLI(t, "", append([]string{"results", "--json"}, conn...)...))
	if len(results) != n {
		t.Errorf("%d results, want %d (one per job)", len(results), n)
	}

	if s := submit("--rerun"); s["published"] != float64(n) || s["reruns"] != float64(n) {
		t.Errorf("submit --rerun %v, want %d published as reruns", s, n)
	}
	run()
	if srv.calls() != 2*n {
		t.Errorf("%d model calls after --rerun, want %d", srv.calls(), 2*n)
	}
	runs := map[string]int{}
	for _, r := range jsonLines(t, mustCLI(t, "", append([]string{"results", "--json"}, conn...)...)) {
		run, _ := r["run"].(float64)
		runs[fmt.Sprintf("%v/%v", r["job_id"], run)]++
	}
	if len(runs) != 2*n {
		t.Errorf("results by job/run %v, want %d distinct, one each", runs, 2*n)
	}
	for k, v := range runs {
		if v != 1 {
			t.Errorf("%s stored %d times", k, v)
		}
	}
}

// personSchemas is a schema directory holding person.json.
func personSchemas(t *testing.T, schema string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "person.json"), []byte(schema), 0o600); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestFileNameJobIDs: ids as batch inputs have them (file paths, dotted
// names, emails, non-ASCII) are submitted, answered once each, listed by
// by dlq list under the same id and shown by dlq show (< > & unescaped),
// and remembered by the ledger past the duplicate window.
func TestFileNameJobIDs(t *testing.T) {
	t.Parallel()
	wantTestKeys(t)
	schemaDir := personSchemas(t, `{"type":"object","required":["name","age"],"properties":{"name":{"type":"string"},"age":{"type":"integer"}}}`)
	srv := newOpenAIServer(t, 200, `{"name": "Ana"}`) // no age: every job is dead-lettered
	dir := t.TempDir()
	ids := []string{"scans/2024/inv-7.pdf", "ana.lopez@example.com", "請求書-7.txt", "a.b*>"}
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false) // the ids as a file has them, > unescaped
	for _, id := range ids {
		if err := enc.Encode(map[string]string{"id": id, "schema": "person", "input": "about " + id}); err != nil {
			t.Fatal(err)
		}
	}
	conn := []string{"--data-dir", dir, "--duplicate-window", "1s"}
	common := append([]string{"--schemas", schemaDir}, conn...)
	first := time.Now()
	if s := jsonLines(t, mustCLI(t, b.String(), append(append([]string{"submit", "--json"}, common...), "-")...))[0]; s["published"] != float64(len(ids)) {
		t.Fatalf("submit %v, want %d published", s, len(ids))
	}
	mustCLI(t, "", append([]string{"run", "--until-idle", "--max-attempts", "1", "--model", "openai:m", "--llm-url", srv.URL + "/v1"}, common...)...)
	if srv.calls() != len(ids) {
		t.Fatalf("%d model calls, want %d", srv.calls(), len(ids))
	}
	got := map[string]bool{}
	for _, r := range jsonLines(t, mustCLI(t, "", "dlq", "list", "--json", "--data-dir", dir)) {
		got[fmt.Sprint(r["job_id"])] = true
	}
	for _, id := range ids {
		if !got[id] {
			t.Errorf("dlq list lacks %q: %v", id, got)
		}
		show := mustCLI(t, "", "dlq", "show", "--json", "--data-dir", dir, id)
		var o struct {
			JobID string `json:"job_id"`
			Job   struct {
				Input string `json:"input"`
			} `json:"job"`
		}
		if err := json.Unmarshal([]byte(show), &o); err != nil || o.JobID != id || o.Job.Input != "about "+id {
			t.Errorf("dlq show %q: job_id %q, input %q (%v):\n%s", id, o.JobID, o.Job.Input, err, show)
		}
		// As the file has it: "a.b*>", not "a.b*\u003e".
		if !strings.Contains(show, `"about `+id+`"`) {
			t.Errorf("dlq show --json escapes the input of %q:\n%s", id, show)
		}
	}
	<-time.After(time.Until(first.Add(1500 * time.Millisecond))) // the duplicate window's length is what is waited for, not an event
	if s := jsonLines(t, mustCLI(t, b.String(), append(append([]string{"submit", "--json"}, common...), "-")...))[0]; s["published"] != float64(0) || s["already_done"] != float64(len(ids)) {
		t.Errorf("second submit %v, want published 0 and already_done %d", s, len(ids))
	}
}

// TestResubmitEditedFile: a file run once, then one line edited: submit
// counts that job as changed and names it (publishing nothing), the
// others as already done; --rerun-changed runs only the edited job again,
// as a new run with the new input; after that the edited file is done,
// and results --latest prints each job once, from its latest run.
func TestResubmitEditedFile(t *testing.T) {
	t.Parallel()
	wantTestKeys(t)
	schemaDir := personSchemas(t, `{"type":"object","required":["name"],"properties":{"name":{"type":"string"}}}`)
	srv := newOpenAIServer(t, 200, `{"name": "Ana"}`)
	dir := t.TempDir()
	file := func(edited string) string {
		var b strings.Builder
		for i := range 3 {
			in := fmt.Sprintf("person %d", i)
			if i == 1 && edited != "" {
				in = edited
			}
			fmt.Fprintf(&b, `{"id":"p-%d.txt","schema":"person","input":%q}`+"\n", i, in)
		}
		return b.String()
	}
	common := []string{"--schemas", schemaDir, "--data-dir", dir}
	submit := func(in string, extra ...string) (map[string]any, string) {
		t.Helper()
		out, errs, code := runCLI(t, in, append(append(append([]string{"submit", "--json"}, common...), extra...), "-")...)
		if code != 0 {
			t.Fatalf("submit exit %d: %s", code, errs)
		}
		return jsonLines(t, out)[0], errs
	}
	run := func() {
		t.Helper()
		mustCLI(t, "", append([]string{"run", "--until-idle", "--model", "openai:m", "--llm-url", srv.URL + "/v1"}, common...)...)
	}
	if s, _ := submit(file("")); s["published"] != float64(3) {
		t.Fatalf("first submit %v", s)
	}
	run()
	edited := file("person 1, now called Bea")
	s, errs := submit(edited)
	if s["published"] != float64(0) || s["already_done"] != float64(2) || s["changed"] != float64(1) {
		t.Errorf("edited file: %v, want 2 already done, 1 changed, none published", s)
	}
	if !strings.Contains(errs, `job id "p-1.txt" already ended with another input`) {
		t.Errorf("stderr does not name the changed job:\n%s", errs)
	}
	if s, _ := submit(edited, "--rerun-changed"); s["published"] != float64(1) || s["reruns"] != float64(1) || s["already_done"] != float64(2) {
		t.Errorf("--rerun-changed: %v, want the changed job alone published as a rerun", s)
	}
	run()
	if srv.calls() != 4 {
		t.Errorf("%d model calls, want 4 (3 jobs, then the edited one)", srv.calls())
	}
	var rerun []map[string]any
	for _, r := range jsonLines(t, mustCLI(t, "", "results", "--json", "--data-dir", dir)) {
		if r["run"] == float64(1) {
			rerun = append(rerun, r)
		}
	}
	if len(rerun) != 1 || rerun[0]["job_id"] != "p-1.txt" || !strings.Contains(fmt.Sprint(rerun[0]["job"]), "now called Bea") {
		t.Errorf("results of run 1: %v, want one, of p-1.txt with the edited input", rerun)
	}
	if s, _ := submit(edited); s["published"] != float64(0) || s["already_done"] != float64(3) || s["changed"] != float64(0) {
		t.Errorf("the edited file after its rerun: %v, want all 3 already done", s)
	}
	// --latest: one result per job, the edited job's from its new run.
	latest := jsonLines(t, mustCLI(t, "", "results", "--latest", "--json", "--data-dir", dir))
	byJob := map[string]map[string]any{}
	for _, r := range latest {
		byJob[fmt.Sprint(r["job_id"])] = r
	}
	if len(latest) != 3 || len(byJob) != 3 || byJob["p-1.txt"]["run"] != float64(1) || !strings.Contains(fmt.Sprint(byJob["p-1.txt"]["job"]), "now called Bea") {
		t.Errorf("results --latest: %v, want the 3 jobs once each, p-1.txt from run 1", latest)
	}
	if all := jsonLines(t, mustCLI(t, "", "results", "--json", "--data-dir", dir)); len(all) != 4 {
		t.Errorf("results without --latest: %d lines, want 4 (both runs of p-1.txt)", len(all))
	}
	// The same one result at a time (a ledger read per result), so the
	// held results are let go and checked batch by batch.
	c := connFor(t, common)
	var one []string
	lf := app.NewLatestFilter(c, 1, func(m sink.Msg) error {
		one = append(one, fmt.Sprintf("%s/%d", gjson.GetBytes(m.Data, "job_id"), gjson.GetBytes(m.Data, "run").Int()))
		return nil
	})
	err := sink.ReadStream(t.Context(), c, broker.StreamResults, "", func(m sink.Msg) error { return lf.Add(t.Context(), m) })
	if err == nil {
		err = lf.Flush(t.Context())
	}
	c.Close()
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(one)
	if want := []string{"p-0.txt/0", "p-1.txt/1", "p-2.txt/0"}; !slices.Equal(one, want) {
		t.Errorf("latest one at a time: %v, want %v", one, want)
	}
}
