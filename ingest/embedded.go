package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"time"

	"github.com/nats-io/nats-server/v2/server"
)

// Files under Config.DataDir.
const (
	serverInfoFile = "nats.json" // {url, pid} of the running embedded server
	serverLockFile = "nats.lock" // flock'ed while nats.json is read or written
	storeSubdir    = "nats"      // JetStream file store
)

// serverInfo is what nats.json holds.
type serverInfo struct {
	URL string `json:"url"`
	PID int    `json:"pid"`
}

// startOrJoin connects to the embedded server another Conn (this process or
// another) runs on the same DataDir, or starts one. The check and the start
// happen under an exclusive flock so two processes never both start one.
func (c *Conn) startOrJoin(ctx context.Context) error {
	dir := c.cfg.DataDir
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("creating data dir: %w", err)
	}
	unlock, err := lockDir(ctx, dir)
	if err != nil {
		return err
	}
	defer unlock()

	if info, ok := readServerInfo(dir); ok && pidAlive(info.PID) {
		nc, err := c.dial(info.URL, false)
		if err == nil {
			c.url = info.URL
			c.nc = nc
			c.log.Debug("joined the embedded nats server of another command", "url", info.URL, "pid", info.PID)
			return nil
		}
		c.log.Debug("embedded nats server in nats.json does not answer; starting one", "url", info.URL, "err", err)
	}

	srv, err := c.startServer()
	if err != nil {
		return err
	}
	c.srv = srv
	c.url = srv.ClientURL()
	nc, err := c.dial(c.url, false)
	if err != nil {
		srv.Shutdown()
		srv.WaitForShutdown()
		c.srv = nil
		return fmt.Errorf("connecting to the embedded nats server at %s: %w", c.url, err)
	}
	c.nc = nc
	if err := writeServerInfo(dir, serverInfo{URL: c.url, PID: os.Getpid()}); err != nil {
		return err
	}
	return nil
}

func (c *Conn) startServer() (*server.Server, error) {
	host, port := "127.0.0.1", server.RANDOM_PORT
	if c.cfg.Listen != "" {
		h, p, err := net.SplitHostPort(c.cfg.Listen)
		if err != nil {
			return nil, fmt.Errorf("parsing listen address %q: %w", c.cfg.Listen, err)
		}
		if h != "" {
			host = h
		}
		n, err := strconv.Atoi(p)
		if err != nil || n < 0 || n > 65535 {
			return nil, fmt.Errorf("parsing listen address %q: bad port", c.cfg.Listen)
		}
		if n != 0 {
			port = n
		}
	}
	opts := &server.Options{
		ServerName:   "pipeline-embedded",
		Host:         host,
		Port:         port,
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
		srv.SetLoggerV2(serverLogger{c.log.With("component", "nats-server")}, true, false, false)
	}
	srv.Start()
	if !srv.ReadyForConnections(10 * time.Second) {
		srv.Shutdown()
		srv.WaitForShutdown()
		return nil, fmt.Errorf("starting the embedded nats server on %s:%d (store %s): not ready after 10s", host, port, opts.StoreDir)
	}
	return srv, nil
}

// forgetServer removes nats.json if it still names this process's server.
func (c *Conn) forgetServer() error {
	unlock, err := lockDir(context.Background(), c.cfg.DataDir)
	if err != nil {
		return err
	}
	defer unlock()
	info, ok := readServerInfo(c.cfg.DataDir)
	if !ok || info.PID != os.Getpid() || info.URL != c.url {
		return nil
	}
	if err := os.Remove(filepath.Join(c.cfg.DataDir, serverInfoFile)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("removing %s: %w", serverInfoFile, err)
	}
	return nil
}

// lockDir takes an exclusive flock on DataDir/nats.lock, polling so ctx can
// cancel the wait.
func lockDir(ctx context.Context, dir string) (unlock func(), err error) {
	path := filepath.Join(dir, serverLockFile)
	f, err := os.OpenFile(path, os.O_CREATE|os.O_RDWR, 0o644)
	if err != nil {
		return nil, fmt.Errorf("opening lock file: %w", err)
	}
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			break
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("locking %s: %w", path, err)
		}
		select {
		case <-ctx.Done():
			f.Close()
			return nil, fmt.Errorf("waiting for lock %s: %w", path, ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
	return func() {
		_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
	}, nil
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
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
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
// Config.Logger is enabled at debug level).
type serverLogger struct{ l *slog.Logger }

func (s serverLogger) Noticef(format string, v ...any) { s.l.Info(fmt.Sprintf(format, v...)) }
func (s serverLogger) Warnf(format string, v ...any)   { s.l.Warn(fmt.Sprintf(format, v...)) }
func (s serverLogger) Fatalf(format string, v ...any)  { s.l.Error(fmt.Sprintf(format, v...)) }
func (s serverLogger) Errorf(format string, v ...any)  { s.l.Error(fmt.Sprintf(format, v...)) }
func (s serverLogger) Debugf(format string, v ...any)  { s.l.Debug(fmt.Sprintf(format, v...)) }
func (s serverLogger) Tracef(format string, v ...any)  { s.l.Debug(fmt.Sprintf(format, v...)) }
