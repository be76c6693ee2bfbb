package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/ledger"
	"github.com/llmpipeline/pipeline/internal/payload"
	"github.com/llmpipeline/pipeline/internal/queue"
	"github.com/llmpipeline/pipeline/internal/sink"
)

// payloadScenarios are the scenarios of size and repetition: a job over
// the server's max payload, and a file submitted again after the
// duplicate window.
func payloadScenarios() []scenario {
	return []scenario{
		{"job of 2 MiB, external server at the default max payload", scenarioBigJob},
		{"same file submitted again past the duplicate window, then --rerun", scenarioResubmit},
	}
}

// storedOutcome is what the audit reads of one outcome.
type storedOutcome struct {
	Run      int    `json:"run"`
	Status   string `json:"status"`
	Class    string `json:"class"`
	Reason   string `json:"reason"`
	Attempts int    `json:"attempts"`
	// Deliveries of the job when it ended.
	Deliveries int `json:"deliveries"`
	Trace      []struct {
		Raw string `json:"raw"`
	} `json:"trace"`
	Job json.RawMessage `json:"job"`
}

// auditRuns reads RESULTS and DLQ through package sink (bodies in the object
// store resolved) and checks every submitted id ended exactly once per run
// in runs, nothing is left on JOBS and no job body is left in the object
// store. It returns the row and the outcomes by message id.
func auditRuns(t *testing.T, c *broker.Conn, submitted []string, runs int) (row, map[string]storedOutcome) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	byID := map[string]storedOutcome{}
	count := map[string]int{}
	r := row{Jobs: len(submitted)}
	for _, stream := range []string{broker.StreamResults, broker.StreamDLQ} {
		err := sink.ReadStream(ctx, c, stream, "", func(m sink.Msg) error {
			var o storedOutcome
			if err := json.Unmarshal(m.Data, &o); err != nil {
				return fmt.Errorf("%s seq %d is not an outcome: %w", stream, m.Sequence, err)
			}
			count[m.MsgID]++
			byID[m.MsgID] = o
			if stream == broker.StreamResults {
				r.Results++
			} else {
				r.DeadLetters++
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	for _, id := range submitted {
		for run := range runs {
			msgID := ledger.RunMsgID(id, run)
			switch n := count[msgID]; {
			case n == 0:
				r.Lost++
				t.Errorf("lost: %s is neither a result nor a dead letter", msgID)
			case n > 1:
				r.Duplicated++
				t.Errorf("duplicated: %s stored %d times", msgID, n)
			}
		}
	}
	if len(count) != len(submitted)*runs {
		t.Errorf("%d message ids stored, want %d", len(count), len(submitted)*runs)
	}
	p, err := queue.Pending(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	if p.Jobs != 0 || p.Pending != 0 || p.AckPending != 0 {
		t.Errorf("left on JOBS: %d messages, %d pending, %d unacked", p.Jobs, p.Pending, p.AckPending)
	}
	obs, err := c.JetStream().ObjectStore(ctx, payload.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	infos, _ := obs.List(ctx) // no objects is an error too
	for _, i := range infos {
		if strings.HasPrefix(i.Name, "jobs/") {
			t.Errorf("job body %s left in the object store after its job ended", i.Name)
		}
	}
	return r, byID
}

// bigLine is a job line of the invoice schema whose input is n bytes.
func bigLine(id string, n int) []byte {
	input := strings.Repeat("Invoice 12 from ACME: 3 bolts at 1.20 EUR. ", n/43+1)[:n]
	b, _ := json.Marshal(map[string]string{"id": id, "schema": "invoice", "input": input})
	return b
}

// A 2 MiB job among 40 example jobs, on an external nats-server left at
// the default max payload (1 MiB), run with --sim-force grammar: every job
// ends once as a dead letter of its real class with its transcript,
// none of them left on JOBS, none of its attempts failing to publish.
func scenarioBigJob(t *testing.T) row {
	dir := t.TempDir()
	srv := &natsServer{name: "nats-bigjob", port: freePort(t), storeDir: filepath.Join(dir, "nats")}
	srv.start(t)
	_, js := connectJS(t, srv.url())
	waitJetStream(t, js)

	jobs := append(exampleJobs(t, 40, "invoice"), job{ID: "inv-big", Schema: "invoice", line: bigLine("inv-big", 2<<20)})
	env := childEnv()
	conn := []string{"--data-dir", dir, "--nats-url", srv.url()}
	submitFile(t, env, writeJobs(t, dir, jobs), conn...)
	pipeline(t, "run", env, runArgs(append(conn, "--until-idle", "--sim-force", "grammar", "--max-attempts", "2")...)...).mustSucceed(t)

	c := connectIngest(t, broker.Config{URL: srv.url()})
	r, outs := auditRuns(t, c, ids(jobs), 1)
	big := outs["inv-big"]
	if big.Class != "exhausted" && big.Class != "grammar" {
		t.Errorf("inv-big ended as %q, want its real class", big.Class)
	}
	if len(big.Trace) != 2 || len(big.Job) < 2<<20 {
		t.Errorf("inv-big: %d attempts in the transcript, job of %d bytes; want 2 and the whole job", len(big.Trace), len(big.Job))
	}
	r.Note = fmt.Sprintf("--sim-force grammar; inv-big (%d bytes) ended as %s with %d attempts; no job body left in %s",
		len(bigLine("inv-big", 2<<20)), big.Class, len(big.Trace), payload.Bucket)
	return r
}

// The same 50 jobs submitted again after the duplicate window (1s here):
// the ledger counts them as already done, nothing is published, no model
// call, RESULTS and DLQ keep one outcome per job; --rerun makes run 1 of
// each, once.
func scenarioResubmit(t *testing.T) row {
	dir := t.TempDir()
	jobs := exampleJobs(t, 50)
	env := childEnv()
	conn := []string{"--data-dir", dir, "--duplicate-window", "1s"}
	file := writeJobs(t, dir, jobs)
	submitJSON := func(extra ...string) map[string]int {
		t.Helper()
		p := pipeline(t, "submit", env, append(append(append([]string{"submit", "--json"}, conn...), extra...), file)...)
		p.mustSucceed(t)
		var s map[string]int
		if err := json.Unmarshal([]byte(p.stdout.String()), &s); err != nil {
			t.Fatalf("submit --json printed %q: %v", p.stdout.String(), err)
		}
		return s
	}
	run := func() {
		t.Helper()
		pipeline(t, "run", env, runArgs(append(conn, "--until-idle")...)...).mustSucceed(t)
	}
	submitted := time.Now()
	if s := submitJSON(); s["published"] != len(jobs) {
		t.Fatalf("first submit %v", s)
	}
	run()
	<-time.After(time.Until(submitted.Add(2 * time.Second))) // the duplicate window's length, not a wait for a result
	second := submitJSON()
	if second["already_done"] != len(jobs) || second["published"] != 0 {
		t.Errorf("second submit %v, want already_done %d and nothing published", second, len(jobs))
	}
	run()
	c := openEmbedded(t, dir)
	r, _ := auditRuns(t, c, ids(jobs), 1)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	rerun := submitJSON("--rerun")
	if rerun["reruns"] != len(jobs) {
		t.Errorf("submit --rerun %v, want %d reruns", rerun, len(jobs))
	}
	run()
	c = openEmbedded(t, dir)
	r2, outs := auditRuns(t, c, ids(jobs), 2)
	for _, j := range jobs {
		if o := outs[ledger.RunMsgID(j.ID, 1)]; o.Run != 1 {
			t.Errorf("%s~r1 stored as run %d", j.ID, o.Run)
		}
	}
	r.Lost += r2.Lost
	r.Duplicated += r2.Duplicated
	r.Note = fmt.Sprintf("second submit: already_done %d, published %d; --rerun: %d reruns, each stored once as run 1 (%d outcomes in all)",
		second["already_done"], second["published"], rerun["reruns"], r2.Results+r2.DeadLetters)
	return r
}

// connectIngest connects to an external server as the pipeline does.
func connectIngest(t *testing.T, cfg broker.Config) *broker.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := broker.Connect(ctx, cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}
