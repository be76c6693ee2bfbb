package ui

import (
	"bytes"
	"crypto/subtle"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"math"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/llmpipeline/pipeline/index"
	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/htmlview"
	"github.com/llmpipeline/pipeline/internal/secret"
	"github.com/llmpipeline/pipeline/schemas"
)

//go:embed templates/*.html static/*
var assets embed.FS

// Config is what the console reads and acts on. Store is required; the
// rest have defaults.
type Config struct {
	// Store is the SQLite index the pages read.
	Store *index.Store
	// Conn is the NATS connection: the overview's pending and in-flight
	// counts, and replays. Nil: those figures say "unknown" and replay is
	// refused.
	Conn *broker.Conn
	// LoadSchemas loads the schemas as they are now (the schemas page and
	// the lint findings of the clusters page); nil: neither is shown.
	LoadSchemas func() (*schemas.Registry, error)
	// Secrets redacts every page; nil redacts nothing.
	Secrets *secret.Redactor
	// Token, when set, is required on every request (Authorization: Bearer,
	// or the session the login form opens).
	Token string
	// Addr is the address the console listens on; its host decides the
	// Host headers answered (default 127.0.0.1: the loopback names).
	Addr string
	// Hosts are further names the console answers to (--ui-host): the
	// name of a reverse proxy, of the machine.
	Hosts []string
	// ReadOnly hides and refuses replay and purge.
	ReadOnly bool
	// Breaker returns the state of the model's circuit breaker of this
	// process (closed, open, half-open); nil when no workers run here.
	Breaker func() string
	// Source names the index on the pages (default the store's file).
	Source string
	// PageSize is the dead letters per page (default 50).
	PageSize int
	// Logger gets one record per action (default: discard).
	Logger *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Server is the console's http.Handler.
type Server struct {
	cfg      Config
	hosts    hosts
	sessions *sessions
	throttle *throttle
	pages    map[string]*template.Template
	mux      *http.ServeMux
	cop      *http.CrossOriginProtection
	overview overviewCache
}

var _ http.Handler = (*Server)(nil)

// New builds the console.
func New(cfg Config) (*Server, error) {
	if cfg.Store == nil {
		return nil, errors.New("ui: Config.Store is required")
	}
	if cfg.PageSize <= 0 {
		cfg.PageSize = 50
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Source == "" {
		cfg.Source = cfg.Store.Path()
	}
	if cfg.Secrets == nil {
		cfg.Secrets = secret.New()
	}
	ss, err := newSessions()
	if err != nil {
		return nil, err
	}
	s := &Server{cfg: cfg, hosts: newHosts(cfg.Addr, cfg.Hosts), sessions: ss, throttle: newThrottle(cfg.Now),
		pages: map[string]*template.Template{}, cop: http.NewCrossOriginProtection()}
	if err := s.parse(); err != nil {
		return nil, err
	}
	s.routes()
	return s, nil
}

func (s *Server) parse() error {
	names, err := fs.Glob(assets, "templates/*.html")
	if err != nil {
		return fmt.Errorf("ui: listing templates: %w", err)
	}
	for _, n := range names {
		if n == "templates/layout.html" {
			continue
		}
		t, err := htmlview.Parse(funcs(), assets, "templates/layout.html", n)
		if err != nil {
			return fmt.Errorf("ui: parsing %s: %w", n, err)
		}
		s.pages[strings.TrimSuffix(strings.TrimPrefix(n, "templates/"), ".html")] = t
	}
	return nil
}

func (s *Server) routes() {
	m := http.NewServeMux()
	static, _ := fs.Sub(assets, "static") // the directory is embedded above
	m.Handle("GET /static/", http.StripPrefix("/static/", http.FileServerFS(static)))
	m.HandleFunc("GET /static/style.css", func(w http.ResponseWriter, r *http.Request) {
		http.ServeFileFS(w, r, htmlview.Files(), "style.css") // the stylesheet the report inlines
	})
	m.HandleFunc("GET /{$}", s.overviewPage)
	m.HandleFunc("GET /overview/live", s.overviewLive)
	m.HandleFunc("GET /api/overview", s.overviewJSON)
	m.HandleFunc("GET /clusters", s.clusters)
	m.HandleFunc("GET /clusters/{id}", s.cluster)
	m.HandleFunc("GET /dead-letters", s.deadLetters)
	m.HandleFunc("GET /dead-letters/{job}", s.deadLetter)
	m.HandleFunc("GET /job", s.deadLetter) // ?id=, for the ids "." and ".."
	m.HandleFunc("GET /schemas", s.schemasPage)
	m.HandleFunc("GET /files/{digest}", s.file)
	m.HandleFunc("POST /actions/replay", s.replay)
	m.HandleFunc("POST /actions/purge", s.purge)
	m.HandleFunc("GET /login", s.loginPage)
	m.HandleFunc("POST /login", s.login)
	s.mux = m
}

// ServeHTTP checks the request's Host (a page of another site whose name
// resolves to this machine is refused), the access token (when one is
// set) and the request's origin, then serves the page.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Referrer-Policy", "same-origin")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'")
	if !s.hosts.allowed(r.Host) {
		http.Error(w, fmt.Sprintf("host %q is not this console's address: it answers %s (add a name with --ui-host)", r.Host, s.hosts.said), http.StatusMisdirectedRequest)
		return
	}
	var in reqInfo
	if s.cfg.Token == "" {
		// no login: every browser gets a session, for its CSRF token
		if in.session = sessionID(r); in.session == "" {
			id, err := newID()
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			in.session = id
			setSession(w, r, id, 0)
		}
	} else if !strings.HasPrefix(r.URL.Path, "/login") && !strings.HasPrefix(r.URL.Path, "/static/") {
		var ok bool
		if in, ok = s.authorize(w, r); !ok {
			return
		}
	}
	if err := s.cop.Check(r); err != nil {
		http.Error(w, "cross-origin request refused: "+err.Error(), http.StatusForbidden)
		return
	}
	s.mux.ServeHTTP(w, withInfo(r, in))
}

// authorize checks a request's bearer token (throttled) or its logged-in
// session; it answers the request itself when neither holds.
func (s *Server) authorize(w http.ResponseWriter, r *http.Request) (reqInfo, bool) {
	if h := r.Header.Get("Authorization"); strings.HasPrefix(h, "Bearer ") {
		c := client(r)
		if d := s.throttle.wait(c); d > 0 {
			tooMany(w, d)
			return reqInfo{}, false
		}
		if equal(strings.TrimPrefix(h, "Bearer "), s.cfg.Token) {
			return reqInfo{bearer: true}, true
		}
		s.throttle.failed(c)
		s.cfg.Logger.Warn("console: wrong token", "remote", r.RemoteAddr)
		http.Error(w, "wrong token", http.StatusUnauthorized)
		return reqInfo{}, false
	}
	if id := sessionID(r); s.sessions.loggedIn(id, s.cfg.Now()) {
		return reqInfo{session: id}, true
	}
	if r.Method == http.MethodGet && !strings.HasPrefix(r.URL.Path, "/api/") {
		http.Redirect(w, r, "/login", http.StatusSeeOther)
		return reqInfo{}, false
	}
	http.Error(w, "a token is required (Authorization: Bearer, or log in at /login)", http.StatusUnauthorized)
	return reqInfo{}, false
}

func equal(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	s.render(w, r, http.StatusOK, "login", page{Title: "Log in"})
}

// login takes the token from the form (throttled per client and over all
// clients) and opens a session: the cookie holds a random id, never the
// token.
func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Token == "" {
		http.Redirect(w, r, "/", http.StatusSeeOther)
		return
	}
	c := client(r)
	if d := s.throttle.wait(c); d > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(d.Seconds()))))
		s.render(w, r, http.StatusTooManyRequests, "login", page{Title: "Log in", Error: fmt.Sprintf("too many wrong tokens: try again in %s", d.Round(time.Second))})
		return
	}
	if !equal(r.PostFormValue("token"), s.cfg.Token) {
		s.throttle.failed(c)
		s.cfg.Logger.Warn("console: wrong token", "remote", r.RemoteAddr)
		s.render(w, r, http.StatusUnauthorized, "login", page{Title: "Log in", Error: "wrong token"})
		return
	}
	id, err := newID()
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	s.sessions.login(id, s.cfg.Now())
	setSession(w, r, id, sessionTTL)
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// checkCSRF reports whether the POST carries its session's CSRF token. A
// request with the bearer token needs none: no other site can send that
// header.
func (s *Server) checkCSRF(w http.ResponseWriter, r *http.Request) bool {
	in := info(r)
	if in.bearer {
		return true
	}
	if in.session == "" || !equal(r.PostFormValue("csrf"), s.sessions.csrf(in.session)) {
		http.Error(w, "missing or wrong CSRF token: reload the page and try again", http.StatusForbidden)
		return false
	}
	return true
}

// page is what every template gets; Data is the page's own.
type page struct {
	Title    string
	Nav      string
	CSRF     string
	ReadOnly bool
	Source   string
	Now      time.Time
	Error    string
	Refresh  bool
	// Here is the page's own path and query (GET pages), which its action
	// forms carry as "back": the confirmation's Cancel returns there.
	Here string
	Data any
}

// render executes a page into a buffer, redacts it and writes it.
func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, name string, p page) {
	t, ok := s.pages[name]
	if !ok {
		http.Error(w, "no template "+name, http.StatusInternalServerError)
		return
	}
	p.CSRF, p.ReadOnly, p.Source, p.Now = s.sessions.csrf(info(r).session), s.cfg.ReadOnly, s.cfg.Source, s.cfg.Now()
	if r.Method == http.MethodGet {
		p.Here = r.URL.RequestURI()
	}
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "page", p); err != nil {
		s.cfg.Logger.Error("console: rendering a page", "page", name, "path", r.URL.Path, "err", err)
		http.Error(w, "rendering the page failed: "+s.cfg.Secrets.String(err.Error()), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(s.cfg.Secrets.Bytes(buf.Bytes())) // a client gone away is no error of ours
}

// renderBlock executes one block of a page (a fragment the page's script
// swaps in), redacted like a page.
func (s *Server) renderBlock(w http.ResponseWriter, r *http.Request, name, block string, p page) {
	t, ok := s.pages[name]
	if !ok {
		http.Error(w, "no template "+name, http.StatusInternalServerError)
		return
	}
	p.CSRF, p.ReadOnly, p.Source, p.Now = s.sessions.csrf(info(r).session), s.cfg.ReadOnly, s.cfg.Source, s.cfg.Now()
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, block, p); err != nil {
		s.cfg.Logger.Error("console: rendering a fragment", "page", name, "block", block, "err", err)
		http.Error(w, "rendering the page failed: "+s.cfg.Secrets.String(err.Error()), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(s.cfg.Secrets.Bytes(buf.Bytes())) // a client gone away is no error of ours
}

// fail shows an error page; the error is redacted like everything else.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, status int, err error) {
	s.render(w, r, status, "error", page{Title: "Error", Error: err.Error()})
}

// CheckAddr refuses to listen on an address other than loopback without a
// token of at least MinTokenLen characters: the console shows transcripts
// and replays jobs.
func CheckAddr(addr, token string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("address %q: %w", addr, err)
	}
	if IsLoopback(host) {
		return nil
	}
	if token == "" {
		return fmt.Errorf("address %q is not loopback: listening there needs a token (--ui-token or PIPELINE_UI_TOKEN)", addr)
	}
	if rule := tokenRule(token); rule != "" {
		return fmt.Errorf("address %q: %s (--ui-token or PIPELINE_UI_TOKEN)", addr, rule)
	}
	return nil
}

// IsLoopback reports whether host names only loopback addresses ("" and
// "0.0.0.0" mean every interface, so they are not).
func IsLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(strings.Trim(host, "[]"))
	return ip != nil && ip.IsLoopback()
}
