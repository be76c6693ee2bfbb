package faults

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	neturl "net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmpipeline/pipeline/internal/poll"
)

// Settings shared by the scenarios.
const (
	simLatency = "200ms" // work is in flight when a fault hits
	ackWait    = "2s"    // a dead worker's jobs come back quickly
	procWait   = 150 * time.Second
)

// lockedBuffer collects a child process's output for concurrent reads.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// proc is a child process (pipeline or nats-server).
type proc struct {
	name   string
	cmd    *exec.Cmd
	stdout lockedBuffer
	stderr lockedBuffer
	done   chan struct{}
	code   int // after done: the exit code, -1 when killed by a signal
}

// childEnv is this process's environment without anything that would
// steer the pipeline (PIPELINE_*, NATS_*, provider keys), plus extra.
func childEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		if strings.HasPrefix(k, "PIPELINE_") || strings.HasPrefix(k, "NATS_") ||
			strings.HasPrefix(k, "OPENAI_") || strings.HasPrefix(k, "ANTHROPIC_") || k == lockerEnv {
			continue
		}
		env = append(env, kv)
	}
	return append(env, extra...)
}

// start runs a child process; it is killed at the end of the test if it
// is still running, and its stderr is logged if the test failed.
func start(t *testing.T, name string, env []string, path string, args ...string) *proc {
	t.Helper()
	p := &proc{name: name, done: make(chan struct{})}
	p.cmd = exec.Command(path, args...)
	p.cmd.Env = env
	p.cmd.Stdout = &p.stdout
	p.cmd.Stderr = &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("starting %s: %v", name, err)
	}
	go func() {
		_ = p.cmd.Wait()
		p.code = p.cmd.ProcessState.ExitCode()
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("%s (exit %d) stderr:\n%s", name, p.code, tail(p.stderr.String(), 40))
		}
	})
	return p
}

// pipeline starts the pipeline binary.
func pipeline(t *testing.T, name string, env []string, args ...string) *proc {
	t.Helper()
	return start(t, name, env, bins.pipeline, args...)
}

// pipelineMeasured starts the pipeline binary under the measuring launcher
// (runMeasured); peakRSSMB reads its peak RSS once it has exited.
func pipelineMeasured(t *testing.T, name string, env []string, args ...string) (p *proc, peakRSSMB func() int64) {
	t.Helper()
	out := filepath.Join(t.TempDir(), "peak-rss")
	p = start(t, name, append(env, peakRSSEnv+"="+out), os.Args[0], append([]string{bins.pipeline}, args...)...)
	return p, func() int64 {
		t.Helper()
		<-p.done
		b, err := os.ReadFile(out)
		if err != nil {
			t.Fatalf("%s: the measuring launcher wrote no peak RSS: %v", name, err)
		}
		kb, err := strconv.ParseInt(string(b), 10, 64)
		if err != nil {
			t.Fatalf("%s: peak RSS %q: %v", name, b, err)
		}
		return kb / 1024
	}
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// wait waits for the process to exit and returns its exit code.
func (p *proc) wait(t *testing.T, timeout time.Duration) int {
	t.Helper()
	select {
	case <-p.done:
		return p.code
	case <-time.After(timeout):
		t.Fatalf("%s did not exit within %v; stderr:\n%s", p.name, timeout, tail(p.stderr.String(), 40))
		return 0
	}
}

// mustSucceed waits for the process and fails the test unless it exited 0.
func (p *proc) mustSucceed(t *testing.T) {
	t.Helper()
	if code := p.wait(t, procWait); code != 0 {
		t.Fatalf("%s exited %d; stderr:\n%s", p.name, code, tail(p.stderr.String(), 40))
	}
}

func (p *proc) signal(t *testing.T, sig syscall.Signal) {
	t.Helper()
	if err := p.cmd.Process.Signal(sig); err != nil && !p.exited() {
		t.Fatalf("sending %v to %s: %v", sig, p.name, err)
	}
}

// kill9 kills the process with SIGKILL and waits for it.
func (p *proc) kill9(t *testing.T) {
	t.Helper()
	p.signal(t, syscall.SIGKILL)
	<-p.done
}

func tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = append([]string{fmt.Sprintf("... (%d lines before)", len(lines)-n)}, lines[len(lines)-n:]...)
	}
	return strings.Join(lines, "\n")
}

// freePort returns a loopback port that was free a moment ago.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// job is one line of examples/jobs.jsonl.
type job struct {
	ID     string `json:"id"`
	Schema string `json:"schema"`
	line   []byte
}

// exampleJobs returns the first n shipped example jobs of the given
// schemas (all schemas when none are given).
func exampleJobs(t *testing.T, n int, schemas ...string) []job {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "examples", "jobs.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var out []job
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() && len(out) < n {
		var j job
		if err := json.Unmarshal(sc.Bytes(), &j); err != nil {
			t.Fatalf("examples/jobs.jsonl: %v", err)
		}
		if len(schemas) > 0 && !slices.Contains(schemas, j.Schema) {
			continue
		}
		j.line = slices.Clone(sc.Bytes())
		out = append(out, j)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	if len(out) < n {
		t.Fatalf("examples/jobs.jsonl has %d jobs of %v, want %d", len(out), schemas, n)
	}
	return out
}

// writeJobs writes jobs as a JSONL file and returns its path.
func writeJobs(t *testing.T, dir string, jobs []job) string {
	t.Helper()
	var b bytes.Buffer
	for _, j := range jobs {
		b.Write(j.line)
		b.WriteByte('\n')
	}
	path := filepath.Join(dir, "jobs.jsonl")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path
}

func ids(jobs []job) []string {
	out := make([]string, len(jobs))
	for i, j := range jobs {
		out[i] = j.ID
	}
	return out
}

// runArgs are the `pipeline run` flags every scenario uses.
func runArgs(extra ...string) []string {
	return append([]string{"run", "--model", "sim", "--sim-latency", simLatency, "--ack-wait", ackWait,
		"--concurrency", "16", "--log-level", logLevel()}, extra...)
}

// logLevel of the pipeline processes: warn, or FAULTS_LOG_LEVEL to debug
// a scenario (their stderr is printed when it fails).
func logLevel() string {
	if l := os.Getenv("FAULTS_LOG_LEVEL"); l != "" {
		return l
	}
	return "warn"
}

// embeddedURL waits until the pipeline process p publishes the URL of its
// embedded server in <dir>/nats.json.
func embeddedURL(t *testing.T, p *proc, dir string) string {
	t.Helper()
	var url string
	poll.Until(t, 30*time.Second, p.name+"'s embedded server", func() bool {
		if p.exited() {
			t.Fatalf("%s exited %d before its server was up; stderr:\n%s", p.name, p.code, tail(p.stderr.String(), 40))
		}
		b, err := os.ReadFile(filepath.Join(dir, "nats.json"))
		if err != nil {
			return false
		}
		var info struct {
			URL string `json:"url"`
			PID int    `json:"pid"`
		}
		if json.Unmarshal(b, &info) != nil || info.PID != p.cmd.Process.Pid {
			return false
		}
		url = info.URL
		return true
	})
	return withCredentials(t, url, dir)
}

// withCredentials puts the data dir's embedded-server credentials
// (<dir>/nats-auth.json) into url, as an operator's tool would use them.
func withCredentials(t *testing.T, url, dir string) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "nats-auth.json"))
	if err != nil {
		t.Fatalf("reading the embedded server's credentials: %v", err)
	}
	var auth struct {
		User     string `json:"user"`
		Password string `json:"password"`
	}
	if err := json.Unmarshal(b, &auth); err != nil {
		t.Fatalf("reading the embedded server's credentials: %v", err)
	}
	u, err := neturl.Parse(url)
	if err != nil {
		t.Fatal(err)
	}
	u.User = neturl.UserPassword(auth.User, auth.Password)
	return u.String()
}

// connectJS connects a test client; it never reconnects forever.
func connectJS(t *testing.T, url string) (*nats.Conn, jetstream.JetStream) {
	t.Helper()
	nc, err := nats.Connect(url, nats.Name("faults-test"), nats.MaxReconnects(-1), nats.ReconnectWait(100*time.Millisecond))
	if err != nil {
		t.Fatalf("connecting to %s: %v", url, err)
	}
	t.Cleanup(nc.Close)
	js, err := jetstream.New(nc)
	if err != nil {
		t.Fatal(err)
	}
	return nc, js
}

// storedCount is the number of messages on RESULTS and DLQ.
func storedCount(ctx context.Context, js jetstream.JetStream) (uint64, error) {
	var n uint64
	for _, name := range []string{broker.StreamResults, broker.StreamDLQ} {
		s, err := js.Stream(ctx, name)
		if err != nil {
			return 0, err
		}
		n += s.CachedInfo().State.Msgs
	}
	return n, nil
}

// waitStored waits until at least n outcomes are on the streams, while
// the process p (the one the fault is aimed at) still runs.
func waitStored(t *testing.T, p *proc, js jetstream.JetStream, n uint64) {
	t.Helper()
	poll.Until(t, 60*time.Second, fmt.Sprintf("%d outcomes on the streams", n), func() bool {
		if p.exited() {
			t.Fatalf("%s exited %d before the fault; stderr:\n%s", p.name, p.code, tail(p.stderr.String(), 40))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		got, err := storedCount(ctx, js)
		return err == nil && got >= n
	})
}

// row is one line of the results table.
type row struct {
	Scenario    string
	Jobs        int // submitted (or published) job ids
	Results     int // distinct ids on RESULTS
	DeadLetters int // distinct ids on DLQ
	Lost        int // submitted ids on neither stream
	Duplicated  int // ids stored more than once (on a stream, or on both)
	Redelivered int // outcomes whose job was delivered more than once (from the index)
	Note        string
}

// audit reads the outcome of a scenario from the streams and the index and
// checks the invariants: every id exactly once as a result or a dead
// letter, nothing doubled, nothing left on JOBS, the index agrees.
type audit struct {
	results map[string]int    // msg id -> messages on RESULTS
	dlq     map[string]int    // msg id -> messages on DLQ
	classes map[string]string // msg id -> dead-letter class
	jobs    uint64            // messages left on JOBS
	pending uint64
	unacked int
	index   map[string]bool // job id -> dead, from the SQLite index
	redeliv int
}

// readStream reads every message of a stream by sequence.
func readStream(ctx context.Context, js jetstream.JetStream, name string, fn func(*jetstream.RawStreamMsg) error) error {
	s, err := js.Stream(ctx, name)
	if err != nil {
		return fmt.Errorf("looking up %s: %w", name, err)
	}
	st := s.CachedInfo().State
	if st.Msgs == 0 {
		return nil
	}
	for seq := st.FirstSeq; seq <= st.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if errors.Is(err, jetstream.ErrMsgNotFound) {
			continue
		}
		if err != nil {
			return fmt.Errorf("reading %s seq %d: %w", name, seq, err)
		}
		if err := fn(m); err != nil {
			return err
		}
	}
	return nil
}

// collect reads the streams through js and the index at dbPath ("" for
// none).
func collect(t *testing.T, js jetstream.JetStream, dbPath string) audit {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	a := audit{results: map[string]int{}, dlq: map[string]int{}, classes: map[string]string{}}
	for _, s := range []struct {
		name string
		m    map[string]int
	}{{broker.StreamResults, a.results}, {broker.StreamDLQ, a.dlq}} {
		err := readStream(ctx, js, s.name, func(m *jetstream.RawStreamMsg) error {
			id := m.Header.Get(jetstream.MsgIDHeader)
			var o struct {
				JobID  string `json:"job_id"`
				Status string `json:"status"`
				Class  string `json:"class"`
			}
			if err := json.Unmarshal(m.Data, &o); err != nil {
				return fmt.Errorf("%s seq %d is not an outcome: %w", s.name, m.Sequence, err)
			}
			if id == "" {
				return fmt.Errorf("%s seq %d (job %s) has no Nats-Msg-Id", s.name, m.Sequence, o.JobID)
			}
			if o.JobID != id {
				t.Errorf("%s seq %d: Nats-Msg-Id %q but job_id %q", s.name, m.Sequence, id, o.JobID)
			}
			s.m[id]++
			if s.name == broker.StreamDLQ {
				a.classes[id] = o.Class
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	jobs, err := js.Stream(ctx, broker.StreamJobs)
	if err != nil {
		t.Fatalf("looking up %s: %v", broker.StreamJobs, err)
	}
	a.jobs = jobs.CachedInfo().State.Msgs
	cons, err := js.Consumer(ctx, broker.StreamJobs, broker.WorkerConsumer)
	if err != nil {
		t.Fatalf("looking up the workers consumer: %v", err)
	}
	a.pending = cons.CachedInfo().NumPending
	a.unacked = cons.CachedInfo().NumAckPending
	if dbPath != "" {
		a.index, a.redeliv = readIndex(t, dbPath)
	}
	return a
}

// readIndex reads job ids and statuses from the SQLite index.
func readIndex(t *testing.T, path string) (map[string]bool, int) {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro&_busy_timeout=10000")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT job_id, dead, deliveries FROM outcomes WHERE run = 0`)
	if err != nil {
		t.Fatalf("reading the index %s: %v", path, err)
	}
	defer rows.Close()
	idx := map[string]bool{}
	redelivered := 0
	for rows.Next() {
		var id string
		var dead bool
		var deliveries int
		if err := rows.Scan(&id, &dead, &deliveries); err != nil {
			t.Fatal(err)
		}
		if _, dup := idx[id]; dup {
			t.Errorf("index: job %s twice", id)
		}
		idx[id] = dead
		if deliveries > 1 {
			redelivered++
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return idx, redelivered
}

// check asserts the invariants for the submitted ids and returns the row.
func (a audit) check(t *testing.T, scenario string, submitted []string) row {
	t.Helper()
	r := row{Scenario: scenario, Jobs: len(submitted), Results: len(a.results), DeadLetters: len(a.dlq), Redelivered: a.redeliv}
	want := map[string]bool{}
	for _, id := range submitted {
		if want[id] {
			t.Fatalf("test bug: id %s submitted twice", id)
		}
		want[id] = true
		nr, nd := a.results[id], a.dlq[id]
		switch {
		case nr+nd == 0:
			r.Lost++
			t.Errorf("lost: job %s is neither a result nor a dead letter", id)
		case nr+nd > 1:
			r.Duplicated++
			t.Errorf("duplicated: job %s stored %d times on RESULTS and %d on DLQ (dead-letter class %q)", id, nr, nd, a.classes[id])
		}
	}
	for _, m := range []map[string]int{a.results, a.dlq} {
		for id := range m {
			if !want[id] {
				t.Errorf("outcome for job %s, which was never submitted", id)
			}
		}
	}
	if a.jobs != 0 || a.pending != 0 || a.unacked != 0 {
		t.Errorf("left on JOBS: %d messages, %d pending, %d unacked", a.jobs, a.pending, a.unacked)
	}
	if a.index != nil {
		if len(a.index) != len(a.results)+len(a.dlq) {
			t.Errorf("index holds %d jobs, the streams %d results and %d dead letters", len(a.index), len(a.results), len(a.dlq))
		}
		for id, dead := range a.index {
			_, isResult := a.results[id]
			_, isDead := a.dlq[id]
			if (dead && !isDead) || (!dead && !isResult) {
				t.Errorf("index: job %s dead=%v disagrees with the streams (result %v, dead letter %v)", id, dead, isResult, isDead)
			}
		}
	}
	return r
}

// auditEmbedded opens the data dir's store with an embedded server of its
// own (the pipeline processes have exited) and audits it.
func auditEmbedded(t *testing.T, dir string) audit {
	t.Helper()
	conn := openEmbedded(t, dir)
	a := collect(t, conn.JetStream(), filepath.Join(dir, "pipeline.db"))
	if err := conn.Close(); err != nil {
		t.Errorf("closing the audit server: %v", err)
	}
	return a
}

// openEmbedded starts (or joins) the embedded server on a data dir in
// this process.
func openEmbedded(t *testing.T, dir string) *broker.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := broker.Connect(ctx, broker.Config{DataDir: dir})
	if err != nil {
		t.Fatalf("opening the store in %s: %v", dir, err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	return conn
}

// natsServer is one external nats-server process.
type natsServer struct {
	name     string
	port     int
	args     []string
	proc     *proc
	storeDir string
}

func (s *natsServer) url() string { return fmt.Sprintf("nats://127.0.0.1:%d", s.port) }

// startNATS starts (or restarts) a nats-server with JetStream on its port
// and store dir, and waits until it accepts clients.
func (s *natsServer) start(t *testing.T) {
	t.Helper()
	args := append([]string{"-a", "127.0.0.1", "-p", fmt.Sprint(s.port), "-js", "-sd", s.storeDir,
		"--server_name", s.name}, s.args...)
	s.proc = start(t, s.name, childEnv(), bins.natsServer, args...)
	poll.Until(t, 30*time.Second, s.name+" accepting clients", func() bool {
		if s.proc.exited() {
			t.Fatalf("%s exited %d; stderr:\n%s", s.name, s.proc.code, tail(s.proc.stderr.String(), 20))
		}
		c, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", s.port), time.Second)
		if err != nil {
			return false
		}
		c.Close()
		return true
	})
}

// waitJetStream waits until JetStream answers through url (a cluster has
// elected its meta leader).
func waitJetStream(t *testing.T, js jetstream.JetStream) {
	t.Helper()
	poll.Until(t, 60*time.Second, "jetstream ready", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := js.AccountInfo(ctx)
		return err == nil
	})
}
