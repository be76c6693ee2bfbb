package ui

import (
	"bytes"
	"crypto/rand"
	"crypto/subtle"
	"embed"
	"encoding/hex"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/llmpipeline/pipeline/dlq"
	"github.com/llmpipeline/pipeline/ingest"
	"github.com/llmpipeline/pipeline/internal/secret"
	"github.com/llmpipeline/pipeline/schemas"
)

//go:embed templates/*.html static/*
var assets embed.FS

// tokenCookie holds the access token in a browser once the login form took it.
const tokenCookie = "pipeline_ui_token"

// Config is what the console reads and acts on. Store is required; the
// rest have defaults.
type Config struct {
	// Store is the SQLite index the pages read.
	Store *dlq.Store
	// Conn is the NATS connection: the overview's pending and in-flight
	// counts, and replays. Nil: those figures say "unknown" and replay is
	// refused.
	Conn *ingest.Conn
	// LoadSchemas loads the schemas as they are now (the schemas page and
	// the lint findings of the clusters page); nil: neither is shown.
	LoadSchemas func() (*schemas.Registry, error)
	// Secrets redacts every page; nil redacts nothing.
	Secrets *secret.Redactor
	// Token, when set, is required on every request (Authorization: Bearer,
	// or the cookie the login form sets).
	Token string
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
	cfg   Config
	csrf  string
	pages map[string]*template.Template
	mux   *http.ServeMux
	cop   *http.CrossOriginProtection
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
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return nil, fmt.Errorf("ui: making the CSRF token: %w", err)
	}
	s := &Server{cfg: cfg, csrf: hex.EncodeToString(b), pages: map[string]*template.Template{}, cop: http.NewCrossOriginProtection()}
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
		t, err := template.New("layout.html").Funcs(funcs()).ParseFS(assets, "templates/layout.html", n)
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
	m.HandleFunc("GET /{$}", s.overview)
	m.HandleFunc("GET /api/overview", s.overviewJSON)
	m.HandleFunc("GET /clusters", s.clusters)
	m.HandleFunc("GET /clusters/{id}", s.cluster)
	m.HandleFunc("GET /dead-letters", s.deadLetters)
	m.HandleFunc("GET /dead-letters/{job}", s.deadLetter)
	m.HandleFunc("GET /schemas", s.schemasPage)
	m.HandleFunc("POST /actions/replay", s.replay)
	m.HandleFunc("POST /actions/purge", s.purge)
	m.HandleFunc("GET /login", s.loginPage)
	m.HandleFunc("POST /login", s.login)
	s.mux = m
}

// ServeHTTP checks the access token (when one is set) and the request's
// origin, then serves the page.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.Header().Set("X-Frame-Options", "DENY")
	w.Header().Set("Referrer-Policy", "same-origin")
	w.Header().Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; frame-ancestors 'none'")
	if s.cfg.Token != "" && !strings.HasPrefix(r.URL.Path, "/login") && !strings.HasPrefix(r.URL.Path, "/static/") && !s.authorized(r) {
		if r.Method == http.MethodGet && !strings.HasPrefix(r.URL.Path, "/api/") {
			http.Redirect(w, r, "/login", http.StatusSeeOther)
			return
		}
		http.Error(w, "a token is required (Authorization: Bearer, or log in at /login)", http.StatusUnauthorized)
		return
	}
	if err := s.cop.Check(r); err != nil {
		http.Error(w, "cross-origin request refused: "+err.Error(), http.StatusForbidden)
		return
	}
	s.mux.ServeHTTP(w, r)
}

// authorized compares the request's token with the console's in constant time.
func (s *Server) authorized(r *http.Request) bool {
	got := ""
	if h := r.Header.Get("Authorization"); strings.HasPrefix(h, "Bearer ") {
		got = strings.TrimPrefix(h, "Bearer ")
	} else if c, err := r.Cookie(tokenCookie); err == nil {
		got = c.Value
	}
	return equal(got, s.cfg.Token)
}

func equal(a, b string) bool {
	return subtle.ConstantTimeCompare([]byte(a), []byte(b)) == 1
}

func (s *Server) loginPage(w http.ResponseWriter, r *http.Request) {
	s.render(w, r, http.StatusOK, "login", page{Title: "Log in"})
}

func (s *Server) login(w http.ResponseWriter, r *http.Request) {
	if !equal(r.PostFormValue("token"), s.cfg.Token) || s.cfg.Token == "" {
		s.render(w, r, http.StatusUnauthorized, "login", page{Title: "Log in", Error: "wrong token"})
		return
	}
	http.SetCookie(w, &http.Cookie{Name: tokenCookie, Value: s.cfg.Token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, Secure: r.TLS != nil})
	http.Redirect(w, r, "/", http.StatusSeeOther)
}

// checkCSRF reports whether the POST carries the console's CSRF token.
func (s *Server) checkCSRF(w http.ResponseWriter, r *http.Request) bool {
	if !equal(r.PostFormValue("csrf"), s.csrf) {
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
	Data     any
}

// render executes a page into a buffer, redacts it and writes it.
func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, name string, p page) {
	t, ok := s.pages[name]
	if !ok {
		http.Error(w, "no template "+name, http.StatusInternalServerError)
		return
	}
	p.CSRF, p.ReadOnly, p.Source, p.Now = s.csrf, s.cfg.ReadOnly, s.cfg.Source, s.cfg.Now()
	var buf bytes.Buffer
	if err := t.ExecuteTemplate(&buf, "layout.html", p); err != nil {
		s.cfg.Logger.Error("console: rendering a page", "page", name, "path", r.URL.Path, "err", err)
		http.Error(w, "rendering the page failed: "+s.cfg.Secrets.String(err.Error()), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(status)
	_, _ = w.Write(s.cfg.Secrets.Bytes(buf.Bytes())) // a client gone away is no error of ours
}

// fail shows an error page; the error is redacted like everything else.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, status int, err error) {
	s.render(w, r, status, "error", page{Title: "Error", Error: err.Error()})
}

// CheckAddr refuses to listen on an address other than loopback without a
// token: the console shows transcripts and replays jobs.
func CheckAddr(addr, token string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return fmt.Errorf("address %q: %w", addr, err)
	}
	if token != "" || IsLoopback(host) {
		return nil
	}
	return fmt.Errorf("address %q is not loopback: listening there needs a token (--ui-token or PIPELINE_UI_TOKEN)", addr)
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
