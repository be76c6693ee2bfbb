package faults

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/internal/poll"
)

// Scenarios of processes sharing one data dir's embedded server: the one
// that holds it goes away (it finished, it was a short command, it was
// killed) while another one that joined it still works. The joined one
// must take the server over and finish, or exit non-zero saying why;
// never hang, never exit 0 for work it did not do.

// strandBound is how long a joined process may take to finish after the
// process that ran its server went away: the takeover, a redelivery
// after --ack-wait, and the rest of the work.
const strandBound = 90 * time.Second

// tookOver reports whether p's stderr says it took the server over.
func tookOver(p *proc) bool {
	return strings.Contains(p.stderr.String(), "took over the embedded nats server")
}

// embeddedRunArgs are runArgs with this file's latency per call.
func embeddedRunArgs(latency string, extra ...string) []string {
	return append([]string{"run", "--model", "sim", "--sim-latency", latency, "--ack-wait", ackWait,
		"--concurrency", "16", "--log-level", logLevel()}, extra...)
}

// ownerPID is the pid nats.json names, 0 when there is none.
func ownerPID(dir string) int {
	b, err := os.ReadFile(filepath.Join(dir, "nats.json"))
	if err != nil {
		return 0
	}
	var info struct {
		PID int `json:"pid"`
	}
	if json.Unmarshal(b, &info) != nil {
		return 0
	}
	return info.PID
}

// mustExitWithin waits up to d for p and fails unless it exited 0.
func (p *proc) mustExitWithin(t *testing.T, d time.Duration) {
	t.Helper()
	if code := p.wait(t, d); code != 0 {
		t.Fatalf("%s exited %d; stderr:\n%s", p.name, code, tail(p.stderr.String(), 40))
	}
}

// Two `run --until-idle` on one data dir: the first holds the server (no
// sink), the second joins it (the sink, slower model calls). Both see the
// queue idle at about the same time; the first exits at once, while the
// second still indexes the last outcomes and checks idleness again: it
// must take the server over and finish.
func scenarioTwoRunsUntilIdle(t *testing.T) row {
	dir := t.TempDir()
	jobs := exampleJobs(t, 200)
	env := childEnv()
	submitFile(t, env, writeJobs(t, dir, jobs), "--data-dir", dir)

	run1 := pipeline(t, "run-1", env, embeddedRunArgs(simLatency, "--data-dir", dir, "--until-idle", "--sink=false")...)
	url := embeddedURL(t, run1, dir)
	run2 := pipeline(t, "run-2", env, embeddedRunArgs("600ms", "--data-dir", dir, "--until-idle")...)
	nc, js := connectJS(t, url)
	waitStored(t, run2, js, 20)
	nc.Close()
	if pid := ownerPID(dir); pid != run1.cmd.Process.Pid {
		t.Fatalf("nats.json names pid %d, not run-1 %d: run-2 did not join", pid, run1.cmd.Process.Pid)
	}
	run1.mustSucceed(t)
	first := time.Now()
	run2.mustExitWithin(t, strandBound)
	after := time.Since(first)

	r := auditEmbedded(t, dir).check(t, "", ids(jobs))
	r.Note = fmt.Sprintf("run-2 joined run-1's server; run-1 exit 0, run-2 exit 0 %.1fs later (took over: %v)", after.Seconds(), tookOver(run2))
	return r
}

// `submit` and `run --until-idle` started together: submit holds the
// server (it is started first and publishes slowly, fsyncing every job),
// run joins it and works while submit still publishes; submit exits and
// run must take the server over and finish every job. Rounds are repeated
// (fresh data dirs) until run joined submit's server, at most three.
func scenarioSubmitAndRun(t *testing.T) row {
	const rounds = 3
	var r row
	took := false
	for round := 1; round <= rounds && !took; round++ {
		dir := filepath.Join(t.TempDir(), fmt.Sprint("round-", round))
		jobs := exampleJobs(t, 300)
		env := childEnv()
		file := writeJobs(t, t.TempDir(), jobs)
		sub := pipeline(t, fmt.Sprint("submit-", round), env, "submit", "--data-dir", dir, "--nats-sync-always", "--log-level", logLevel(), file)
		// run starts as soon as submit's server is up (or submit is done).
		poll.Until(t, 30*time.Second, "submit's server", func() bool {
			return sub.exited() || ownerPID(dir) == sub.cmd.Process.Pid
		})
		run := pipeline(t, fmt.Sprint("run-", round), env, embeddedRunArgs(simLatency, "--data-dir", dir, "--until-idle")...)
		sub.mustSucceed(t)
		run.mustExitWithin(t, strandBound)
		took = tookOver(run)
		r = auditEmbedded(t, dir).check(t, "", ids(jobs))
		r.Note = fmt.Sprintf("round %d of up to %d: submit exit 0, run exit 0; run took over submit's server: %v", round, rounds, took)
	}
	if !took {
		t.Logf("run never joined submit's server in %d rounds (submit was done first): the race was not hit", rounds)
	}
	return r
}

// kill -9 of the process that holds the server while a joined run works:
// the joined run takes the server over, gets the dead one's jobs after
// --ack-wait, and finishes every job once.
func scenarioKillOwner(t *testing.T) row {
	dir := t.TempDir()
	jobs := exampleJobs(t, 200)
	env := childEnv()
	submitFile(t, env, writeJobs(t, dir, jobs), "--data-dir", dir)

	owner := pipeline(t, "run-owner", env, embeddedRunArgs(simLatency, "--data-dir", dir, "--sink=false")...)
	url := embeddedURL(t, owner, dir)
	joined := pipeline(t, "run-joined", env, embeddedRunArgs(simLatency, "--data-dir", dir, "--until-idle")...)
	nc, js := connectJS(t, url)
	waitStored(t, joined, js, 50)
	if pid := ownerPID(dir); pid != owner.cmd.Process.Pid {
		t.Fatalf("nats.json names pid %d, not the owner %d: the second run did not join", pid, owner.cmd.Process.Pid)
	}
	owner.kill9(t)
	killed := time.Now()
	nc.Close()
	joined.mustExitWithin(t, strandBound)
	after := time.Since(killed)
	if !tookOver(joined) {
		t.Error("the joined run finished without saying it took the server over")
	}

	r := auditEmbedded(t, dir).check(t, "", ids(jobs))
	r.Note = fmt.Sprintf("owner killed after >= 50 outcomes; the joined run took over and exited 0 %.1fs later%s", after.Seconds(), stranded(joined))
	return r
}

// The process that holds the server freezes (SIGSTOP): it keeps the lock,
// so nobody can take over, and its server answers nobody. The joined run
// must not wait forever: it exits 3 naming the data dir. Thawed, the owner
// goes on, and a third run finishes the work.
func scenarioOwnerFrozen(t *testing.T) row {
	dir := t.TempDir()
	jobs := exampleJobs(t, 200)
	env := childEnv()
	submitFile(t, env, writeJobs(t, dir, jobs), "--data-dir", dir)

	owner := pipeline(t, "run-owner", env, embeddedRunArgs(simLatency, "--data-dir", dir, "--sink=false")...)
	url := embeddedURL(t, owner, dir)
	joined := pipeline(t, "run-joined", env, embeddedRunArgs(simLatency, "--data-dir", dir, "--until-idle")...)
	nc, js := connectJS(t, url)
	waitStored(t, joined, js, 50)
	nc.Close()
	owner.signal(t, syscall.SIGSTOP)
	stopped := time.Now()
	code := joined.wait(t, strandBound)
	after := time.Since(stopped)
	owner.signal(t, syscall.SIGCONT)
	msg := joined.stderr.String()
	if code != 3 {
		t.Errorf("the joined run exited %d with its server frozen, want 3", code)
	}
	if !strings.Contains(msg, "pipeline: connection to NATS lost") || !strings.Contains(msg, dir) {
		t.Errorf("the joined run's last words do not say the server was lost, or name the data dir %s:\n%s", dir, tail(msg, 10))
	}

	finish := pipeline(t, "run-finish", env, embeddedRunArgs(simLatency, "--data-dir", dir, "--until-idle")...)
	finish.mustSucceed(t)
	owner.signal(t, syscall.SIGTERM)
	owner.mustSucceed(t)
	r := auditEmbedded(t, dir).check(t, "", ids(jobs))
	r.Note = fmt.Sprintf("owner stopped (SIGSTOP) after >= 50 outcomes; the joined run exited %d %.0fs later naming the data dir; thawed, a third run finished", code, after.Seconds())
	return r
}
