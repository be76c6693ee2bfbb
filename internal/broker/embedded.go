package broker

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
)

// Files under Config.DataDir.
const (
	serverInfoFile = "nats.json" // {url, pid} of the embedded server last started on the data dir
	// serverLockFile is flock'ed by the process that runs the embedded
	// server, for as long as it runs it: whoever holds it owns the store.
	// The kernel drops the lock when that process dies, kill -9 included.
	serverLockFile = "nats.lock"
	// authFile holds the user and password the embedded server requires,
	// made once per data dir, readable by its owner only (0600).
	authFile    = "nats-auth.json"
	storeSubdir = "nats" // JetStream file store
	authUser    = "pipeline"
)

// Timings of starting, joining and taking over the embedded server.
const (
	// joinTimeout bounds how long Connect waits for a server that another
	// process holds the lock for but that does not answer yet (it is
	// starting, or taking over), and how long it retries setting up the
	// streams while a joined server changes hands.
	joinTimeout = 30 * time.Second
	// watchEvery is how often a process that joined another one's server
	// checks, while its connection is down, whether it can take over.
	watchEvery = 100 * time.Millisecond
	// strandTimeout is how long a joined process waits for a server that
	// another process took over to answer before it gives up.
	strandTimeout = 20 * time.Second
	readyTimeout  = 10 * time.Second
)

// serverInfo is what nats.json holds. It carries no secret: the
// credentials are in nats-auth.json. The lock, not the pid, says whether a
// server runs: the file stays after its process exits so that the next
// server on the data dir listens on the same port.
type serverInfo struct {
	URL string `json:"url"`
	PID int    `json:"pid"`
}

// startOrJoin starts the embedded server on Config.DataDir if no process
// (this one or another) holds the data dir's lock, or joins the one that
// does. A joiner watches its connection: when the server goes away it
// takes the lock and starts the server itself, on the same port and
// store, so its client (and those of the other joiners) reconnect to it.
func startOrJoin(ctx context.Context, c *Conn) error {
	dir := c.cfg.DataDir
	// A bad Listen is refused even when a server runs and would be joined.
	if _, _, err := parseListen(c.cfg.Listen); err != nil {
		return err
	}
	if err := prepareDataDir(dir, c.log); err != nil {
		return err
	}
	auth, err := loadAuth(dir)
	if err != nil {
		return err
	}
	c.auth = auth
	deadline := time.Now().Add(joinTimeout)
	var lastErr error
	for {
		lock, err := tryLock(dir)
		if err != nil {
			return err
		}
		if lock != nil {
			return own(c, lock)
		}
		info, ok := readServerInfo(dir)
		if ok && pidAlive(info.PID) {
			nc, err := c.dial(info.URL, false)
			if err == nil {
				c.url, c.nc = info.URL, nc
				c.log.Debug("joined the embedded nats server of another command", "url", info.URL, "pid", info.PID)
				startWatch(c)
				return nil
			}
			if errors.Is(err, nats.ErrAuthorization) {
				return fmt.Errorf("joining the embedded nats server of data dir %s at %s (pid %d): it refused the credentials in %s (were they replaced while it ran? stop it and start again): %w",
					dir, info.URL, info.PID, filepath.Join(dir, authFile), err)
			}
			lastErr = fmt.Errorf("at %s (pid %d): %w", info.URL, info.PID, err)
		} else {
			lastErr = fmt.Errorf("%s names no live process yet", serverInfoFile)
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("data dir %s: another process holds %s but its embedded nats server does not answer after %v (%v); if that process is stuck, stop it and run the command again",
				dir, filepath.Join(dir, serverLockFile), joinTimeout, lastErr)
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("waiting for the embedded nats server of data dir %s: %w", dir, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// own starts the server while holding lock and connects to it.
func own(c *Conn, lock *os.File) error {
	host, port, err := listenAddr(c)
	if err == nil && port != server.RANDOM_PORT && !portFree(host, port) {
		err = fmt.Errorf("listening on %s for the embedded nats server: the address is in use", net.JoinHostPort(host, strconv.Itoa(port)))
	}
	if err != nil {
		unlock(lock)
		return err
	}
	srv, err := startServer(c, host, port)
	if err != nil {
		unlock(lock)
		return err
	}
	c.url = srv.ClientURL()
	nc, err := c.dial(c.url, false)
	if err != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
		unlock(lock)
		return fmt.Errorf("connecting to the embedded nats server at %s: %w", c.url, err)
	}
	c.nc = nc
	c.mu.Lock()
	c.srv, c.lock = srv, lock
	c.mu.Unlock()
	return writeServerInfo(c.cfg.DataDir, serverInfo{URL: c.url, PID: os.Getpid()})
}

// listenAddr is where a server started on the data dir listens: Config.Listen
// (loopback only), and for the port it leaves open, the port the last
// server on the data dir used when it is free (so a nats context, and the
// clients of a process that went away, find the new server at the same
// URL), else a free one.
func listenAddr(c *Conn) (string, int, error) {
	host, port, err := parseListen(c.cfg.Listen)
	if err != nil || port != server.RANDOM_PORT {
		return host, port, err
	}
	if info, ok := readServerInfo(c.cfg.DataDir); ok {
		if u, err := url.Parse(info.URL); err == nil && u.Hostname() == host {
			if n, err := strconv.Atoi(u.Port()); err == nil && n > 0 && portFree(host, n) {
				return host, n, nil
			}
		}
	}
	return host, port, nil
}

// parseListen reads Config.Listen: host and port, RANDOM_PORT for none or
// 0; 127.0.0.1 when empty; an address that is not loopback is an error.
func parseListen(listen string) (string, int, error) {
	if listen == "" {
		return "127.0.0.1", server.RANDOM_PORT, nil
	}
	h, p, err := net.SplitHostPort(listen)
	if err != nil {
		return "", 0, fmt.Errorf("parsing listen address %q: %w", listen, err)
	}
	if err := checkLoopback(listen, h); err != nil {
		return "", 0, err
	}
	n, err := strconv.Atoi(p)
	if err != nil || n < 0 || n > 65535 {
		return "", 0, fmt.Errorf("parsing listen address %q: bad port", listen)
	}
	if n == 0 {
		n = server.RANDOM_PORT
	}
	return h, n, nil
}

// checkLoopback refuses an address other machines can reach: the embedded
// server speaks plain TCP, so its password and every job would cross the
// network in clear text.
func checkLoopback(addr, host string) error {
	if host == "localhost" {
		return nil
	}
	if ip := net.ParseIP(host); ip != nil && ip.IsLoopback() {
		return nil
	}
	return fmt.Errorf("refusing to listen on %q: not a loopback address, and the embedded nats server has no TLS, so its credentials and every job would cross the network in clear text; listen on 127.0.0.1 or [::1], or run a nats-server with TLS and point --nats-url at it", addr)
}

// portFree reports whether host:port can be listened on right now.
func portFree(host string, port int) bool {
	ln, err := net.Listen("tcp", net.JoinHostPort(host, strconv.Itoa(port)))
	if err != nil {
		return false
	}
	_ = ln.Close()
	return true
}

func startServer(c *Conn, host string, port int) (*server.Server, error) {
	opts := &server.Options{
		ServerName:   "pipeline-embedded",
		Host:         host,
		Port:         port,
		Username:     c.auth.User,
		Password:     c.auth.Password,
		JetStream:    true,
		StoreDir:     filepath.Join(c.cfg.DataDir, storeSubdir),
		SyncAlways:   c.cfg.SyncAlways,
		SyncInterval: c.cfg.SyncInterval,
		NoSigs:       true,
		NoLog:        true,
	}
	srv, err := server.NewServer(opts)
	if err != nil {
		return nil, fmt.Errorf("configuring the embedded nats server: %w", err)
	}
	if c.log.Enabled(context.Background(), slog.LevelDebug) {
		srv.SetLoggerV2(serverLogger{serverLogs(c)}, true, false, false)
	}
	srv.Start()
	if !srv.ReadyForConnections(readyTimeout) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, fmt.Errorf("starting the embedded nats server on %s (store %s): not ready after %v",
			net.JoinHostPort(host, strconv.Itoa(port)), opts.StoreDir, readyTimeout)
	}
	return srv, nil
}

// startWatch starts the goroutine of a joiner that takes the server over
// when its owner goes away. Close stops it.
func startWatch(c *Conn) {
	c.stopWatch = make(chan struct{})
	c.watchDone = make(chan struct{})
	go watch(c)
}

// watch runs in a process that joined another one's server. While its
// connection is down it tries the data dir's lock: the owner releases it
// after its server has shut down, and the kernel releases it when the
// owner dies. Whoever gets it starts the server on the same port; the
// others see their connection come back. If the takeover fails, or the
// server is not back within strandTimeout, the Conn gives up (Lost).
func watch(c *Conn) {
	defer close(c.watchDone)
	tick := time.NewTicker(watchEvery)
	defer tick.Stop()
	var down time.Time
	for {
		select {
		case <-c.stopWatch:
			return
		case <-c.poke:
		case <-tick.C:
		}
		if c.nc.IsClosed() {
			return
		}
		if c.nc.IsConnected() {
			down = time.Time{}
			continue
		}
		if down.IsZero() {
			down = time.Now()
		}
		lock, err := tryLock(c.cfg.DataDir)
		if err != nil {
			giveUp(c, fmt.Errorf("the embedded nats server of data dir %s went away and its lock cannot be taken: %w", c.cfg.DataDir, err))
			return
		}
		if lock != nil {
			if err := takeOver(c, lock); err != nil {
				giveUp(c, err)
			}
			return
		}
		if waited := time.Since(down); waited >= strandTimeout {
			info, _ := readServerInfo(c.cfg.DataDir)
			giveUp(c, fmt.Errorf("the embedded nats server of data dir %s at %s stopped answering, and the process that holds its lock (%s names pid %d at %s) has not let this one back in for %v; if that process is stuck, stop it, then run this command again",
				c.cfg.DataDir, c.url, serverInfoFile, info.PID, info.URL, waited.Round(time.Second)))
			return
		}
	}
}

// takeOver starts the server on the port of the one that went away, while
// holding lock; the Conn's client reconnects to it at once, the other
// joiners' on their next reconnect attempt.
func takeOver(c *Conn, lock *os.File) error {
	fail := func(err error) error {
		unlock(lock)
		return fmt.Errorf("the embedded nats server of data dir %s went away and this process could not take it over at %s: %w; run the command again (it starts a server of its own)", c.cfg.DataDir, c.url, err)
	}
	u, err := url.Parse(c.url)
	if err != nil {
		return fail(err)
	}
	port, err := strconv.Atoi(u.Port())
	if err != nil {
		return fail(fmt.Errorf("no port in the url: %w", err))
	}
	if !portFree(u.Hostname(), port) {
		return fail(fmt.Errorf("port %d is taken by another program", port))
	}
	prev, _ := readServerInfo(c.cfg.DataDir)
	srv, err := startServer(c, u.Hostname(), port)
	if err != nil {
		return fail(err)
	}
	c.mu.Lock()
	c.srv, c.lock = srv, lock
	c.mu.Unlock()
	if err := writeServerInfo(c.cfg.DataDir, serverInfo{URL: c.url, PID: os.Getpid()}); err != nil {
		c.log.Warn("recording the embedded nats server", "err", err)
	}
	if err := c.nc.ForceReconnect(); err != nil {
		c.log.Warn("reconnecting to the embedded nats server", "err", err)
	}
	c.log.Warn("took over the embedded nats server: the process that ran it is gone", "data_dir", c.cfg.DataDir, "url", c.url, "previous_pid", prev.PID)
	return nil
}

// giveUp marks the Conn lost (Lost, Err) and closes its client, so that
// nothing waits on a server that will not come back.
func giveUp(c *Conn, err error) {
	c.log.Error("lost the embedded nats server", "err", err)
	c.mu.Lock()
	c.lostErr = err
	c.mu.Unlock()
	// The client is closed before Lost fires: whoever wakes on Lost finds
	// nothing still trying to reach the server.
	c.nc.Close()
	close(c.lost)
}

// prepareDataDir creates the data dir readable by its owner only, and
// takes group and other permissions away from one that has them: the
// store holds every job in clear.
func prepareDataDir(dir string, log *slog.Logger) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating data dir %s: %w", dir, err)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		return fmt.Errorf("reading data dir %s: %w", dir, err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		if err := os.Chmod(dir, perm&0o700); err != nil {
			log.Warn("data dir is open to other users and cannot be closed", "data_dir", dir, "mode", fmt.Sprintf("%04o", perm), "err", err)
		} else {
			log.Warn("data dir was open to other users: made it owner-only", "data_dir", dir, "mode", fmt.Sprintf("%04o", perm), "now", fmt.Sprintf("%04o", perm&0o700))
		}
	}
	return nil
}

// tryLock takes the data dir's lock without waiting; nil, nil when another
// process (or another Conn of this one: flock locks belong to the open
// file) holds it.
func tryLock(dir string) (*os.File, error) {
	path := filepath.Join(dir, serverLockFile)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o600)
	if err != nil {
		return nil, fmt.Errorf("opening lock file: %w", err)
	}
	for {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if !errors.Is(err, syscall.EINTR) {
			break
		}
	}
	switch {
	case err == nil:
		return f, nil
	case errors.Is(err, syscall.EWOULDBLOCK):
		f.Close()
		return nil, nil
	default:
		f.Close()
		return nil, fmt.Errorf("locking %s: %w", path, err)
	}
}

func unlock(f *os.File) {
	_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
	f.Close()
}

// embeddedAuth is what nats-auth.json holds.
type embeddedAuth struct {
	User     string `json:"user"`
	Password string `json:"password"`
}

// loadAuth reads the data dir's credentials, making them first if there
// are none. Two processes making them at once agree: the file appears
// whole (a hard link of a finished temp file) and the loser reads the
// winner's.
func loadAuth(dir string) (embeddedAuth, error) {
	path := filepath.Join(dir, authFile)
	for range 2 {
		a, err := readAuth(path)
		if !errors.Is(err, fs.ErrNotExist) {
			return a, err
		}
		if err := createAuth(dir, path); err != nil && !errors.Is(err, fs.ErrExist) {
			return embeddedAuth{}, err
		}
	}
	return readAuth(path)
}

func readAuth(path string) (embeddedAuth, error) {
	f, err := os.Open(path)
	if err != nil {
		return embeddedAuth{}, fmt.Errorf("reading the embedded server's credentials: %w", err)
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return embeddedAuth{}, fmt.Errorf("reading the embedded server's credentials: %w", err)
	}
	if perm := fi.Mode().Perm(); perm&0o077 != 0 {
		return embeddedAuth{}, fmt.Errorf("credentials file %s is open to other users (mode %04o): chmod 600 it, or delete it while no pipeline command runs on the data dir to have new ones made", path, perm)
	}
	var a embeddedAuth
	if err := json.NewDecoder(f).Decode(&a); err != nil {
		return embeddedAuth{}, fmt.Errorf("reading credentials file %s: %w", path, err)
	}
	if a.User == "" || a.Password == "" {
		return embeddedAuth{}, fmt.Errorf("credentials file %s: no user or no password (delete it while no pipeline command runs on the data dir to have new ones made)", path)
	}
	return a, nil
}

func createAuth(dir, path string) error {
	secret := make([]byte, 32)
	if _, err := rand.Read(secret); err != nil {
		return fmt.Errorf("making credentials: %w", err)
	}
	b, err := json.Marshal(embeddedAuth{User: authUser, Password: base64.RawURLEncoding.EncodeToString(secret)})
	if err != nil {
		return fmt.Errorf("encoding credentials: %w", err)
	}
	tmp, err := os.CreateTemp(dir, authFile+".*") // mode 0600
	if err != nil {
		return fmt.Errorf("writing credentials: %w", err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(append(b, '\n')); err != nil {
		tmp.Close()
		return fmt.Errorf("writing credentials: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return fmt.Errorf("writing credentials: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing credentials: %w", err)
	}
	if err := os.Link(tmp.Name(), path); err != nil {
		return fmt.Errorf("writing credentials: %w", err)
	}
	return nil
}

func readServerInfo(dir string) (serverInfo, bool) {
	b, err := os.ReadFile(filepath.Join(dir, serverInfoFile))
	if err != nil {
		return serverInfo{}, false
	}
	var info serverInfo
	if err := json.Unmarshal(b, &info); err != nil || info.URL == "" || info.PID <= 0 {
		return serverInfo{}, false
	}
	return info, true
}

func writeServerInfo(dir string, info serverInfo) error {
	b, err := json.Marshal(info)
	if err != nil {
		return fmt.Errorf("encoding %s: %w", serverInfoFile, err)
	}
	tmp := filepath.Join(dir, serverInfoFile+".tmp")
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		return fmt.Errorf("writing %s: %w", serverInfoFile, err)
	}
	if err := os.Rename(tmp, filepath.Join(dir, serverInfoFile)); err != nil {
		return fmt.Errorf("writing %s: %w", serverInfoFile, err)
	}
	return nil
}

func pidAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}

// serverLogger routes nats-server's logs to slog (only installed when the
// Config.Logger is enabled at debug level), through the Conn's logGate.
type serverLogger struct{ g *logGate }

func (s serverLogger) Noticef(format string, v ...any) { s.g.log(slog.LevelInfo, format, v) }
func (s serverLogger) Warnf(format string, v ...any)   { s.g.log(slog.LevelWarn, format, v) }
func (s serverLogger) Fatalf(format string, v ...any)  { s.g.log(slog.LevelError, format, v) }
func (s serverLogger) Errorf(format string, v ...any)  { s.g.log(slog.LevelError, format, v) }
func (s serverLogger) Debugf(format string, v ...any)  { s.g.log(slog.LevelDebug, format, v) }
func (s serverLogger) Tracef(format string, v ...any)  { s.g.log(slog.LevelDebug, format, v) }

// logGate passes the embedded server's log lines on until the Conn is
// closed: nats-server's goroutines may still log while it shuts down, and
// nothing may reach the caller's logger once Close returned.
type logGate struct {
	mu sync.Mutex
	l  *slog.Logger // nil once closed
}

func (g *logGate) log(level slog.Level, format string, v []any) {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.l != nil {
		g.l.Log(context.Background(), level, fmt.Sprintf(format, v...))
	}
}

func (g *logGate) close() {
	g.mu.Lock()
	g.l = nil
	g.mu.Unlock()
}

// serverLogs is the gate of this Conn's embedded servers' logs (one for
// every server it starts, the ones of a takeover included).
func serverLogs(c *Conn) *logGate {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.srvLogs == nil {
		c.srvLogs = &logGate{l: c.log.With("component", "nats-server")}
	}
	return c.srvLogs
}
