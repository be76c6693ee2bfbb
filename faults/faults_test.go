package faults

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/queue"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmpipeline/pipeline/internal/poll"
)

// scenario is one fault and its audit.
type scenario struct {
	name string
	run  func(t *testing.T) row
}

// TestFaults runs every scenario in parallel (each on its own ports, data
// dirs and servers) and prints the table; -update writes it to RESULTS.md.
func TestFaults(t *testing.T) {
	scenarios := []scenario{
		{"kill -9 worker", scenarioKill9},
		{"kill -9 worker, max-deliver 1 (orphans)", scenarioOrphans},
		{"nats-server restart", scenarioServerRestart},
		{"cluster node lost (R3)", scenarioClusterNodeLost},
		{"provider 429 for 10s", scenarioRateLimited},
		{"provider 401", scenarioUnauthorized},
		{"ack lost after the result, model changes its mind", func(t *testing.T) row { return scenarioLostAck(t, false) }},
		{"connection goes silent (half-open) before an ack", func(t *testing.T) row { return scenarioLostAck(t, true) }},
		{"poison: random bytes to submit", scenarioPoisonSubmit},
		{"poison: malformed on pipeline.jobs", scenarioPoisonPublished},
		{"sqlite locked 5s", func(t *testing.T) row { return scenarioSQLiteLocked(t, 5*time.Second) }},
		{"sqlite locked 20s (> busy timeout)", func(t *testing.T) row { return scenarioSQLiteLocked(t, 20*time.Second) }},
		{"SIGTERM, grace 10s", func(t *testing.T) row { return scenarioSIGTERM(t, 10*time.Second) }},
		{"SIGTERM, grace 100ms", func(t *testing.T) row { return scenarioSIGTERM(t, 100*time.Millisecond) }},
		{"two run --until-idle on one data dir", scenarioTwoRunsUntilIdle},
		{"submit and run started together", scenarioSubmitAndRun},
		{"kill -9 of the server's owner, joined run goes on", scenarioKillOwner},
		{"server's owner frozen (SIGSTOP), joined run exits 3", scenarioOwnerFrozen},
		{"disk full (64 MiB tmpfs), space freed", scenarioDiskFull},
		{"200 MB answers at -c 64", scenarioHugeAnswers},
		{"kill -9 of run --batch with batches in flight", scenarioBatchKill9},
	}
	scenarios = append(scenarios, payloadScenarios()...)
	scenarios = append(scenarios, filesScenarios()...)
	scenarios = append(scenarios, ledgerScenarios()...)
	scenarios = append(scenarios, storeScenarios()...)
	scenarios = append(scenarios, chunkScenarios()...)
	var mu sync.Mutex
	rows := map[string]row{}
	ran := map[string]bool{}
	t.Run("scenario", func(t *testing.T) {
		for _, sc := range scenarios {
			t.Run(sc.name, func(t *testing.T) {
				t.Parallel()
				mu.Lock()
				ran[sc.name] = true
				mu.Unlock()
				r := sc.run(t)
				r.Scenario = sc.name
				if t.Failed() {
					r.Note = "FAILED " + r.Note
				}
				mu.Lock()
				rows[sc.name] = r
				mu.Unlock()
			})
		}
	})
	var b strings.Builder
	b.WriteString("| scenario | jobs | results | dead letters | lost | duplicated | redelivered | note |\n")
	b.WriteString("| --- | ---: | ---: | ---: | ---: | ---: | ---: | --- |\n")
	kept := keptRows()
	for _, sc := range scenarios {
		r, ok := rows[sc.name]
		if !ran[sc.name] {
			// -run chose some scenarios: -update keeps the others' rows.
			if line, ok := kept[sc.name]; ok && *update {
				b.WriteString(line + "\n")
			}
			continue
		}
		if !ok {
			fmt.Fprintf(&b, "| %s | | | | | | | FAILED (no audit) |\n", sc.name)
			continue
		}
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %d | %d | %d | %s |\n", r.Scenario, r.Jobs, r.Results, r.DeadLetters, r.Lost, r.Duplicated, r.Redelivered, r.Note)
	}
	t.Log("\n" + b.String())
	if *update && !t.Failed() {
		doc := "# Failure suite results\n\nWritten by `go test -run TestFaults ./faults/ -update`. " +
			"jobs: ids submitted; results and dead letters: distinct ids on the RESULTS and DLQ streams; " +
			"lost: submitted ids on neither; duplicated: ids stored more than once; redelivered: outcomes " +
			"(from the SQLite index) whose job was delivered more than once, i.e. work the fault hit.\n\n" + b.String()
		if err := os.WriteFile("RESULTS.md", []byte(doc), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// keptRows reads the rows of RESULTS.md by scenario name, for -update
// after a -run that chose some scenarios.
func keptRows() map[string]string {
	rows := map[string]string{}
	b, err := os.ReadFile("RESULTS.md")
	if err != nil {
		return rows
	}
	for _, line := range strings.Split(string(b), "\n") {
		cells := strings.Split(line, " | ")
		if len(cells) < 2 || !strings.HasPrefix(line, "| ") || strings.HasPrefix(line, "| ---") || strings.HasPrefix(line, "| scenario |") {
			continue
		}
		rows[strings.TrimPrefix(cells[0], "| ")] = line
	}
	return rows
}

// submitFile runs `pipeline submit` and fails the test unless it exits 0.
func submitFile(t *testing.T, env []string, file string, conn ...string) {
	t.Helper()
	pipeline(t, "submit", env, append(append([]string{"submit"}, conn...), file)...).mustSucceed(t)
}

// 1. kill -9 of a worker process (its embedded server dies with it)
// mid-run; a second run until idle finishes.
func scenarioKill9(t *testing.T) row {
	dir := t.TempDir()
	jobs := exampleJobs(t, 200)
	env := childEnv()
	submitFile(t, env, writeJobs(t, dir, jobs), "--data-dir", dir)

	run1 := pipeline(t, "run-1", env, runArgs("--data-dir", dir)...)
	nc, js := connectJS(t, embeddedURL(t, run1, dir))
	waitStored(t, run1, js, 50)
	run1.kill9(t)
	nc.Close()

	run2 := pipeline(t, "run-2", env, runArgs("--data-dir", dir, "--until-idle")...)
	run2.mustSucceed(t)
	a := auditEmbedded(t, dir)
	r := a.check(t, "", ids(jobs))
	r.Note = "killed after >= 50 outcomes; restart --until-idle" + stranded(run2)

	// The index is rebuilt from the streams to the same ids and statuses.
	rebuilt := filepath.Join(dir, "rebuilt.db")
	pipeline(t, "dlq rebuild", env, "dlq", "rebuild", "--data-dir", dir, "--db", rebuilt).mustSucceed(t)
	idx, _ := readIndex(t, rebuilt)
	if !maps.Equal(idx, a.index) {
		t.Errorf("dlq rebuild: %d jobs in the rebuilt index, %d in the sink's, or their statuses differ", len(idx), len(a.index))
	}
	r.Note += "; dlq rebuild gives the same index"
	return r
}

// 1b. kill -9 of a worker process on an external server with MaxDeliver 1:
// every job in flight has used its only delivery, so the next run must
// catch it from the MAX_DELIVERIES advisory (or the idle sweep) and
// dead-letter it as abandoned, once, and remove it from JOBS.
func scenarioOrphans(t *testing.T) row {
	dir := t.TempDir()
	srv := &natsServer{name: "nats-orphans", port: freePort(t), storeDir: filepath.Join(dir, "nats")}
	srv.start(t)
	_, js := connectJS(t, srv.url())
	waitJetStream(t, js)

	jobs := exampleJobs(t, 200)
	env := childEnv()
	submitFile(t, env, writeJobs(t, dir, jobs), "--data-dir", dir, "--nats-url", srv.url())
	run1 := pipeline(t, "run-1", env, runArgs("--data-dir", dir, "--nats-url", srv.url(), "--max-deliver", "1")...)
	waitStored(t, run1, js, 50)
	run1.kill9(t)
	run2 := pipeline(t, "run-2", env, runArgs("--data-dir", dir, "--nats-url", srv.url(), "--max-deliver", "1", "--until-idle")...)
	run2.mustSucceed(t)

	a := collect(t, js, filepath.Join(dir, "pipeline.db"))
	r := a.check(t, "", ids(jobs))
	abandoned := 0
	for _, c := range a.classes {
		if c == "abandoned" {
			abandoned++
		}
	}
	if abandoned == 0 {
		t.Error("no job dead-lettered as abandoned: the kill hit no job in flight")
	}
	r.Note = fmt.Sprintf("worker killed with jobs in flight on their only delivery; %d dead-lettered as abandoned by the next run%s", abandoned, stranded(run2))
	return r
}

// 2. an external nats-server (JetStream, store dir) killed and restarted
// mid-run; the worker reconnects and finishes.
func scenarioServerRestart(t *testing.T) row {
	dir := t.TempDir()
	srv := &natsServer{name: "nats-restart", port: freePort(t), storeDir: filepath.Join(dir, "nats")}
	srv.start(t)
	_, js := connectJS(t, srv.url())
	waitJetStream(t, js)

	jobs := exampleJobs(t, 200)
	env := childEnv()
	submitFile(t, env, writeJobs(t, dir, jobs), "--data-dir", dir, "--nats-url", srv.url())
	run := pipeline(t, "run", env, runArgs("--data-dir", dir, "--nats-url", srv.url(), "--until-idle")...)
	waitStored(t, run, js, 50)
	srv.proc.kill9(t)
	srv.start(t)
	run.mustSucceed(t)

	waitJetStream(t, js)
	r := collect(t, js, filepath.Join(dir, "pipeline.db")).check(t, "", ids(jobs))
	r.Note = "kill -9 of nats-server after >= 50 outcomes, restarted on the same port and store"
	return r
}

// 3. three nats-server nodes in a cluster, R3 streams; the JOBS stream
// leader is killed mid-run; workers on the other two nodes finish.
func scenarioClusterNodeLost(t *testing.T) row {
	dir := t.TempDir()
	nodes := make([]*natsServer, 3)
	routes := make([]string, 3)
	clusterPorts := make([]int, 3)
	for i := range nodes {
		clusterPorts[i] = freePort(t)
		routes[i] = fmt.Sprintf("nats://127.0.0.1:%d", clusterPorts[i])
	}
	var urls []string
	for i := range nodes {
		nodes[i] = &natsServer{name: fmt.Sprintf("n%d", i+1), port: freePort(t), storeDir: filepath.Join(dir, fmt.Sprintf("n%d", i+1)),
			args: []string{"--cluster_name", "faults", "--cluster", routes[i], "--routes", strings.Join(routes, ",")}}
		urls = append(urls, nodes[i].url())
	}
	for _, n := range nodes {
		n.start(t)
	}
	all := strings.Join(urls, ",")
	nc, js := connectJS(t, all)
	waitJetStream(t, js)

	jobs := exampleJobs(t, 200)
	env := childEnv()
	submitFile(t, env, writeJobs(t, dir, jobs), "--data-dir", dir, "--nats-url", all, "--replicas", "3")

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	s, err := js.Stream(ctx, broker.StreamJobs)
	if err != nil {
		t.Fatal(err)
	}
	ci := s.CachedInfo()
	if ci.Config.Replicas != 3 || ci.Cluster == nil {
		t.Fatalf("JOBS has %d replicas (cluster %v), want 3", ci.Config.Replicas, ci.Cluster)
	}
	victim := slices.IndexFunc(nodes, func(n *natsServer) bool { return n.name == ci.Cluster.Leader })
	if victim < 0 {
		t.Fatalf("JOBS leader %q is none of the nodes", ci.Cluster.Leader)
	}
	var rest []*natsServer
	for i, n := range nodes {
		if i != victim {
			rest = append(rest, n)
		}
	}
	nc.Close()
	_, js = connectJS(t, rest[0].url()+","+rest[1].url())

	dbDir := filepath.Join(dir, "sink")
	wA := pipeline(t, "worker-"+rest[0].name, env, runArgs("--data-dir", dbDir, "--nats-url", rest[0].url(), "--replicas", "3", "--until-idle")...)
	wB := pipeline(t, "worker-"+rest[1].name, env, runArgs("--data-dir", filepath.Join(dir, "nosink"), "--nats-url", rest[1].url(), "--replicas", "3", "--until-idle", "--sink=false")...)
	waitStored(t, wA, js, 50)
	nodes[victim].proc.kill9(t)
	wA.mustSucceed(t)
	wB.mustSucceed(t)

	r := collect(t, js, filepath.Join(dbDir, "pipeline.db")).check(t, "", ids(jobs))
	r.Note = fmt.Sprintf("kill -9 of %s (JOBS leader) after >= 50 outcomes; workers on %s and %s%s", nodes[victim].name, rest[0].name, rest[1].name, stranded(wA, wB))
	return r
}

// 4. the provider answers 429 for 10 s, each asking to retry after 1 s,
// then recovers: every wait is kept, the jobs held by their workers and
// the model's calls paused (no delivery spent: nothing redelivered), no
// dead letter.
func scenarioRateLimited(t *testing.T) row {
	dir := t.TempDir()
	prov := newProvider(t, 10*time.Second)
	jobs := exampleJobs(t, 60, "invoice", "ticket")
	env := childEnv("OPENAI_API_KEY=" + testKey)
	submitFile(t, env, writeJobs(t, dir, jobs), "--data-dir", dir)
	run := pipeline(t, "run", env, providerRunArgs(prov, "--data-dir", dir, "--until-idle", "--breaker-cooldown", "2s", "--log-level", "info")...)
	run.mustSucceed(t)

	stderr := run.stderr.String()
	if want := "the provider asked to wait: pausing the model's calls"; !strings.Contains(stderr, want) {
		t.Errorf("stderr has no %q:\n%s", want, tail(stderr, 30))
	}
	if strings.Contains(stderr, testKey) {
		t.Error("the API key appears in stderr")
	}
	a := auditEmbedded(t, dir)
	r := a.check(t, "", ids(jobs))
	if len(a.dlq) != 0 {
		t.Errorf("%d jobs dead-lettered during a rate limit, want 0", len(a.dlq))
	}
	requests, ok, limited, _ := prov.stats()
	if limited == 0 {
		t.Error("the provider never answered 429")
	}
	if r.Redelivered != 0 {
		t.Errorf("%d jobs redelivered during a rate limit whose waits were kept, want 0", r.Redelivered)
	}
	r.Note = fmt.Sprintf("%d requests: %d answered 429 (Retry-After: 1), %d answered 200; the waits kept, calls paused", requests, limited, ok)
	return r
}

// 5. the provider answers 401: exit 4 with one clear error, nothing
// dead-lettered, every job still on JOBS; with the key accepted, a second
// run finishes them.
func scenarioUnauthorized(t *testing.T) row {
	dir := t.TempDir()
	prov := newProvider(t, 0)
	prov.unauthorized.Store(true)
	jobs := exampleJobs(t, 60, "invoice", "ticket")
	env := childEnv("OPENAI_API_KEY=" + testKey)
	submitFile(t, env, writeJobs(t, dir, jobs), "--data-dir", dir)

	run1 := pipeline(t, "run-401", env, providerRunArgs(prov, "--data-dir", dir, "--until-idle")...)
	if code := run1.wait(t, procWait); code != 4 {
		t.Errorf("run against a 401 provider exited %d, want 4", code)
	}
	stderr := run1.stderr.String()
	var final []string
	for _, l := range strings.Split(stderr, "\n") {
		if strings.HasPrefix(l, "pipeline: ") {
			final = append(final, l)
		}
	}
	if len(final) != 1 || !strings.Contains(final[0], "401") {
		t.Errorf("want one final error naming the 401, got %q; stderr:\n%s", final, tail(stderr, 30))
	}
	if n := strings.Count(stderr, "level=ERROR"); n > 1 {
		t.Errorf("%d error lines for one rejected key, want at most 1 before the final error:\n%s", n, tail(stderr, 30))
	}
	if strings.Contains(stderr, testKey) {
		t.Error("the API key appears in stderr")
	}
	_, _, _, denied := prov.stats()

	conn := openEmbedded(t, dir)
	p, err := queue.Pending(t.Context(), conn)
	if err != nil {
		t.Fatal(err)
	}
	if p.Jobs != uint64(len(jobs)) || p.Results != 0 || p.DeadLetters != 0 {
		t.Errorf("after the 401 run: %d jobs on JOBS (want %d), %d results, %d dead letters (want 0)", p.Jobs, len(jobs), p.Results, p.DeadLetters)
	}
	if err := conn.Close(); err != nil {
		t.Fatal(err)
	}

	prov.unauthorized.Store(false)
	pipeline(t, "run-ok", env, providerRunArgs(prov, "--data-dir", dir, "--until-idle")...).mustSucceed(t)
	a := auditEmbedded(t, dir)
	r := a.check(t, "", ids(jobs))
	if len(a.dlq) != 0 {
		t.Errorf("%d jobs dead-lettered, want 0", len(a.dlq))
	}
	r.Note = fmt.Sprintf("exit 4 after %d requests answered 401, %d lines on stderr; key accepted, second run finished", denied, strings.Count(stderr, "\n"))
	return r
}

// 5b. the connection drops (or, blackhole, goes silent without closing)
// between a job's stored result and its ack; the job comes back, and the
// job ledger (written before the ack) says its run ended: it is acked
// without asking the model, which would now fail it; the job keeps its
// result and gets no dead letter. A silent connection is found by the
// client's pings.
func scenarioLostAck(t *testing.T, blackhole bool) row {
	dir := t.TempDir()
	srv := &natsServer{name: "nats-lost-ack", port: freePort(t), storeDir: filepath.Join(dir, "nats")}
	srv.start(t)
	_, js := connectJS(t, srv.url())
	waitJetStream(t, js)
	prov := newProvider(t, 0)
	prov.changeMind.Store(true)
	jobs := exampleJobs(t, 20, "invoice", "ticket")
	target := jobs[2]
	var targetInput struct {
		Input string `json:"input"`
	}
	if err := json.Unmarshal(target.line, &targetInput); err != nil {
		t.Fatal(err)
	}
	proxy := newAckDropper(t, fmt.Sprintf("127.0.0.1:%d", srv.port), target.ID, blackhole)

	env := childEnv("OPENAI_API_KEY=" + testKey)
	submitFile(t, env, writeJobs(t, dir, jobs), "--data-dir", dir, "--nats-url", srv.url())
	run := pipeline(t, "run", env, providerRunArgs(prov, "--data-dir", dir, "--nats-url", proxy.url(), "--until-idle", "--concurrency", "1")...)
	run.mustSucceed(t)
	if !proxy.fired.Load() {
		t.Fatalf("the proxy never cut the connection before %s's ack", target.ID)
	}
	// The ledger was written before the lost ack: the redelivery is acked
	// without asking the model again.
	calls := prov.callsFor(targetInput.Input)
	if calls != 1 {
		t.Errorf("the model was asked %d times about %s, want once (the job ledger holds its run)", calls, target.ID)
	}
	a := collect(t, js, filepath.Join(dir, "pipeline.db"))
	r := a.check(t, "", ids(jobs))
	if a.results[target.ID] != 1 || a.dlq[target.ID] != 0 {
		t.Errorf("%s: %d results, %d dead letters; want its first outcome only", target.ID, a.results[target.ID], a.dlq[target.ID])
	}
	kept := strings.Count(run.stderr.String(), "already has an outcome from an earlier delivery")
	how := "connection cut"
	if blackhole {
		how = "connection silent (found by pings)"
	}
	r.Note = fmt.Sprintf("%s before %s's ack; redelivered, acked from the job ledger (model asked %d time), first outcome kept (%d kept by the other-stream check)", how, target.ID, calls, kept)
	return r
}

// 6a. 1000 lines of random bytes to submit: every line rejected with its
// number, exit 1, nothing published.
func scenarioPoisonSubmit(t *testing.T) row {
	dir := t.TempDir()
	rng := rand.New(rand.NewPCG(5, 5))
	var b strings.Builder
	const lines = 1000
	for range lines {
		n := 1 + rng.IntN(200)
		line := make([]byte, n)
		for i := range line {
			for {
				c := byte(rng.UintN(256))
				if c != '\n' && c != '\r' {
					line[i] = c
					break
				}
			}
		}
		line[0] = byte(0x21 + rng.UintN(0xff-0x21)) // not blank: every line is a bad line, none skipped
		b.Write(line)
		b.WriteByte('\n')
	}
	file := filepath.Join(dir, "random.jsonl")
	if err := os.WriteFile(file, []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	sub := pipeline(t, "submit", childEnv(), "submit", "--data-dir", dir, "--max-errors", fmt.Sprint(lines), file)
	if code := sub.wait(t, procWait); code != 1 {
		t.Errorf("submit of random bytes exited %d, want 1", code)
	}
	stderr := sub.stderr.String()
	reported := 0
	for i := 1; i <= lines; i++ {
		if strings.Contains(stderr, fmt.Sprintf("%s:%d: ", file, i)) {
			reported++
		} else if reported == i-1 {
			t.Errorf("line %d not reported with its number", i)
		}
	}
	if reported != lines {
		t.Errorf("%d of %d bad lines reported with their line number", reported, lines)
	}
	conn := openEmbedded(t, dir)
	p, err := queue.Pending(t.Context(), conn)
	if err != nil {
		t.Fatal(err)
	}
	if p.Jobs != 0 {
		t.Errorf("%d jobs published from a file of random bytes, want 0", p.Jobs)
	}
	if err := conn.Close(); err != nil {
		t.Fatal(err)
	}
	return row{Jobs: 0, Note: fmt.Sprintf("%d random lines: exit 1, %d reported as FILE:LINE, 0 published", lines, reported)}
}

// 6b. malformed messages published straight onto pipeline.jobs.<schema>
// with nats.go, among good jobs: dead-lettered as invalid_job (or
// unknown_schema) without a model call.
func scenarioPoisonPublished(t *testing.T) row {
	dir := t.TempDir()
	prov := newProvider(t, 0)
	good := exampleJobs(t, 30, "invoice", "ticket")
	rng := rand.New(rand.NewPCG(6, 6))
	junk := make([]byte, 1024)
	for i := range junk {
		junk[i] = byte(rng.UintN(256))
	}
	type bad struct {
		subject, msgID, data, class string
	}
	poison := []bad{
		{"invoice", "bad-1", "POISON not json at all", "invalid_job"},
		{"invoice", "bad-2", `{"id":"bad-2","schema":"invoice","note":"POISON no input"}`, "invalid_job"},
		{"invoice", "bad-3", `{"id":"bad 3 with a BEL\u0007","schema":"invoice","input":"POISON"}`, "invalid_job"},
		{"invoice", "bad-4", `{"id":"bad-4","schema":"ticket","input":"POISON on the wrong subject"}`, "invalid_job"},
		{"invoice", "", "", "invalid_job"},
		{"ticket", "", string(junk), "invalid_job"},
		{"ticket", "bad-7", `["POISON", 1, 2]`, "invalid_job"},
		{"ticket", "bad-8", `{"id":"bad-8","schema":"ticket","input":"POISON"} trailing`, "invalid_job"},
		{"ticket", "bad-9", `{"id":"bad-9","schema":"ticket","input":"POISON","metadata":"not an object"}`, "invalid_job"},
		{"nosuch", "bad-10", `{"id":"bad-10","schema":"nosuch","input":"POISON"}`, "unknown_schema"},
	}

	conn := openEmbedded(t, dir)
	js := conn.JetStream()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	var want []string
	for _, j := range good {
		msg := nats.NewMsg(broker.SubjectJobs + "." + j.Schema)
		msg.Data = j.line
		msg.Header.Set(jetstream.MsgIDHeader, j.ID)
		if _, err := js.PublishMsg(ctx, msg); err != nil {
			t.Fatal(err)
		}
		want = append(want, j.ID)
	}
	classOf := map[string]string{}
	for _, p := range poison {
		msg := nats.NewMsg(broker.SubjectJobs + "." + p.subject)
		msg.Data = []byte(p.data)
		if p.msgID != "" {
			msg.Header.Set(jetstream.MsgIDHeader, p.msgID)
		}
		ack, err := js.PublishMsg(ctx, msg)
		if err != nil {
			t.Fatal(err)
		}
		key := p.msgID
		if key == "" {
			key = fmt.Sprintf("%s-%d", broker.StreamJobs, ack.Sequence) // the worker's name for a job without id
		}
		want = append(want, key)
		classOf[key] = p.class
	}
	if err := conn.Close(); err != nil {
		t.Fatal(err)
	}

	env := childEnv("OPENAI_API_KEY=" + testKey)
	pipeline(t, "run", env, providerRunArgs(prov, "--data-dir", dir, "--until-idle")...).mustSucceed(t)

	a := auditEmbedded(t, dir)
	r := a.check(t, "", want)
	for key, class := range classOf {
		if got := a.classes[key]; got != class {
			t.Errorf("poison %s dead-lettered as %q, want %q", key, got, class)
		}
	}
	for _, j := range good {
		if a.results[j.ID] != 1 {
			t.Errorf("good job %s among the poison: %d results, want 1", j.ID, a.results[j.ID])
		}
	}
	requests, _, _, _ := prov.stats()
	for _, body := range prov.requestBodies() {
		if strings.Contains(body, "POISON") {
			t.Errorf("the model was called for a poison message: %.200s", body)
		}
	}
	if requests != len(good) {
		t.Errorf("the model got %d requests for %d good jobs (fixtures are valid at once), want one each", requests, len(good))
	}
	r.Note = fmt.Sprintf("%d good + %d malformed published with nats.go; %d model calls, none for poison", len(good), len(poison), requests)
	return r
}

// 7. the SQLite index locked by another process (BEGIN EXCLUSIVE) for hold
// mid-run: the sink waits (5s, inside index.BusyTimeout) or fails its write,
// hands the batch back and retries (20s, beyond it); nothing is lost.
func scenarioSQLiteLocked(t *testing.T, hold time.Duration) row {
	dir := t.TempDir()
	db := filepath.Join(dir, "pipeline.db")
	jobs := exampleJobs(t, 200)
	env := childEnv()
	submitFile(t, env, writeJobs(t, dir, jobs), "--data-dir", dir)
	run := pipeline(t, "run", env, runArgs("--data-dir", dir, "--until-idle")...)
	_, js := connectJS(t, embeddedURL(t, run, dir))
	waitStored(t, run, js, 30)

	stdinR, stdinW, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdinW.Close()
	locker := &proc{name: "locker", done: make(chan struct{})}
	locker.cmd = newLockerCmd(db, hold.String())
	locker.cmd.Stdin = stdinR
	locker.cmd.Stdout = &locker.stdout
	locker.cmd.Stderr = &locker.stderr
	if err := locker.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	stdinR.Close()
	go func() {
		_ = locker.cmd.Wait()
		locker.code = locker.cmd.ProcessState.ExitCode()
		close(locker.done)
	}()
	t.Cleanup(func() {
		_ = locker.cmd.Process.Kill()
		<-locker.done
	})
	waitLine := func(word string) {
		poll.Until(t, 30*time.Second, "locker: "+word, func() bool {
			out := locker.stdout.String()
			if strings.Contains(out, "ERR") || locker.exited() && !strings.Contains(out, word) {
				t.Fatalf("locker: %s%s", out, locker.stderr.String())
			}
			return strings.Contains(out, word)
		})
	}
	waitLine("LOCKED")
	idx, _ := readIndex(t, db)
	before := len(idx)
	waitLine("RELEASING")
	idx, _ = readIndex(t, db)
	during := len(idx)
	if during != before {
		t.Errorf("the index grew from %d to %d while another process held the lock: the fault did not hold", before, during)
	}
	if _, err := stdinW.WriteString("go\n"); err != nil {
		t.Fatal(err)
	}
	if code := locker.wait(t, 30*time.Second); code != 0 {
		t.Fatalf("locker exited %d: %s", code, locker.stdout.String())
	}
	run.mustSucceed(t)
	r := auditEmbedded(t, dir).check(t, "", ids(jobs))
	r.Note = fmt.Sprintf("index held %d outcomes through the %v lock, sink caught up after", before, hold)
	if n := strings.Count(run.stderr.String(), "sink write failed"); n > 0 {
		r.Note += fmt.Sprintf(" (%d failed writes handed back and retried)", n)
	}
	return r
}

// 8. SIGTERM with jobs in flight: exit 0 within the grace (plus the sink's
// flush), the rest handed back and finished by the next run.
func scenarioSIGTERM(t *testing.T, grace time.Duration) row {
	dir := t.TempDir()
	jobs := exampleJobs(t, 200)
	env := childEnv()
	submitFile(t, env, writeJobs(t, dir, jobs), "--data-dir", dir)
	run1 := pipeline(t, "run-1", env, runArgs("--data-dir", dir, "--shutdown-grace", grace.String())...)
	nc, js := connectJS(t, embeddedURL(t, run1, dir))
	waitStored(t, run1, js, 40)
	nc.Close()
	sent := time.Now()
	run1.signal(t, syscall.SIGTERM)
	// A hang detector, not a timing assertion: grace plus the sink's flush.
	code := run1.wait(t, grace+45*time.Second)
	took := time.Since(sent)
	if code != 0 {
		t.Errorf("run exited %d after SIGTERM, want 0; stderr:\n%s", code, tail(run1.stderr.String(), 20))
	}

	conn := openEmbedded(t, dir)
	p, err := queue.Pending(t.Context(), conn)
	if err != nil {
		t.Fatal(err)
	}
	left := p.Jobs
	if left == 0 {
		t.Errorf("nothing left on JOBS after SIGTERM: the fault hit no work (stored %d+%d)", p.Results, p.DeadLetters)
	}
	if err := conn.Close(); err != nil {
		t.Fatal(err)
	}

	pipeline(t, "run-2", env, runArgs("--data-dir", dir, "--until-idle")...).mustSucceed(t)
	r := auditEmbedded(t, dir).check(t, "", ids(jobs))
	r.Note = fmt.Sprintf("exit %d %.1fs after SIGTERM; %d jobs left for the next run", code, took.Seconds(), left)
	return r
}

// stranded names the answered jobs the workers found left on JOBS (and
// removed instead of dead-lettering them again), if any.
func stranded(ps ...*proc) string {
	n := 0
	for _, p := range ps {
		n += strings.Count(p.stderr.String(), "left in the work queue after its outcome was stored")
	}
	if n == 0 {
		return ""
	}
	return fmt.Sprintf("; %d answered jobs found left on JOBS and removed", n)
}
