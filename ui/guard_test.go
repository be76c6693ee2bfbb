package ui_test

import (
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/index"
	"github.com/llmpipeline/pipeline/ui"
)

// do sends a request with another Host header than the URL's, as a page of
// a rebound name does.
func do(t *testing.T, c *http.Client, method, u, host string, form url.Values) (int, http.Header, string) {
	t.Helper()
	var body io.Reader
	if form != nil {
		body = strings.NewReader(form.Encode())
	}
	req, err := http.NewRequest(method, u, body)
	if err != nil {
		t.Fatal(err)
	}
	if form != nil {
		req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	}
	if host != "" {
		req.Host = host
	}
	resp, err := c.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, string(b)
}

// TestHostCheck: a request addressed to another name (DNS rebinding: a
// page of evil.example whose name now resolves to 127.0.0.1) is refused,
// GET and POST, its security headers kept; so it can neither read a CSRF
// token nor purge with one read through the console's own name.
func TestHostCheck(t *testing.T) {
	f := newFixture(t, func(c *ui.Config) { c.Hosts = []string{"Console.Example"} })
	port := strings.TrimPrefix(f.srv.URL, "http://127.0.0.1:")
	for _, path := range []string{"/", "/dead-letters", "/api/overview", "/login", "/static/app.js", "/dead-letters/inv-3"} {
		code, h, body := do(t, f.c, http.MethodGet, f.srv.URL+path, "evil.example:"+port, nil)
		if code != http.StatusMisdirectedRequest || !strings.Contains(body, "--ui-host") {
			t.Errorf("GET %s as evil.example: %d %q, want 421 naming --ui-host", path, code, body)
		}
		if csrfRe.MatchString(body) || strings.Contains(body, "inv-3") {
			t.Errorf("GET %s as evil.example shows the page: %q", path, body)
		}
		if h.Get("X-Frame-Options") != "DENY" || h.Get("Content-Security-Policy") == "" || h.Get("X-Content-Type-Options") != "nosniff" {
			t.Errorf("GET %s as evil.example lost the security headers: %v", path, h)
		}
	}
	// a token read through the console's own address, replayed by the rebound page
	token := csrf(t, f.get(t, "/dead-letters", http.StatusOK))
	for _, action := range []string{"/actions/purge", "/actions/replay"} {
		code, _, body := do(t, f.c, http.MethodPost, f.srv.URL+action, "evil.example", url.Values{"id": {"tk-1"}, "confirm": {"yes"}, "csrf": {token}})
		if code != http.StatusMisdirectedRequest {
			t.Errorf("POST %s as evil.example: %d %q, want 421", action, code, text(body))
		}
	}
	if es, _ := f.st.List(t.Context(), index.Filter{}); len(es) != 4 {
		t.Errorf("%d dead letters after the rebound purge, want 4", len(es))
	}
	if got := jobsOnStream(t, t.Context(), f.conn); len(got) != 0 {
		t.Errorf("the rebound replay published %v", got)
	}
	for _, host := range []string{"127.0.0.1:" + port, "localhost:" + port, "LOCALHOST.", "[::1]:" + port, "console.example", "console.example:443"} {
		if code, _, body := do(t, f.c, http.MethodGet, f.srv.URL+"/dead-letters", host, nil); code != http.StatusOK {
			t.Errorf("GET as %s: %d %q, want 200", host, code, text(body))
		}
	}
	// and the console's own address can still act, with the same token
	if code, body := f.post(t, "/actions/purge", url.Values{"id": {"tk-1"}, "confirm": {"yes"}, "csrf": {token}}); code != http.StatusOK || !strings.Contains(body, "purged 1 dead letters") {
		t.Errorf("POST as localhost: %d %q", code, text(body))
	}
}

// TestHostCheckEveryInterface: bound to 0.0.0.0 the console answers any IP
// literal (its interfaces; an IP cannot be rebound) and the names given,
// and no other name; bound to a name, that name.
func TestHostCheckEveryInterface(t *testing.T) {
	for _, tc := range []struct {
		addr      string
		hosts     []string
		ok, notOK []string
	}{
		{"0.0.0.0:8080", []string{"pipeline.lan"}, []string{"192.0.2.7:8080", "[2001:db8::1]:8080", "localhost", "pipeline.lan:8080"}, []string{"evil.example", "pipeline.lan.evil.example", ""}},
		{"192.0.2.7:8080", nil, []string{"192.0.2.7:8080"}, []string{"192.0.2.8:8080", "localhost", "evil.example"}},
		{"console.internal:8080", nil, []string{"console.internal:8080"}, []string{"127.0.0.1", "evil.example"}},
	} {
		f := newFixture(t, func(c *ui.Config) { c.Addr, c.Hosts, c.Token = tc.addr, tc.hosts, "0123456789abcdef" })
		auth := func(host string) int {
			req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/api/overview", nil)
			req.Host = host
			req.Header.Set("Authorization", "Bearer 0123456789abcdef")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			return resp.StatusCode
		}
		for _, h := range tc.ok {
			if code := auth(h); code != http.StatusOK {
				t.Errorf("bound to %s: Host %q answered %d, want 200", tc.addr, h, code)
			}
		}
		for _, h := range tc.notOK {
			if h == "" {
				continue // net/http sends the URL's host then
			}
			if code := auth(h); code != http.StatusMisdirectedRequest {
				t.Errorf("bound to %s: Host %q answered %d, want 421", tc.addr, h, code)
			}
		}
	}
}

const strongToken = "s3cret-console-token"

// clock is a test clock the throttle and the sessions read.
type clock struct{ ns atomic.Int64 }

func (c *clock) now() time.Time          { return time.Unix(0, c.ns.Load()) }
func (c *clock) advance(d time.Duration) { c.ns.Add(int64(d)) }

// TestWrongTokensThrottled: 300 wrong tokens from one client are refused
// with 429 after a few, the right one too while the client is throttled
// (a guess then learns nothing); once it waited, the right token logs in.
func TestWrongTokensThrottled(t *testing.T) {
	var clk clock
	clk.ns.Store(t0.UnixNano())
	f := newFixture(t, func(c *ui.Config) { c.Token, c.Now = strongToken, clk.now })
	var wrong, throttled int
	retry := ""
	for i := range 300 {
		code, h, _ := do(t, f.c, http.MethodPost, f.srv.URL+"/login", "", url.Values{"token": {"guess-" + string(rune('a'+i%26))}})
		switch code {
		case http.StatusUnauthorized:
			wrong++
		case http.StatusTooManyRequests:
			throttled++
			retry = h.Get("Retry-After")
		default:
			t.Fatalf("wrong token %d: %d", i, code)
		}
	}
	if wrong > 10 || throttled < 290 || retry == "" {
		t.Errorf("300 wrong tokens: %d compared, %d throttled (Retry-After %q); want at most 10 compared", wrong, throttled, retry)
	}
	if code, _, _ := do(t, f.c, http.MethodPost, f.srv.URL+"/login", "", url.Values{"token": {strongToken}}); code != http.StatusTooManyRequests {
		t.Errorf("the right token while throttled: %d, want 429", code)
	}
	req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/api/overview", nil)
	req.Header.Set("Authorization", "Bearer "+strongToken)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusTooManyRequests {
		t.Errorf("the bearer token while throttled: %d, want 429", resp.StatusCode)
	}
	clk.advance(time.Minute)
	if code, _ := f.post(t, "/login", url.Values{"token": {strongToken}}); code != http.StatusOK {
		t.Errorf("the right token after a minute: %d, want the overview", code)
	}
	mustContain(t, "the overview after login", text(f.get(t, "/", http.StatusOK)), "jobs 6")
}

// TestSessionIsNotTheToken: the login's cookie is a random session id, not
// the token (a cookie holding the token is no login); each session has its
// own CSRF token, which no other session's cookie accepts; /login shows no
// CSRF token to anyone.
func TestSessionIsNotTheToken(t *testing.T) {
	f := newFixture(t, func(c *ui.Config) { c.Token = strongToken })
	if login := f.get(t, "/login", http.StatusOK); csrfRe.MatchString(login) || strings.Contains(login, `name="csrf"`) {
		t.Errorf("/login shows a CSRF token to a visitor without the token")
	}
	login := func() (*http.Client, string) {
		jar, _ := cookiejar.New(nil)
		c := &http.Client{Jar: jar}
		resp, err := c.PostForm(f.srv.URL+"/login", url.Values{"token": {strongToken}})
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("login: %d", resp.StatusCode)
		}
		u, _ := url.Parse(f.srv.URL)
		for _, ck := range jar.Cookies(u) {
			if strings.Contains(ck.Value, strongToken) {
				t.Errorf("cookie %s holds the token", ck.Name)
			}
		}
		if len(jar.Cookies(u)) == 0 {
			t.Fatal("no session cookie after login")
		}
		return c, jar.Cookies(u)[0].Value
	}
	a, _ := login()
	b, _ := login()
	pageOf := func(c *http.Client) string {
		_, _, body := do(t, c, http.MethodGet, f.srv.URL+"/dead-letters", "", nil)
		return body
	}
	ta, tb := csrf(t, pageOf(a)), csrf(t, pageOf(b))
	if ta == tb {
		t.Errorf("two sessions share the CSRF token %s", ta)
	}
	if code, _, body := do(t, b, http.MethodPost, f.srv.URL+"/actions/purge", "", url.Values{"id": {"tk-1"}, "csrf": {ta}}); code != http.StatusForbidden || !strings.Contains(body, "CSRF") {
		t.Errorf("session b with session a's CSRF token: %d %q, want 403", code, text(body))
	}
	if code, _, body := do(t, b, http.MethodPost, f.srv.URL+"/actions/purge", "", url.Values{"id": {"tk-1"}, "csrf": {tb}}); code != http.StatusOK || !strings.Contains(body, "would purge 1 jobs") {
		t.Errorf("session b with its own CSRF token: %d %q", code, text(body))
	}
	// the old cookie, holding the token itself, is no login
	req, _ := http.NewRequest(http.MethodGet, f.srv.URL+"/api/overview", nil)
	req.AddCookie(&http.Cookie{Name: "pipeline_ui_token", Value: strongToken})
	req.AddCookie(&http.Cookie{Name: "pipeline_ui_session", Value: strongToken})
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusUnauthorized {
		t.Errorf("a cookie holding the token: %d, want 401", resp.StatusCode)
	}
	// without a token, each browser still has its own CSRF token
	g := newFixture(t, nil)
	jar, _ := cookiejar.New(nil)
	other := &http.Client{Jar: jar}
	if csrf(t, g.get(t, "/dead-letters", http.StatusOK)) == csrf(t, pageOf2(t, other, g.srv.URL)) {
		t.Errorf("two browsers of a console without a token share the CSRF token")
	}
	if login := g.get(t, "/login", http.StatusOK); strings.Contains(login, `name="csrf"`) {
		t.Errorf("/login shows a CSRF token")
	}
}

func pageOf2(t *testing.T, c *http.Client, base string) string {
	t.Helper()
	_, _, body := do(t, c, http.MethodGet, base+"/dead-letters", "", nil)
	return body
}

// TestDotJobIDs: ids a browser would resolve away ("." and "..") and ids
// with / ? # spaces link to pages that open, the link resolved as a
// browser resolves it.
func TestDotJobIDs(t *testing.T) {
	f := newFixture(t, nil)
	ids := []string{".", "..", "a b", "x?y#z", "a/../b", "./c", "%2e%2e", "ünï code ✓"}
	base := dataset()[2]
	for i, id := range ids {
		o := base
		o.JobID, o.Job = id, job(id, "invoice")
		o.FinishedAt = t0.Add(20*time.Minute + time.Duration(i)*time.Second)
		if err := f.st.Write(t.Context(), []job.Outcome{o}); err != nil {
			t.Fatal(err)
		}
	}
	list := f.get(t, "/dead-letters", http.StatusOK)
	srv, _ := url.Parse(f.srv.URL + "/dead-letters")
	for _, id := range ids {
		href := ui.JobURL(id)
		if !strings.Contains(list, `href="`+strings.ReplaceAll(href, "&", "&amp;")+`"`) {
			t.Errorf("the list has no link %s for %q", href, id)
			continue
		}
		ref, err := url.Parse(href)
		if err != nil {
			t.Fatalf("link %s of %q: %v", href, id, err)
		}
		u := srv.ResolveReference(ref) // removes dot segments, as a browser does
		page := f.get(t, u.RequestURI(), http.StatusOK)
		mustContain(t, u.RequestURI(), text(page), "dead_lettered (exhausted)", "text of "+id)
	}
}
