package ui

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"math"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"golang.org/x/time/rate"
)

// The console's guards: the Host check (DNS rebinding), the sessions and
// their CSRF tokens, and the throttle of wrong tokens.

// MinTokenLen is the shortest token accepted for an address that is not
// loopback.
const MinTokenLen = 16

// sessionCookie holds a browser's session id: random, never the token. On
// a console with a token, the id is valid once the login form took the
// token (the server keeps the logged-in ids); without a token every
// browser gets one, for its CSRF token.
const sessionCookie = "pipeline_ui_session"

// sessionTTL is how long a login lasts.
const sessionTTL = 12 * time.Hour

// maxSessions caps the logged-in sessions kept; only a correct token makes
// one.
const maxSessions = 10_000

// hosts is the Host check: the names a request may address the console by.
type hosts struct {
	names map[string]bool
	// anyIP accepts any IP literal: the console listens on every
	// interface, and an IP literal cannot be rebound (a DNS rebinding
	// page always has a name).
	anyIP bool
	said  string
}

var loopbackNames = []string{"localhost", "127.0.0.1", "::1"}

func newHosts(addr string, extra []string) hosts {
	h := hosts{names: map[string]bool{}}
	host := "127.0.0.1"
	if addr != "" {
		if hh, _, err := net.SplitHostPort(addr); err == nil {
			host = hh
		} else {
			host = addr
		}
	}
	host = canonHost(host)
	switch ip := net.ParseIP(host); {
	case host == "" || ip != nil && ip.IsUnspecified():
		h.anyIP = true
		for _, n := range loopbackNames {
			h.names[n] = true
		}
	case IsLoopback(host):
		h.names[host] = true
		for _, n := range loopbackNames {
			h.names[n] = true
		}
	default:
		h.names[host] = true
	}
	for _, e := range extra {
		if e = canonHost(e); e != "" {
			h.names[e] = true
		}
	}
	var list []string
	for n := range h.names {
		list = append(list, n)
	}
	slices.Sort(list)
	h.said = strings.Join(list, ", ")
	if h.anyIP {
		h.said = "any IP address of this machine, " + h.said
	}
	return h
}

// canonHost is a host without its port, brackets, trailing dot or case.
func canonHost(h string) string {
	if hh, _, err := net.SplitHostPort(h); err == nil {
		h = hh
	}
	h = strings.TrimSuffix(strings.Trim(h, "[]"), ".")
	return strings.ToLower(h)
}

// allowed reports whether a request's Host names this console.
func (h hosts) allowed(host string) bool {
	c := canonHost(host)
	if c == "" {
		return false
	}
	if h.names[c] {
		return true
	}
	return h.anyIP && net.ParseIP(c) != nil
}

// sessions signs CSRF tokens and keeps the logged-in session ids.
type sessions struct {
	key []byte
	mu  sync.Mutex
	in  map[string]time.Time // logged-in id -> expiry
}

func newSessions() (*sessions, error) {
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		return nil, fmt.Errorf("ui: making the session key: %w", err)
	}
	return &sessions{key: key, in: map[string]time.Time{}}, nil
}

func newID() (string, error) {
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		return "", fmt.Errorf("ui: making a session id: %w", err)
	}
	return hex.EncodeToString(b), nil
}

// csrf is the CSRF token of a session: an HMAC of its id, so each session
// has its own and the server keeps none.
func (s *sessions) csrf(id string) string {
	if id == "" {
		return ""
	}
	m := hmac.New(sha256.New, s.key)
	m.Write([]byte("csrf\x00" + id))
	return hex.EncodeToString(m.Sum(nil))
}

func (s *sessions) login(id string, now time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.in) >= maxSessions {
		for k, exp := range s.in {
			if !now.Before(exp) {
				delete(s.in, k)
			}
		}
		for k := range s.in { // still full: drop any one
			if len(s.in) < maxSessions {
				break
			}
			delete(s.in, k)
		}
	}
	s.in[id] = now.Add(sessionTTL)
}

func (s *sessions) loggedIn(id string, now time.Time) bool {
	if id == "" {
		return false
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	exp, ok := s.in[id]
	if ok && !now.Before(exp) {
		delete(s.in, id)
		return false
	}
	return ok
}

// sessionID reads the request's session id ("" when none or malformed).
func sessionID(r *http.Request) string {
	c, err := r.Cookie(sessionCookie)
	if err != nil || len(c.Value) != 64 {
		return ""
	}
	if _, err := hex.DecodeString(c.Value); err != nil {
		return ""
	}
	return c.Value
}

func setSession(w http.ResponseWriter, r *http.Request, id string, maxAge time.Duration) {
	http.SetCookie(w, &http.Cookie{Name: sessionCookie, Value: id, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: r.TLS != nil, MaxAge: int(maxAge.Seconds())})
}

// reqInfo is what the guards learnt of a request, for the handlers.
type reqInfo struct {
	session string
	bearer  bool
}

type infoKey struct{}

func info(r *http.Request) reqInfo {
	i, _ := r.Context().Value(infoKey{}).(reqInfo)
	return i
}

func withInfo(r *http.Request, i reqInfo) *http.Request {
	return r.WithContext(context.WithValue(r.Context(), infoKey{}, i))
}

// throttle limits wrong tokens: per client address, and over all clients.
// A client out of allowance is refused before its token is compared, so a
// guess made then learns nothing.
type throttle struct {
	mu     sync.Mutex
	per    map[string]*rate.Limiter
	global *rate.Limiter
	now    func() time.Time
}

const (
	// a client may get 5 tokens wrong at once, then one every 2 s
	clientBurst = 5
	clientEvery = 2 * time.Second
	// every client together: 50 at once, then 5 a second
	globalBurst = 50
	globalEvery = 200 * time.Millisecond
	maxClients  = 4096
)

func newThrottle(now func() time.Time) *throttle {
	return &throttle{per: map[string]*rate.Limiter{}, global: rate.NewLimiter(rate.Every(globalEvery), globalBurst), now: now}
}

func client(r *http.Request) string {
	if h, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return h
	}
	return r.RemoteAddr
}

func (t *throttle) limiter(c string) *rate.Limiter {
	l := t.per[c]
	if l == nil {
		if len(t.per) >= maxClients {
			now := t.now()
			for k, v := range t.per { // forget the clients back to a full allowance
				if v.TokensAt(now) >= clientBurst {
					delete(t.per, k)
				}
			}
		}
		l = rate.NewLimiter(rate.Every(clientEvery), clientBurst)
		t.per[c] = l
	}
	return l
}

// wait says how long the client must wait before its next try; 0: it may
// try now.
func (t *throttle) wait(c string) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	var d time.Duration
	for _, l := range []*rate.Limiter{t.limiter(c), t.global} {
		if tok := l.TokensAt(now); tok < 1 {
			d = max(d, time.Duration((1-tok)/float64(l.Limit())*float64(time.Second)))
		}
	}
	return d
}

// failed counts a wrong token against the client and everyone.
func (t *throttle) failed(c string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	now := t.now()
	t.limiter(c).AllowN(now, 1)
	t.global.AllowN(now, 1)
}

// tooMany answers 429 with Retry-After.
func tooMany(w http.ResponseWriter, d time.Duration) {
	w.Header().Set("Retry-After", strconv.Itoa(int(math.Ceil(d.Seconds()))))
	http.Error(w, fmt.Sprintf("too many wrong tokens: try again in %s", d.Round(time.Second)), http.StatusTooManyRequests)
}

// tokenRule is the minimum strength of a token for an address that is not
// loopback ("" when the token passes).
func tokenRule(token string) string {
	if n := utf8.RuneCountInString(token); n < MinTokenLen {
		return fmt.Sprintf("a token of at least %d characters is required to listen on an address that is not loopback (this one has %d)", MinTokenLen, n)
	}
	return ""
}
