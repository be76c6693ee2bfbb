package ui_test

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/index"
	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/secret"
	"github.com/llmpipeline/pipeline/job"
	"github.com/llmpipeline/pipeline/ui"
)

// secretKey is in one raw output of the dataset: no page may show it.
const secretKey = "sk-test-UI-SECRET-0123456789"

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func jobJSON(id, schema string) json.RawMessage {
	b, _ := json.Marshal(map[string]string{"id": id, "schema": schema, "input": "text of " + id})
	return b
}

// dataset is the hand-built index of the tests: invoice (version
// v1aaaaaaaaaa) has 2 successes (one healed at attempt 2) and 3 dead
// letters (exhausted, failing /code [pattern] at both attempts, received
// "X-1", "X-2", "X-1"); ticket has one dead letter (no_progress, model
// openai:gpt-test) whose raw output holds secretKey.
func dataset() []job.Outcome {
	ok := func(a job.Attempt) job.Attempt { a.Raw = `{"code":"P-1"}`; return a }
	pattern := func(recv string) job.Diagnostic {
		return job.Diagnostic{Path: "/code", Keyword: "pattern", Message: "does not match pattern", Expected: "^P-[0-9]+$", Received: `"` + recv + `"`}
	}
	var outs []job.Outcome
	outs = append(outs,
		job.Outcome{JobID: "inv-1", Schema: "invoice", SchemaVersion: "v1aaaaaaaaaa", Status: job.StatusSucceeded, Model: "sim", Attempts: 1,
			Data: json.RawMessage(`{"code":"P-1"}`), Job: jobJSON("inv-1", "invoice"),
			Trace:     []job.Attempt{ok(job.Attempt{N: 1, Temperature: 0.7, PromptTokens: 100, CompletionTokens: 50, LatencyMS: 20})},
			StartedAt: t0, FinishedAt: t0.Add(time.Second)},
		job.Outcome{JobID: "inv-2", Schema: "invoice", SchemaVersion: "v1aaaaaaaaaa", Status: job.StatusSucceeded, Model: "sim", Attempts: 2,
			Data: json.RawMessage(`{"code":"P-1"}`), Job: jobJSON("inv-2", "invoice"),
			Trace: []job.Attempt{
				{N: 1, Temperature: 0.7, Raw: `{"total":"12"}`, Class: "schema", Diagnostics: []job.Diagnostic{{Path: "/total", Keyword: "type", Message: "want number", Received: `"12"`}}, PromptTokens: 100, CompletionTokens: 50},
				ok(job.Attempt{N: 2, Temperature: 0.5, PromptTokens: 200, CompletionTokens: 50}),
			},
			StartedAt: t0.Add(time.Minute), FinishedAt: t0.Add(time.Minute + time.Second)},
	)
	for i, recv := range []string{"X-1", "X-2", "X-1"} {
		id := "inv-" + string(rune('3'+i))
		outs = append(outs, job.Outcome{JobID: id, Schema: "invoice", SchemaVersion: "v1aaaaaaaaaa", Status: job.StatusDeadLettered,
			Class: "exhausted", Reason: "heal attempts used up: /code still fails", Model: "sim", Attempts: 2, Job: jobJSON(id, "invoice"),
			Trace: []job.Attempt{
				{N: 1, Temperature: 0.7, Raw: "```json\n{\"code\":\"" + recv + "\"}\n```", Repairs: []string{"code_fence"}, Class: "schema", Diagnostics: []job.Diagnostic{pattern(recv)}, PromptTokens: 100, CompletionTokens: 40, LatencyMS: 31},
				{N: 2, Temperature: 0.5, Raw: `{"code":"` + recv + `"}`, Class: "schema", Diagnostics: []job.Diagnostic{pattern(recv)}, PromptTokens: 180, CompletionTokens: 40, LatencyMS: 29},
			},
			Deliveries: 1, StartedAt: t0.Add(time.Duration(2+i) * time.Minute), FinishedAt: t0.Add(time.Duration(2+i)*time.Minute + 2*time.Second)})
	}
	outs = append(outs, job.Outcome{JobID: "tk-1", Schema: "ticket", SchemaVersion: "t1bbbbbbbbbb", Status: job.StatusDeadLettered,
		Class: "no_progress", Reason: "the same diagnostics twice", Model: "openai:gpt-test", Attempts: 2, Job: jobJSON("tk-1", "ticket"),
		Trace: []job.Attempt{
			{N: 1, Temperature: 0.7, Raw: `{"subject":null,"note":"key ` + secretKey + `"}`, Class: "schema", Diagnostics: []job.Diagnostic{{Path: "/subject", Keyword: "type", Message: "want string", Received: "null"}}, PromptTokens: 90, CompletionTokens: 30},
			{N: 2, Temperature: 0.5, Raw: `{"subject":null}`, Class: "no_progress", Diagnostics: []job.Diagnostic{{Path: "/subject", Keyword: "type", Message: "want string", Received: "null"}}, PromptTokens: 120, CompletionTokens: 20},
		},
		StartedAt: t0.Add(10 * time.Minute), FinishedAt: t0.Add(10*time.Minute + time.Second)})
	return outs
}

// fixture is a console over a real index and a real embedded server.
type fixture struct {
	st   *index.Store
	conn *broker.Conn
	srv  *httptest.Server
	c    *http.Client
}

func newFixture(t *testing.T, mod func(*ui.Config)) *fixture {
	t.Helper()
	ctx := t.Context()
	dir := t.TempDir()
	st, err := index.Open(filepath.Join(dir, "pipeline.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.Write(ctx, dataset()); err != nil {
		t.Fatal(err)
	}
	conn, err := broker.Connect(ctx, broker.Config{DataDir: filepath.Join(dir, "data")})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	cfg := ui.Config{Store: st, Conn: conn, Secrets: secret.New(secretKey), Now: func() time.Time { return t0.Add(11 * time.Minute) }}
	if mod != nil {
		mod(&cfg)
	}
	h, err := ui.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	jar, _ := cookiejar.New(nil)
	return &fixture{st: st, conn: conn, srv: srv, c: &http.Client{Jar: jar}}
}

// get fetches a page and fails the test unless it answers want.
func (f *fixture) get(t *testing.T, path string, want int) string {
	t.Helper()
	resp, err := f.c.Get(f.srv.URL + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if resp.StatusCode != want {
		t.Fatalf("GET %s: %d, want %d: %s", path, resp.StatusCode, want, b)
	}
	return string(b)
}

func (f *fixture) post(t *testing.T, path string, form url.Values) (int, string) {
	t.Helper()
	resp, err := f.c.PostForm(f.srv.URL+path, form)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

var csrfRe = regexp.MustCompile(`name="csrf" value="([0-9a-f]+)"`)

// csrf reads the CSRF token from a page's forms.
func csrf(t *testing.T, page string) string {
	t.Helper()
	m := csrfRe.FindStringSubmatch(page)
	if m == nil {
		t.Fatalf("no CSRF token in the page")
	}
	return m[1]
}

// text is the page without tags and with spaces folded, for assertions on
// what a reader sees.
func text(page string) string {
	s := regexp.MustCompile(`<[^>]*>`).ReplaceAllString(page, " ")
	return strings.Join(strings.Fields(s), " ")
}

func mustContain(t *testing.T, what, page string, wants ...string) {
	t.Helper()
	for _, w := range wants {
		if !strings.Contains(page, w) {
			t.Errorf("%s does not show %q", what, w)
		}
	}
}

// jobsOnStream reads the JOBS stream by sequence (a work queue takes no
// second consumer): message id -> subject and data.
func jobsOnStream(t *testing.T, ctx context.Context, conn *broker.Conn) map[string]string {
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
	if info.State.Msgs == 0 {
		return out
	}
	for seq := info.State.FirstSeq; seq <= info.State.LastSeq; seq++ {
		m, err := s.GetMsg(ctx, seq)
		if err != nil {
			t.Fatalf("reading JOBS message %d: %v", seq, err)
		}
		out[m.Header.Get("Nats-Msg-Id")] = m.Subject + " " + string(m.Data)
	}
	return out
}
