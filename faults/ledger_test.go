package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"strconv"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/ledger"
	"github.com/llmpipeline/pipeline/internal/sink"
	"github.com/nats-io/nats.go/jetstream"
)

// ledgerScenarios: the job ledger loses what the streams know, and the
// same file is submitted again.
func ledgerScenarios() []scenario {
	return []scenario{
		{"ledger bucket deleted, same file submitted again", func(t *testing.T) row { return scenarioLedgerLost(t, false) }},
		{"upgrade from a release without the ledger (or its first format), same file again", func(t *testing.T) row { return scenarioLedgerLost(t, true) }},
	}
}

// rebuiltLine is the warning submit and run print when they rebuilt the
// ledger.
var rebuiltLine = regexp.MustCompile(`job ledger ` + broker.BucketLedger + ` rebuilt.*entries_rebuilt=(\d+)`)

// modelCalls is the count of model calls on run's summary line.
var modelCalls = regexp.MustCompile(`run: (\d+) jobs in .*, (\d+) model calls`)

// 100 jobs run to their end; then the ledger bucket is deleted (upgrade:
// the data dir is made to look like one of an earlier release: no ledger
// entry for half of the jobs, and the first ledger format, one key per
// job, for the other half). Past the duplicate window the same file is
// submitted again: submit must say the ledger was rebuilt and with how
// many entries, publish nothing, and the next run call the model for none.
func scenarioLedgerLost(t *testing.T, upgrade bool) row {
	dir := t.TempDir()
	jobs := exampleJobs(t, 100)
	env := childEnv()
	conn := []string{"--data-dir", dir, "--duplicate-window", "1s"}
	file := writeJobs(t, dir, jobs)
	submit := func() (map[string]int, string) {
		t.Helper()
		p := pipeline(t, "submit", env, append(append([]string{"submit", "--json"}, conn...), file)...)
		p.mustSucceed(t)
		var s map[string]int
		if err := json.Unmarshal([]byte(p.stdout.String()), &s); err != nil {
			t.Fatalf("submit --json printed %q: %v", p.stdout.String(), err)
		}
		return s, p.stderr.String()
	}
	run := func() string {
		t.Helper()
		p := pipeline(t, "run", env, runArgs(append(conn, "--until-idle")...)...)
		p.mustSucceed(t)
		return p.stderr.String()
	}
	submitted := time.Now()
	if s, _ := submit(); s["published"] != len(jobs) {
		t.Fatalf("first submit %v", s)
	}
	first := run()
	m := modelCalls.FindStringSubmatch(first)
	if m == nil {
		t.Fatalf("first run printed no summary line:\n%s", tail(first, 20))
	}

	c := openEmbedded(t, dir)
	oldFormat := loseLedger(t, c, upgrade)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	<-time.After(time.Until(submitted.Add(2500 * time.Millisecond))) // the duplicate window's length, not a wait for a result

	second, stderr := submit()
	rebuilt := 0
	if w := rebuiltLine.FindStringSubmatch(stderr); w == nil {
		t.Errorf("submit after the ledger was lost gave no warning that it rebuilt it; stderr:\n%s", tail(stderr, 20))
	} else {
		rebuilt, _ = strconv.Atoi(w[1])
	}
	if rebuilt != len(jobs) {
		t.Errorf("warning names %d entries rebuilt, want %d", rebuilt, len(jobs))
	}
	if second["already_done"] != len(jobs) || second["published"] != 0 {
		t.Errorf("second submit %v, want already_done %d and nothing published", second, len(jobs))
	}
	again := run()
	calls := -1
	if m := modelCalls.FindStringSubmatch(again); m != nil {
		calls, _ = strconv.Atoi(m[2])
	}
	if calls != 0 {
		t.Errorf("the run after the re-submit made %d model calls, want 0; stderr:\n%s", calls, tail(again, 10))
	}
	if rebuiltLine.MatchString(again) {
		t.Errorf("the run after submit rebuilt the ledger again:\n%s", tail(again, 10))
	}

	c = openEmbedded(t, dir)
	r, _ := auditRuns(t, c, ids(jobs), 1)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	what := "ledger bucket deleted"
	if upgrade {
		what = fmt.Sprintf("ledger of an earlier release: %d jobs with no entry, %d in the first format (one key per job)", len(jobs)-oldFormat, oldFormat)
	}
	r.Note = fmt.Sprintf("%s after the first run (%s model calls); second submit warned \"rebuilt\" naming %d entries: already_done %d, published %d; next run %d model calls",
		what, m[2], rebuilt, second["already_done"], second["published"], calls)
	return r
}

// loseLedger deletes the ledger bucket; with upgrade, it is created again
// holding, for every other job, its runs in the first ledger format (one
// key per job id, a JSON entry with its runs), as that release left it.
// It returns how many entries of that format it wrote.
func loseLedger(t *testing.T, c *broker.Conn, upgrade bool) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	js := c.JetStream()
	var entries []ledger.Entry
	if upgrade {
		for _, stream := range []string{broker.StreamResults, broker.StreamDLQ} {
			err := sink.ReadStream(ctx, c, stream, "", func(m sink.Msg) error {
				var o storedOutcome
				if err := json.Unmarshal(m.Data, &o); err != nil {
					return err
				}
				if len(entries)%2 == 0 || o.Run != 0 {
					entries = append(entries, ledger.Entry{JobID: m.MsgID, Runs: []ledger.Run{{MsgID: m.MsgID, Stream: stream, Seq: m.Sequence, At: m.Time.UTC()}}})
				} else {
					entries = append(entries, ledger.Entry{}) // a job this release left no entry for
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := js.DeleteKeyValue(ctx, broker.BucketLedger); err != nil {
		t.Fatalf("deleting %s: %v", broker.BucketLedger, err)
	}
	if !upgrade {
		return 0
	}
	kv, err := js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: broker.BucketLedger, History: 1, Storage: jetstream.FileStorage})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range entries {
		if e.JobID == "" {
			continue
		}
		b, _ := json.Marshal(e)
		if _, err := kv.Put(ctx, ledger.Key(e.JobID), b); err != nil {
			t.Fatal(err)
		}
		n++
	}
	if n == 0 || n == len(entries) {
		t.Fatalf("upgrade set-up: %d of %d jobs in the first format", n, len(entries))
	}
	return n
}
