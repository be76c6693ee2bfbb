package faults

import (
	"bytes"
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/payload"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmpipeline/pipeline/internal/poll"
)

// storeScenarios are the scenarios of the stores: a job body changed in
// the object store, and a takeover during a run's start-up.
func storeScenarios() []scenario {
	return []scenario{
		{"job body changed in the object store (tampered payload)", scenarioTamperedPayload},
		{"server's owner exits during a joined run's start-up", scenarioTakeoverAtStartup},
	}
}

// A 2 MiB job among 40 example jobs whose body in PIPELINE_PAYLOADS is
// changed after submit: it ends, on its first delivery, as an invalid_job
// dead letter naming the digest mismatch; every other job ends once and
// nothing is left on JOBS.
func scenarioTamperedPayload(t *testing.T) row {
	dir := t.TempDir()
	jobs := append(exampleJobs(t, 40, "invoice"), job{ID: "inv-big", Schema: "invoice", line: bigLine("inv-big", 2<<20)})
	env := childEnv()
	submitFile(t, env, writeJobs(t, dir, jobs), "--data-dir", dir)

	c := openEmbedded(t, dir)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	object := ""
	if err := readStream(ctx, c.JetStream(), broker.StreamJobs, func(m *jetstream.RawStreamMsg) error {
		if name := m.Header.Get(payload.Header); name != "" {
			object = name
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if object == "" {
		t.Fatal("no job on JOBS names a payload object")
	}
	obs, err := c.JetStream().ObjectStore(ctx, payload.Bucket)
	if err != nil {
		t.Fatal(err)
	}
	body, err := obs.GetBytes(ctx, object)
	if err != nil {
		t.Fatal(err)
	}
	body = bytes.Replace(body, []byte("3 bolts"), []byte("9 bolts"), 1)
	if _, err := obs.PutBytes(ctx, object, body); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	pipeline(t, "run", env, runArgs("--data-dir", dir, "--until-idle")...).mustSucceed(t)
	c = openEmbedded(t, dir)
	r, outs := auditRuns(t, c, ids(jobs), 1)
	big := outs["inv-big"]
	if big.Class != "invalid_job" || !strings.Contains(big.Reason, "digest") {
		t.Errorf("inv-big ended as %q (%q), want invalid_job naming the digest mismatch", big.Class, big.Reason)
	}
	r.Note = fmt.Sprintf("one word of inv-big's 2 MiB body changed in %s after submit; it ended as %s after %d delivery: %q",
		payload.Bucket, big.Class, big.Deliveries, excerpt(big.Reason, 90))
	return r
}

// A run joins the server of another run, and the owner is told to stop
// (SIGTERM: it drains and shuts its server down) the moment the joined run
// says it joined, so the owner exits while the joined run is still
// starting (streams, the rate-limit fleet, the consumer): the joined run
// takes the server over, retries its start-up against it and finishes
// every job once. Rounds (fresh data dirs) repeat until the joined run
// took over, at most three.
func scenarioTakeoverAtStartup(t *testing.T) row {
	const rounds = 3
	var r row
	took := false
	for round := 1; round <= rounds && !took; round++ {
		dir := filepath.Join(t.TempDir(), fmt.Sprint("round-", round))
		jobs := exampleJobs(t, 200)
		env := childEnv()
		submitFile(t, env, writeJobs(t, t.TempDir(), jobs), "--data-dir", dir)
		run1 := pipeline(t, fmt.Sprint("run-1-", round), env, embeddedRunArgs(simLatency, "--data-dir", dir, "--until-idle", "--sink=false", "--shutdown-grace", "100ms")...)
		embeddedURL(t, run1, dir)
		run2 := pipeline(t, fmt.Sprint("run-2-", round), env, embeddedRunArgs(simLatency, "--data-dir", dir, "--until-idle", "--log-level", "debug")...)
		poll.Until(t, 30*time.Second, "run-2 to join run-1's server", func() bool {
			return strings.Contains(run2.stderr.String(), "joined the embedded nats server of another command") || run2.exited()
		})
		run1.signal(t, syscall.SIGTERM)
		run1.mustSucceed(t)
		exited := time.Now()
		run2.mustExitWithin(t, strandBound)
		after := time.Since(exited)
		took = tookOver(run2)
		r = auditEmbedded(t, dir).check(t, "", ids(jobs))
		retried := strings.Count(run2.stderr.String(), "on the embedded nats server: trying again")
		r.Note = fmt.Sprintf("round %d of up to %d: run-1 stopped (SIGTERM) as run-2 joined it; run-2 took over: %v, start-up steps retried %d times, exit 0 %.1fs after run-1",
			round, rounds, took, retried, after.Seconds())
	}
	if !took {
		t.Errorf("run-2 never took run-1's server over in %d rounds", rounds)
	}
	return r
}

// excerpt is s cut to n bytes.
func excerpt(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}
