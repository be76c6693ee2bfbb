package broker

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats.go"
)

func TestEmbeddedRequiresCredentials(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "data")
	c := newConn(t, func(cfg *Config) { cfg.DataDir = dir })

	a, err := readAuth(filepath.Join(dir, authFile))
	if err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		name string
		opts []nats.Option
		ok   bool
	}{
		{name: "no credentials", ok: false},
		{name: "wrong password", opts: []nats.Option{nats.UserInfo(a.User, a.Password+"x")}, ok: false},
		{name: "token instead", opts: []nats.Option{nats.Token(a.Password)}, ok: false},
		{name: "the data dir's credentials", opts: []nats.Option{nats.UserInfo(a.User, a.Password)}, ok: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			nc, err := nats.Connect(c.URL(), append(tc.opts, nats.MaxReconnects(0))...)
			if err == nil {
				defer nc.Close()
			}
			if !tc.ok {
				if err == nil {
					t.Fatal("a raw client without the credentials was let in")
				}
				if !errors.Is(err, nats.ErrAuthorization) {
					t.Errorf("refused with %v, want an authorization violation", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("refused with the data dir's credentials: %v", err)
			}
			// JetStream answers the authorised user.
			if _, err := nc.Request("$JS.API.INFO", nil, 5*time.Second); err != nil {
				t.Errorf("jetstream api: %v", err)
			}
		})
	}

	for path, want := range map[string]os.FileMode{dir: 0o700, filepath.Join(dir, authFile): 0o600} {
		fi, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s has mode %04o, want %04o", path, fi.Mode().Perm(), want)
		}
	}
	info, err := os.ReadFile(filepath.Join(dir, serverInfoFile))
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(info), a.Password) {
		t.Errorf("%s holds the password: %s", serverInfoFile, info)
	}
	if s := c.Secrets(); len(s) != 1 || s[0] != a.Password {
		t.Errorf("Secrets() = %d values, want the password", len(s))
	}
}

func TestEmbeddedCredentialsMadeOnce(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	// Many makers at once end with one file that all of them read.
	var wg sync.WaitGroup
	got := make([]embeddedAuth, 8)
	errs := make([]error, len(got))
	for i := range got {
		wg.Go(func() { got[i], errs[i] = loadAuth(dir) })
	}
	wg.Wait()
	for i := range got {
		if errs[i] != nil {
			t.Fatalf("loadAuth #%d: %v", i, errs[i])
		}
		if got[i] != got[0] || got[i].Password == "" {
			t.Errorf("loadAuth #%d read other credentials than #0", i)
		}
	}
	c1 := newConn(t, func(cfg *Config) { cfg.DataDir = dir })
	if c1.auth != got[0] {
		t.Error("Connect made new credentials on a data dir that has some")
	}
	left, err := filepath.Glob(filepath.Join(dir, authFile+".*"))
	if err != nil || len(left) != 0 {
		t.Errorf("temp files left: %v %v", left, err)
	}
}

func TestEmbeddedCredentialsFileOpenToOthers(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	if _, err := loadAuth(dir); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(filepath.Join(dir, authFile), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	c, err := Connect(ctx, Config{DataDir: dir})
	if err == nil {
		c.Close()
		t.Fatal("Connect used a credentials file other users can read")
	}
	if !strings.Contains(err.Error(), "chmod 600") || !strings.Contains(err.Error(), authFile) {
		t.Errorf("error %q does not name the file and the fix", err)
	}
}

func TestEmbeddedDataDirMadeOwnerOnly(t *testing.T) {
	t.Parallel()
	dir := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil { // past the umask
		t.Fatal(err)
	}
	newConn(t, func(cfg *Config) { cfg.DataDir = dir })
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o700 {
		t.Errorf("data dir mode %04o after Connect, want 0700", fi.Mode().Perm())
	}
}

func TestEmbeddedListenLoopbackOnly(t *testing.T) {
	t.Parallel()
	cases := []struct {
		listen string
		ok     bool
	}{
		{"127.0.0.1:0", true},
		{"localhost:0", true},
		{"0.0.0.0:0", false},
		{":0", false},
		{"192.0.2.10:4222", false},
		{"example.com:4222", false},
	}
	for _, tc := range cases {
		t.Run(tc.listen, func(t *testing.T) {
			t.Parallel()
			ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
			defer cancel()
			c, err := Connect(ctx, Config{DataDir: t.TempDir(), Listen: tc.listen})
			if tc.ok {
				if err != nil {
					t.Fatalf("loopback %s refused: %v", tc.listen, err)
				}
				c.Close()
				return
			}
			if err == nil {
				c.Close()
				t.Fatalf("listening on %s without TLS was allowed", tc.listen)
			}
			for _, want := range []string{tc.listen, "not a loopback address", "no TLS"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
		})
	}
}

// A non-loopback Listen is refused even where a server runs to be joined:
// the command would start one there the moment it took over.
func TestEmbeddedListenLoopbackOnlyWhenJoining(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	newConn(t, func(c *Config) { c.DataDir = dir })
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Second)
	defer cancel()
	c, err := Connect(ctx, Config{DataDir: dir, Listen: "0.0.0.0:4222"})
	if err == nil {
		c.Close()
		t.Fatal("joined with a non-loopback listen address")
	}
	if !strings.Contains(err.Error(), "not a loopback address") {
		t.Errorf("error %q does not say why", err)
	}
}

// A joiner whose server is gone while its owner keeps the lock (so
// nobody can take over) gives up within strandTimeout, saying which data
// dir, instead of waiting forever.
func TestEmbeddedJoinerGivesUp(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	owner := newConn(t, func(c *Config) { c.DataDir = dir })
	joiner := newConn(t, func(c *Config) { c.DataDir = dir })
	owner.mu.Lock()
	srv := owner.srv
	owner.mu.Unlock()
	srv.Shutdown()
	srv.WaitForShutdown()

	select {
	case <-joiner.Lost():
	case <-time.After(strandTimeout + 30*time.Second):
		t.Fatal("the joiner still waits for a server that is gone")
	}
	err := joiner.Err()
	if err == nil || !strings.Contains(err.Error(), dir) {
		t.Errorf("Err() = %v, want it to name the data dir %s", err, dir)
	}
	if !joiner.NATS().IsClosed() {
		t.Error("the lost joiner's client is not closed")
	}
	if joiner.Embedded() {
		t.Error("the joiner started a server while the owner held the lock")
	}
}
