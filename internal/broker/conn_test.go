package broker

import (
	"context"
	"errors"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func TestConnectStreamsIdempotent(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	ctx := t.Context()
	var urls []string
	for i := range 2 {
		c, err := Connect(ctx, Config{DataDir: dir, DuplicateWindow: 3 * time.Minute})
		if err != nil {
			t.Fatalf("Connect #%d: %v", i+1, err)
		}
		if !c.Embedded() {
			t.Errorf("Connect #%d: not the embedded server's owner", i+1)
		}
		urls = append(urls, c.URL())
		for _, want := range streamConfigs(c) {
			s, err := c.JetStream().Stream(ctx, want.Name)
			if err != nil {
				t.Fatalf("stream %s: %v", want.Name, err)
			}
			got := s.CachedInfo().Config
			if got.Retention != want.Retention || got.Storage != jetstream.FileStorage ||
				got.Duplicates != 3*time.Minute || strings.Join(got.Subjects, ",") != want.Subjects[0] {
				t.Errorf("stream %s config = %+v", want.Name, got)
			}
		}
		if err := c.Close(); err != nil {
			t.Fatalf("Close #%d: %v", i+1, err)
		}
		if err := c.Close(); err != nil {
			t.Fatalf("second Close #%d: %v", i+1, err)
		}
	}
	if _, err := os.Stat(filepath.Join(dir, "nats", "jetstream")); err != nil {
		t.Errorf("store not under DataDir/nats: %v", err)
	}
	// The second server listens where the first did: a nats context, and
	// the clients of a process that went away, keep working.
	if urls[0] != urls[1] {
		t.Errorf("second server on the data dir at %s, the first was at %s", urls[1], urls[0])
	}
}

func TestConnectStaleServerInfo(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name     string
		occupied bool // another program listens on the stale port
	}{
		{name: "port free, reused", occupied: false},
		{name: "port taken, another one", occupied: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir := t.TempDir()
			ln, err := net.Listen("tcp", "127.0.0.1:0")
			if err != nil {
				t.Fatal(err)
			}
			stale := "nats://" + ln.Addr().String()
			if tc.occupied {
				defer ln.Close()
			} else {
				ln.Close()
			}
			// A nats.json left by a process that died (pid 0x7ffffff0 is not alive).
			if err := writeServerInfo(dir, serverInfo{URL: stale, PID: 0x7ffffff0}); err != nil {
				t.Fatal(err)
			}
			c := newConn(t, func(c *Config) { c.DataDir = dir })
			if !c.Embedded() {
				t.Fatal("stale nats.json was joined")
			}
			if reused := c.URL() == stale; reused == tc.occupied {
				t.Errorf("server at %s, stale nats.json named %s (port taken: %v)", c.URL(), stale, tc.occupied)
			}
			info, ok := readServerInfo(dir)
			if !ok || info.PID != os.Getpid() || info.URL != c.URL() {
				t.Errorf("%s = %+v, want this process at %s", serverInfoFile, info, c.URL())
			}
		})
	}
}

func TestConnectErrors(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name    string
		cfg     Config
		want    string
		notWant string
	}{
		{name: "nothing", cfg: Config{}, want: "no nats url"},
		{name: "url with secret", cfg: Config{URL: "nats://user:hunter2@127.0.0.1:1"}, want: "nats://REDACTED@127.0.0.1:1", notWant: "hunter2"},
		{name: "cert without key", cfg: Config{URL: "nats://127.0.0.1:1", TLSCert: "c.pem"}, want: "cert and the key"},
		{name: "bad listen", cfg: Config{DataDir: t.TempDir(), Listen: "127.0.0.1"}, want: "listen address"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
			defer cancel()
			c, err := Connect(ctx, tc.cfg)
			if err == nil {
				c.Close()
				t.Fatal("Connect succeeded")
			}
			if !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %q does not say %q", err, tc.want)
			}
			if tc.notWant != "" && strings.Contains(err.Error(), tc.notWant) {
				t.Errorf("error %q leaks %q", err, tc.notWant)
			}
		})
	}
}

func TestConnectURL(t *testing.T) {
	t.Parallel()
	owner := newConn(t)
	// The embedded server through --nats-url, as an operator points a tool
	// at it: its credentials in the URL.
	u, err := url.Parse(owner.URL())
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(owner.auth.User, owner.auth.Password)
	c, err := Connect(t.Context(), Config{URL: u.String()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Embedded() || c.URL() != u.String() {
		t.Errorf("URL mode: embedded=%v url=%s", c.Embedded(), RedactURL(c.URL()))
	}
	if s := c.Secrets(); len(s) != 1 || s[0] != owner.auth.Password {
		t.Errorf("Secrets() in URL mode: %d values, want the URL's password", len(s))
	}
	// Without them the URL is refused, and the error says so.
	_, err = Connect(t.Context(), Config{URL: owner.URL()})
	if !errors.Is(err, nats.ErrAuthorization) {
		t.Errorf("Connect without credentials: %v, want an authorization violation", err)
	}
}

func TestRedactURL(t *testing.T) {
	t.Parallel()
	cases := []struct{ in, want string }{
		{"nats://127.0.0.1:4222", "nats://127.0.0.1:4222"},
		{"nats://u:p@h:1,nats://tok@h2:2", "nats://REDACTED@h:1,nats://REDACTED@h2:2"},
		{"u:p@h:1", "REDACTED@h:1"},
	}
	for _, tc := range cases {
		t.Run(tc.in, func(t *testing.T) {
			if got := RedactURL(tc.in); got != tc.want {
				t.Errorf("RedactURL(%q) = %q, want %q", tc.in, got, tc.want)
			}
		})
	}
}
