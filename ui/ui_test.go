package ui_test

import (
	"encoding/json"
	"html"
	"net/http"
	"net/url"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/index"
	"github.com/llmpipeline/pipeline/ui"
)

// codeCluster is the id of the dataset's invoice /code [pattern] cluster.
func codeCluster() string {
	return cluster.ID(cluster.Fingerprint{Schema: "invoice", Version: "v1aaaaaaaaaa", Path: "/code", Keyword: "pattern"})
}

func TestOverview(t *testing.T) {
	f := newFixture(t, nil)
	page := text(f.get(t, "/", http.StatusOK))
	mustContain(t, "the overview", page,
		"jobs 6", "succeeded 2 33.3%", "dead-lettered 4 66.7%", "pending 0", "in flight 0",
		"exhausted 3 50.0%", "no_progress 1 16.7%",
		// the funnel: invoice 5 jobs, 1 valid at the first call, 1 at the second, 3 dead
		"invoice v1aaaaaa 5 20.0% 1: 1 2: 1 3 exhausted 3",
		"ticket t1bbbbbb 1 0.0%",
		"breaker n/a")
	if strings.Contains(page, "cost") {
		t.Errorf("the overview shows a cost, but the index holds no prices")
	}

	js := f.get(t, "/api/overview", http.StatusOK)
	mustContain(t, "/api/overview", js, `"jobs":6`, `"succeeded":2`, `"dead_lettered":4`, `"pending":0`, `"in_flight":0`, `"cost":null`)
}

func TestOverviewBreaker(t *testing.T) {
	f := newFixture(t, func(c *ui.Config) { c.Breaker = func() string { return "open" } })
	mustContain(t, "the overview", text(f.get(t, "/", http.StatusOK)), "breaker open")
}

func TestClusters(t *testing.T) {
	f := newFixture(t, nil)
	id := codeCluster()
	for _, tc := range []struct {
		name, query string
		want        []string
		not         []string
	}{
		{"all", "", []string{"3 of 3 clusters", id, "/code", "pattern", "impossible", `<code>&#34;X-1&#34;</code> ×2`, `<code>&#34;X-2&#34;</code> ×1`}, nil},
		{"top", "?top=1", []string{"1 of 3 clusters (top=0 for all)", id}, []string{"/subject"}},
		{"schema", "?schema=ticket", []string{"1 of 1 clusters", "/subject"}, []string{id}},
		{"class", "?class=no_progress", []string{"1 of 1 clusters", "/subject", "clusters with a dead letter of class no_progress"}, []string{id}},
		{"model", "?model=openai:gpt-test", []string{"1 of 1 clusters", "/subject"}, []string{id}},
		{"version", "?version=v1aa", []string{"2 of 2 clusters", id, "/total"}, []string{"/subject"}},
		{"keyword", "?keyword=pattern", []string{"1 of 1 clusters", id}, []string{"/total"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			page := f.get(t, "/clusters"+tc.query, http.StatusOK)
			mustContain(t, "clusters"+tc.query, page, tc.want...)
			for _, n := range tc.not {
				if strings.Contains(page, n) {
					t.Errorf("clusters%s shows %q", tc.query, n)
				}
			}
		})
	}

	page := text(f.get(t, "/clusters/"+id, http.StatusOK))
	mustContain(t, "the cluster's page", page, "3 of 3 jobs", "heal rate 0.0%", "impossible", "inv-3", "inv-4", "inv-5", "Replay the whole cluster")
	f.get(t, "/clusters/000000000000", http.StatusNotFound)
}

func TestDeadLetters(t *testing.T) {
	f := newFixture(t, func(c *ui.Config) { c.PageSize = 2 })
	for _, tc := range []struct {
		query string
		want  []string
		not   []string
	}{
		{"", []string{"tk-1", "inv-5", "dead letters 1–2, more on the next page"}, []string{"inv-3"}},
		{"?page=1", []string{"inv-4", "inv-3", "dead letters 3–4"}, []string{"tk-1", "more on the next page"}},
		{"?cluster=" + codeCluster(), []string{"inv-5", "inv-4"}, []string{"tk-1"}},
		{"?class=no_progress", []string{"tk-1", "dead letters 1–1"}, []string{"inv-5"}},
		{"?path=/code", []string{"inv-5", "inv-4", "more on the next page"}, []string{"tk-1"}},
		{"?model=openai:gpt-test", []string{"tk-1"}, []string{"inv-5"}},
		{"?schema=invoice&until=2025-03-01T12:04:00Z", []string{"inv-4", "inv-3"}, []string{"inv-5", "tk-1"}},
		{"?since=2025-03-01T12:04:00Z", []string{"tk-1", "inv-5"}, []string{"inv-4"}},
	} {
		t.Run(tc.query, func(t *testing.T) {
			page := text(f.get(t, "/dead-letters"+tc.query, http.StatusOK))
			mustContain(t, "dead letters"+tc.query, page, tc.want...)
			for _, n := range tc.not {
				if strings.Contains(page, n) {
					t.Errorf("dead letters%s shows %q", tc.query, n)
				}
			}
		})
	}
	f.get(t, "/dead-letters?since=yesterday", http.StatusBadRequest)
}

func TestTranscript(t *testing.T) {
	f := newFixture(t, nil)
	page := text(f.get(t, "/dead-letters/inv-3", http.StatusOK))
	mustContain(t, "inv-3's page", page,
		"dead_lettered (exhausted)", "heal attempts used up: /code still fails", "version v1aaaaaaaaaa",
		"2 model call(s), 1 deliveries", "tokens 360", "took 2s",
		"attempt 1: schema", "temperature 0.70", "100 prompt + 40 completion tokens", "31 ms", "sanitizer stages: code_fence",
		"```json", "attempt 2: schema", "temperature 0.50",
		"/code pattern does not match pattern ^P-[0-9]&#43;$ &#34;X-1&#34;",
		"text of inv-3", "Replay this job")

	page = f.get(t, "/dead-letters/tk-1", http.StatusOK)
	mustContain(t, "tk-1's page", text(page), "no_progress", "model openai:gpt-test", "tokens 260")
	f.get(t, "/dead-letters/nope", http.StatusNotFound)

	// a succeeded job has a page too, without actions
	page = text(f.get(t, "/dead-letters/inv-2", http.StatusOK))
	mustContain(t, "inv-2's page", page, "succeeded", "attempt 2: valid")
	if strings.Contains(page, "Replay this job") {
		t.Errorf("a succeeded job offers a replay")
	}
}

func TestSchemasPage(t *testing.T) {
	f := newFixture(t, nil)
	page := text(f.get(t, "/schemas", http.StatusOK))
	mustContain(t, "the schemas page", page, "invoice", "v1aaaaaa", "ticket", "t1bbbbbb", "Fields that fail most", "/code pattern v1aaaaaa 3 3 0.0% impossible")
}

// TestNoSecretOnAnyPage: the raw output of tk-1 holds a key the redactor
// knows; no page or JSON shows it.
func TestNoSecretOnAnyPage(t *testing.T) {
	f := newFixture(t, nil)
	for _, p := range []string{"/", "/api/overview", "/clusters", "/clusters?version=all", "/dead-letters", "/dead-letters/tk-1", "/schemas"} {
		if page := f.get(t, p, http.StatusOK); strings.Contains(page, secretKey) || strings.Contains(page, "UI-SECRET") {
			t.Errorf("%s shows the secret", p)
		}
	}
	mustContain(t, "tk-1's page", f.get(t, "/dead-letters/tk-1", http.StatusOK), "[REDACTED]")
}

func TestActionsNeedCSRF(t *testing.T) {
	f := newFixture(t, nil)
	token := csrf(t, f.get(t, "/dead-letters", http.StatusOK))
	for _, path := range []string{"/actions/replay", "/actions/purge"} {
		for name, form := range map[string]url.Values{
			"none":  {"id": {"inv-3"}, "confirm": {"yes"}},
			"wrong": {"id": {"inv-3"}, "confirm": {"yes"}, "csrf": {strings.Repeat("0", len(token))}},
		} {
			if code, body := f.post(t, path, form); code != http.StatusForbidden || !strings.Contains(body, "CSRF") {
				t.Errorf("POST %s with %s CSRF token: %d %q, want 403", path, name, code, body)
			}
		}
	}
	if got := jobsOnStream(t, t.Context(), f.conn); len(got) != 0 {
		t.Errorf("refused actions published %v", got)
	}
	if es, _ := f.st.List(t.Context(), index.Filter{}); len(es) != 4 {
		t.Errorf("%d dead letters after refused actions, want 4", len(es))
	}
	code, body := f.post(t, "/actions/replay", url.Values{"id": {"inv-3"}, "csrf": {token}})
	if code != http.StatusOK || !strings.Contains(body, "would replay 1 jobs") {
		t.Errorf("dry run with the token: %d %q", code, text(body))
	}
}

// TestReplayCluster: a cluster's replay shows its dry run (nothing
// published), then on confirmation publishes each job as it was submitted
// under <job id>~r1 and marks the dead letters replayed.
func TestReplayCluster(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	token := csrf(t, f.get(t, "/clusters/"+codeCluster(), http.StatusOK))
	code, body := f.post(t, "/actions/replay", url.Values{"cluster": {codeCluster()}, "csrf": {token}})
	if code != http.StatusOK {
		t.Fatalf("dry run: %d %s", code, body)
	}
	mustContain(t, "the dry run", text(body), "would replay 3 jobs", "inv-3", "inv-4", "inv-5", "Yes, replay 3 jobs")
	if got := jobsOnStream(t, ctx, f.conn); len(got) != 0 {
		t.Fatalf("the dry run published %v", got)
	}

	form := url.Values{"csrf": {token}, "confirm": {"yes"}, "id": {"inv-3", "inv-4", "inv-5"}}
	code, body = f.post(t, "/actions/replay", form)
	if code != http.StatusOK {
		t.Fatalf("replay: %d %s", code, body)
	}
	mustContain(t, "the replay's result", text(body), "replayed 3 jobs, 0 failed")
	got := jobsOnStream(t, ctx, f.conn)
	want := map[string]string{}
	for _, id := range []string{"inv-3", "inv-4", "inv-5"} {
		want[id+"~r1"] = "pipeline.jobs.invoice " + string(job(id, "invoice"))
	}
	if len(got) != len(want) {
		t.Fatalf("JOBS holds %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("JOBS message %s = %q, want %q", k, got[k], v)
		}
	}
	left, err := f.st.List(ctx, index.Filter{Cluster: codeCluster()})
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("dead letters still unreplayed after the replay: %v", left)
	}
	// a second confirmation replays nothing: the ids shown are replayed already
	if _, body = f.post(t, "/actions/replay", form); !strings.Contains(text(body), "replayed 0 jobs") {
		t.Errorf("replaying again: %q", text(body))
	}
}

func TestPurge(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	token := csrf(t, f.get(t, "/dead-letters/tk-1", http.StatusOK))
	_, body := f.post(t, "/actions/purge", url.Values{"class": {"no_progress"}, "csrf": {token}})
	mustContain(t, "the purge's dry run", text(body), "would purge 1 jobs", "tk-1")
	if _, err := f.st.Get(ctx, "tk-1"); err != nil {
		t.Fatalf("the dry run purged: %v", err)
	}
	_, body = f.post(t, "/actions/purge", url.Values{"id": {"tk-1"}, "confirm": {"yes"}, "csrf": {token}})
	mustContain(t, "the purge's result", text(body), "purged 1 dead letters")
	if es, _ := f.st.List(ctx, index.Filter{}); len(es) != 3 {
		t.Errorf("%d dead letters after purging one of 4", len(es))
	}
	// no filter at all is refused, as by the CLI without --all
	if code, _ := f.post(t, "/actions/purge", url.Values{"csrf": {token}, "confirm": {"yes"}}); code != http.StatusBadRequest {
		t.Errorf("a purge without a selection answered %d, want 400", code)
	}
}

func TestReadOnly(t *testing.T) {
	f := newFixture(t, func(c *ui.Config) { c.ReadOnly = true })
	page := f.get(t, "/dead-letters/inv-3", http.StatusOK)
	if strings.Contains(page, "Replay this job") || strings.Contains(f.get(t, "/dead-letters", http.StatusOK), "Replay selected") {
		t.Errorf("a read-only console offers actions")
	}
	code, body := f.post(t, "/actions/replay", url.Values{"id": {"inv-3"}, "confirm": {"yes"}})
	if code != http.StatusForbidden || !strings.Contains(body, "read-only") {
		t.Errorf("replay on a read-only console: %d %q, want 403 read-only", code, text(body))
	}
	if got := jobsOnStream(t, t.Context(), f.conn); len(got) != 0 {
		t.Errorf("a read-only console published %v", got)
	}
}

func TestToken(t *testing.T) {
	const tok = "s3cret-console-token"
	f := newFixture(t, func(c *ui.Config) { c.Token = tok })
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	resp, err := noRedirect.Get(f.srv.URL + "/dead-letters")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther || resp.Header.Get("Location") != "/login" {
		t.Errorf("without the token: %d to %q, want 303 to /login", resp.StatusCode, resp.Header.Get("Location"))
	}
	for _, tc := range []struct {
		auth string
		want int
	}{{"", http.StatusUnauthorized}, {"Bearer wrong", http.StatusUnauthorized}, {"Bearer " + tok, http.StatusOK}} {
		req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/api/overview", nil)
		if tc.auth != "" {
			req.Header.Set("Authorization", tc.auth)
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != tc.want {
			t.Errorf("Authorization %q: %d, want %d", tc.auth, resp.StatusCode, tc.want)
		}
	}
	if code, _ := f.post(t, "/login", url.Values{"token": {"wrong"}}); code != http.StatusUnauthorized {
		t.Errorf("login with a wrong token: %d, want 401", code)
	}
	if code, _ := f.post(t, "/login", url.Values{"token": {tok}}); code != http.StatusOK {
		t.Fatalf("login: %d", code)
	}
	mustContain(t, "the overview after login", text(f.get(t, "/", http.StatusOK)), "jobs 6")
}

func TestCheckAddr(t *testing.T) {
	for _, tc := range []struct {
		addr, token string
		ok          bool
	}{
		{"127.0.0.1:8080", "", true},
		{"127.0.0.2:0", "", true},
		{"[::1]:8080", "", true},
		{"localhost:8080", "", true},
		{"0.0.0.0:8080", "", false},
		{":8080", "", false},
		{"[::]:8080", "", false},
		{"192.0.2.10:8080", "", false},
		{"example.com:8080", "", false},
		{"0.0.0.0:8080", "t0ken", false},
		{"0.0.0.0:8080", "0123456789abcde", false},
		{"0.0.0.0:8080", "0123456789abcdef", true},
		{"127.0.0.1:8080", "t", true},
		{"nope", "", false},
	} {
		err := ui.CheckAddr(tc.addr, tc.token)
		if (err == nil) != tc.ok {
			t.Errorf("CheckAddr(%q, %q) = %v, want ok=%v", tc.addr, tc.token, err, tc.ok)
		}
	}
}

// TestCostShown: once outcomes carry prices, the overview shows the spend
// and a dead letter's page its cost and each attempt's model and cost.
func TestCostShown(t *testing.T) {
	f := newFixture(t, nil)
	c1, c2 := 0.0021, 0.0009
	priced := job.Outcome{JobID: "tk-2", Schema: "ticket", SchemaVersion: "t1bbbbbbbbbb", Status: job.StatusDeadLettered,
		Class: "exhausted", Reason: "heal attempts used up", Model: "openai:gpt-4o-mini", Attempts: 2, Job: json.RawMessage(`{"id":"tk-2","schema":"ticket","input":"x"}`),
		Trace: []job.Attempt{
			{N: 1, Temperature: 0.7, Raw: `{}`, Class: "schema", Model: "openai:gpt-4o-mini", CostUSD: &c1, PromptTokens: 90, CompletionTokens: 30},
			{N: 2, Temperature: 0.5, Raw: `{}`, Class: "schema", Model: "openai:gpt-4o-mini", CostUSD: &c2, PromptTokens: 120, CompletionTokens: 20},
		},
		StartedAt: time.Now().Add(-time.Minute), FinishedAt: time.Now()}
	total := c1 + c2
	priced.CostUSD = &total
	if err := f.st.Write(t.Context(), []job.Outcome{priced}); err != nil {
		t.Fatal(err)
	}
	mustContain(t, "the overview", text(f.get(t, "/", http.StatusOK)), "cost $0.003000")
	mustContain(t, "tk-2's page", text(f.get(t, "/dead-letters/tk-2", http.StatusOK)),
		"cost $0.003000", "openai:gpt-4o-mini · $0.002100", "openai:gpt-4o-mini · $0.000900")
}

// TestPathLikeJobID: a job id may hold / ? # (a file path, a URL): the
// list links to its page with the id as one path segment, and the page
// finds it.
func TestPathLikeJobID(t *testing.T) {
	f := newFixture(t, nil)
	id := "scans/2024/inv?7#b.pdf"
	o := dataset()[2]
	o.JobID, o.Job = id, job(id, "invoice")
	o.FinishedAt = t0.Add(10*time.Minute + 30*time.Second) // the newest, first in the list
	if err := f.st.Write(t.Context(), []job.Outcome{o}); err != nil {
		t.Fatal(err)
	}
	page := f.get(t, "/dead-letters", http.StatusOK)
	href := `href="/dead-letters/` + url.PathEscape(id) + `"`
	if !strings.Contains(page, href) {
		t.Fatalf("the list has no link %s:\n%s", href, page)
	}
	mustContain(t, id+"'s page", text(f.get(t, "/dead-letters/"+url.PathEscape(id), http.StatusOK)), id, "dead_lettered (exhausted)", "text of "+id)
}

// TestBadPaging: a page past the end, huge, negative or not a number is a
// 400 naming the page, never a panic; the last page still answers.
func TestBadPaging(t *testing.T) {
	f := newFixture(t, func(c *ui.Config) { c.PageSize = 2 })
	f.get(t, "/dead-letters?page=1", http.StatusOK) // dead letters 3-4 of 4
	for _, p := range []string{"2", "3", "184467440737095517", "9223372036854775807", "99999999999999999999", "-1", "x", "1e3", " 1"} {
		body := f.get(t, "/dead-letters?page="+url.QueryEscape(p), http.StatusBadRequest)
		mustContain(t, "page "+p, text(body), "page")
	}
	f.get(t, "/clusters?top=-1", http.StatusBadRequest)
	f.get(t, "/clusters?top=184467440737095517", http.StatusOK)
}

var cancelRe = regexp.MustCompile(`<a href="([^"]*)" id="cancel">Cancel</a>`)

// TestActionWayBack: the confirmation's Cancel leads back to the page the
// action began on, its filter and page kept (the list's selection, a
// cluster); a way back to another site is not followed; the replay's
// result says a `pipeline run` must pick the jobs up.
func TestActionWayBack(t *testing.T) {
	f := newFixture(t, func(c *ui.Config) { c.PageSize = 2 })
	list := "/dead-letters?class=exhausted&page=1"
	page := f.get(t, list, http.StatusOK)
	token := csrf(t, page)
	mustContain(t, "the list's action form", page, `name="back" value="`+html.EscapeString(list)+`"`)
	for _, tc := range []struct {
		name string
		form url.Values
		want string
	}{
		{"selected on a filtered page", url.Values{"id": {"inv-3"}, "back": {list}}, list},
		{"every match of a filter", url.Values{"class": {"exhausted"}, "schema": {"invoice"}}, "/dead-letters?class=exhausted&schema=invoice"},
		{"a cluster", url.Values{"cluster": {codeCluster()}, "back": {"/clusters/" + codeCluster()}}, "/clusters/" + codeCluster()},
		{"another site", url.Values{"id": {"inv-3"}, "back": {"//evil.example/x"}}, "/dead-letters"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.form.Set("csrf", token)
			code, body := f.post(t, "/actions/replay", tc.form)
			if code != http.StatusOK {
				t.Fatalf("dry run: %d %s", code, text(body))
			}
			m := cancelRe.FindStringSubmatch(body)
			if m == nil || html.UnescapeString(m[1]) != tc.want {
				t.Errorf("Cancel leads to %v, want %s", m, tc.want)
			}
		})
	}
	_, body := f.post(t, "/actions/replay", url.Values{"csrf": {token}, "confirm": {"yes"}, "id": {"inv-3"}, "back": {list}})
	mustContain(t, "the replay's result", text(body), "replayed 1 jobs", "a pipeline run on this data dir (or one already running) must pick them up")
	mustContain(t, "the replay's result", body, `href="`+html.EscapeString(list)+`" id="back"`)
}

// TestTranscriptShowsTheInputAsText: the job on a dead letter's page is
// its fields, then the input as the text it is (line breaks kept), not
// escaped one-line JSON.
func TestTranscriptShowsTheInputAsText(t *testing.T) {
	f := newFixture(t, nil)
	o := job.Outcome{JobID: "mail-1", Schema: "ticket", SchemaVersion: "t1bbbbbbbbbb", Status: job.StatusDeadLettered,
		Class: "exhausted", Reason: "heal attempts used up", Attempts: 1,
		Job:   json.RawMessage(`{"id":"mail-1","schema":"ticket","input":"From: <ana@example.com>\nSubj: refund","metadata":{"src":"imap"}}`),
		Trace: []job.Attempt{{N: 1, Temperature: 0.7, Raw: `{}`, Class: "schema"}},
	}
	if err := f.st.Write(t.Context(), []job.Outcome{o}); err != nil {
		t.Fatal(err)
	}
	page := f.get(t, "/dead-letters/mail-1", http.StatusOK)
	mustContain(t, "mail-1's page", page, "From: &lt;ana@example.com&gt;\n", "Subj: refund", "metadata")
	if strings.Contains(page, `\u003c`) || strings.Contains(page, `\n`) {
		t.Errorf("the job is shown as escaped JSON:\n%s", page)
	}
}
