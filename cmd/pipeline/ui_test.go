package main

import (
	"context"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/llmpipeline/pipeline/index"
	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/secret"
	"github.com/llmpipeline/pipeline/schemas"
	"github.com/llmpipeline/pipeline/ui"
)

// partSchema writes the schema "part" into dir: with a pattern the
// simulator never satisfies, or without it (the fix).
func partSchema(t *testing.T, dir string, fixed bool) {
	t.Helper()
	pattern := `,"pattern":"^P-[0-9]{6}$"`
	if fixed {
		pattern = ""
	}
	s := `{"type":"object","required":["code","name"],"properties":{"name":{"type":"string"},"code":{"type":"string"` + pattern + `}}}`
	if err := os.WriteFile(filepath.Join(dir, "part.json"), []byte(s), 0o600); err != nil {
		t.Fatal(err)
	}
}

const partJobs = `{"id":"p1","schema":"part","input":"part P-000001, a bolt"}
{"id":"p2","schema":"part","input":"part P-000002, a nut"}
`

// deadParts makes a data dir whose two part jobs are dead letters.
func deadParts(t *testing.T, schemaDir string) string {
	t.Helper()
	dir := t.TempDir()
	common := []string{"--data-dir", dir, "--schemas", schemaDir}
	mustCLI(t, partJobs, append(append([]string{"submit"}, common...), "-")...)
	mustCLI(t, "", append([]string{"run", "--until-idle", "--sim-latency", "0", "--sim-fault-scale", "0"}, common...)...)
	return dir
}

// console serves the console over a data dir, as `pipeline ui` does.
func console(t *testing.T, dir, schemaDir string) (*httptest.Server, *broker.Conn, *index.Store) {
	t.Helper()
	conn, err := broker.Connect(t.Context(), broker.Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	st, err := index.Open(filepath.Join(dir, "pipeline.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	h, err := ui.New(ui.Config{Store: st, Conn: conn, Secrets: secret.New(conn.Secrets()...),
		LoadSchemas: func() (*schemas.Registry, error) { return schemas.Load(schemaDir) }})
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, conn, st
}

// jobMessages reads the JOBS stream by sequence: message id -> subject and data.
func jobMessages(t *testing.T, ctx context.Context, conn *broker.Conn) map[string]string {
	t.Helper()
	s, err := conn.JetStream().Stream(ctx, broker.StreamJobs)
	if err != nil {
		t.Fatal(err)
	}
	info, err := s.Info(ctx)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for seq := info.State.FirstSeq; info.State.Msgs > 0 && seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("reading JOBS message %d: %v", seq, err)
		}
		out[m.Header.Get("Nats-Msg-Id")] = m.Subject + " " + string(m.Data)
	}
	return out
}

var csrfField = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// TestConsoleReplayPublishesWhatDLQReplayDoes: two data dirs with the same
// dead letters; one is replayed with `pipeline dlq replay --schema part`,
// the other from the console's page; JOBS then holds the same messages
// (message ids, subjects, bytes) in both, and both indexes mark the dead
// letters replayed.
func TestConsoleReplayPublishesWhatDLQReplayDoes(t *testing.T) {
	t.Parallel()
	schemaDir := t.TempDir()
	partSchema(t, schemaDir, false)
	cliDir, uiDir := deadParts(t, schemaDir), deadParts(t, schemaDir)

	out := mustCLI(t, "", "dlq", "replay", "--data-dir", cliDir, "--schema", "part")
	if !strings.Contains(out, "replayed 2 jobs, 0 failed") {
		t.Fatalf("dlq replay: %q", out)
	}

	srv, conn, _ := console(t, uiDir, schemaDir)
	jar, _ := cookiejar.New(nil)
	browser := &http.Client{Jar: jar} // the CSRF token is the session's
	resp, err := browser.Get(srv.URL + "/dead-letters?schema=part")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	m := csrfField.FindSubmatch(page)
	if m == nil {
		t.Fatal("no CSRF token on the dead letters page")
	}
	post := func(form url.Values) string {
		t.Helper()
		resp, err := browser.PostForm(srv.URL+"/actions/replay", form)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("replay from the page: %d %s", resp.StatusCode, b)
		}
		return string(b)
	}
	dry := post(url.Values{"csrf": {string(m[1])}, "schema": {"part"}})
	if !strings.Contains(dry, "would replay 2 jobs") {
		t.Fatalf("the page's dry run does not say it would replay 2 jobs")
	}
	done := post(url.Values{"csrf": {string(m[1])}, "confirm": {"yes"}, "id": {"p1", "p2"}})
	if !strings.Contains(done, "replayed 2 jobs, 0 failed") {
		t.Fatalf("the page's replay did not replay 2 jobs")
	}
	fromUI := jobMessages(t, t.Context(), conn)

	cliConn, err := broker.Connect(t.Context(), broker.Config{DataDir: cliDir})
	if err != nil {
		t.Fatal(err)
	}
	defer cliConn.Close()
	fromCLI := jobMessages(t, t.Context(), cliConn)
	if len(fromCLI) != 2 || len(fromUI) != len(fromCLI) {
		t.Fatalf("JOBS after dlq replay: %v; after the console's: %v", fromCLI, fromUI)
	}
	for id, msg := range fromCLI {
		if fromUI[id] != msg {
			t.Errorf("message %s: dlq replay published %q, the console %q", id, msg, fromUI[id])
		}
	}
	for _, id := range []string{"p1~r1", "p2~r1"} {
		if _, ok := fromUI[id]; !ok {
			t.Errorf("no message %s on JOBS: %v", id, fromUI)
		}
	}
	for name, dir := range map[string]string{"cli": cliDir, "ui": uiDir} {
		replayed := jsonLines(t, mustCLI(t, "", "dlq", "list", "--json", "--replayed", "--data-dir", dir))
		if len(replayed) != 2 || replayed[0]["replayed"] != true || replayed[1]["replayed"] != true {
			t.Errorf("%s: dead letters after the replay: %v", name, replayed)
		}
	}
}

func TestUIRefusesOtherAddressesWithoutToken(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, args := range [][]string{
		{"ui", "--data-dir", dir, "--addr", "0.0.0.0:0"},
		{"ui", "--data-dir", dir, "--addr", ":0"},
		{"run", "--data-dir", dir, "--until-idle", "--ui-addr", "0.0.0.0:0"},
	} {
		_, stderr, code := runCLI(t, "", args...)
		if code != exitUsage || !strings.Contains(stderr, "not loopback") || !strings.Contains(stderr, "--ui-token") {
			t.Errorf("%v: exit %d, %q; want exit 2 naming the token", args, code, stderr)
		}
	}
}

// TestUIOnAnEmptyDataDir: `ui` on a data dir without pipeline data says so
// (exit 3) and creates nothing there: no NATS store, no streams, no index.
func TestUIOnAnEmptyDataDir(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	_, stderr, code := runCLI(t, "", "ui", "--data-dir", dir, "--addr", "127.0.0.1:0")
	if code != exitRuntime || !strings.Contains(stderr, "no pipeline data in "+dir+" yet") || !strings.Contains(stderr, "pipeline run") {
		t.Errorf("ui on an empty data dir: exit %d, %q; want exit 3 saying there is no data yet", code, stderr)
	}
	if es, err := os.ReadDir(dir); err != nil || len(es) != 0 {
		t.Errorf("ui on an empty data dir left %v (%v) behind", es, err)
	}
}

// TestUITokenStrength: a token shorter than 16 characters is refused for
// an address that is not loopback, with the rule named.
func TestUITokenStrength(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	for _, args := range [][]string{
		{"ui", "--data-dir", dir, "--addr", "0.0.0.0:0", "--ui-token", "x"},
		{"run", "--data-dir", dir, "--until-idle", "--ui-addr", "0.0.0.0:0", "--ui-token", "0123456789abcde"},
	} {
		_, stderr, code := runCLI(t, "", args...)
		if code != exitUsage || !strings.Contains(stderr, "at least 16 characters") {
			t.Errorf("%v: exit %d, %q; want exit 2 naming the rule", args, code, stderr)
		}
	}
}
