package broker

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Defaults of Config.
const (
	DefaultDuplicateWindow = 2 * time.Minute
	defaultReconnectWait   = time.Second
	defaultConnectTimeout  = 5 * time.Second
	// A connection that went silent without closing (half-open TCP) is
	// found by the client's pings: after pingMaxOut unanswered ones, at
	// most (pingMaxOut+1)*pingInterval. nats.go's defaults (2 minutes, 2)
	// left the workers stalled for minutes in the faults suite.
	pingInterval = 5 * time.Second
	pingMaxOut   = 3
	// PublishAsyncMaxPending bounds the async publishes outstanding on one
	// Conn; past it PublishAsync stalls (and we wait and retry).
	PublishAsyncMaxPending = 4096
)

// ErrNoDataDir is returned by Connect when neither a URL nor a DataDir is set.
var ErrNoDataDir = errors.New("no nats url and no data dir")

// Conn is a connection to NATS with the streams set up.
type Conn struct {
	cfg Config
	log *slog.Logger
	nc  *nats.Conn
	js  jetstream.JetStream
	url string
	// buckets: the object store for large payloads and the job ledger.
	buckets buckets
	// dupWindow is the JOBS stream's duplicate window as set up (ns).
	dupWindow atomic.Int64
	// replies takes the replies of RequestMany.
	replies replyMux

	// auth are the embedded server's credentials (zero with a URL).
	auth embeddedAuth

	// mu guards srv, lock and lostErr: a joiner's watch goroutine sets
	// them when it takes the server over or gives up.
	mu sync.Mutex
	// srv is the embedded server while this Conn runs it (it started it,
	// or took it over), nil when it dialled a URL or joined another
	// Conn's server; lock is the data dir's lock it holds meanwhile.
	srv *server.Server
	// srvLogs gates the embedded server's log lines (see logGate).
	srvLogs *logGate
	lock    *os.File
	// poke wakes the watch goroutine when the connection drops;
	// stopWatch and watchDone stop it (nil unless this Conn joined).
	poke      chan struct{}
	stopWatch chan struct{}
	watchDone chan struct{}
	// lost is closed, with lostErr set, when this Conn gave up on the
	// embedded server.
	lost    chan struct{}
	lostErr error

	closeOnce sync.Once
	closeErr  error
}

func (cfg Config) withDefaults() Config {
	if cfg.Replicas <= 0 {
		cfg.Replicas = 1
	}
	return cfg
}

func discardIfNil(l *slog.Logger) *slog.Logger {
	if l == nil {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return l
}

// Connect starts or joins the embedded server (or dials Config.URL), connects
// and creates the streams idempotently.
func Connect(ctx context.Context, cfg Config) (*Conn, error) {
	cfg = cfg.withDefaults()
	c := &Conn{cfg: cfg, log: discardIfNil(cfg.Logger), poke: make(chan struct{}, 1), lost: make(chan struct{})}
	var err error
	switch {
	case cfg.URL != "":
		c.url = cfg.URL
		c.nc, err = c.dial(cfg.URL, true)
		if err != nil {
			return nil, fmt.Errorf("connecting to nats at %s: %w", RedactURL(cfg.URL), err)
		}
	case cfg.DataDir != "":
		if err := startOrJoin(ctx, c); err != nil {
			return nil, err
		}
	default:
		return nil, ErrNoDataDir
	}
	c.js, err = jetstream.New(c.nc, jetstream.WithPublishAsyncMaxPending(PublishAsyncMaxPending),
		jetstream.WithPublishAsyncTimeout(publishAckTimeout))
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("creating jetstream context: %w", err)
	}
	if err := c.setupStreams(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
}

// setupStreams runs ensureStreams, again while the embedded server
// changes hands (RetryOnHandover).
func (c *Conn) setupStreams(ctx context.Context) error {
	return c.RetryOnHandover(ctx, "setting up the streams", func() error { return ensureStreams(ctx, c) })
}

// RetryOnHandover runs fn, and on the embedded server runs it again for up
// to joinTimeout while it fails the way requests fail when a joined
// server changes hands (its owner exited and this process, or another,
// is taking it over): timeouts, no responders, no response from a stream
// that lived in the old server's memory. The server this process now owns
// answers within moments. An error of the JetStream API (a configuration
// the server refuses) is final, and so is an external server's error.
func (c *Conn) RetryOnHandover(ctx context.Context, what string, fn func() error) error {
	deadline := time.Now().Add(joinTimeout)
	for {
		err := fn()
		var apiErr *jetstream.APIError
		if err == nil || c.cfg.URL != "" || errors.As(err, &apiErr) || ctx.Err() != nil || c.Err() != nil || time.Now().After(deadline) {
			return err
		}
		c.log.Info(what+" on the embedded nats server: trying again", "err", err)
		select {
		case <-ctx.Done():
			return err
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// dial connects a client to u, reconnecting forever; an external server
// gets the configured credentials and TLS.
func (c *Conn) dial(u string, external bool) (*nats.Conn, error) {
	opts := []nats.Option{
		nats.Name("pipeline"),
		nats.Timeout(defaultConnectTimeout),
		nats.MaxReconnects(-1),
		nats.ReconnectWait(defaultReconnectWait),
		nats.ReconnectJitter(100*time.Millisecond, time.Second),
		nats.PingInterval(pingInterval),
		nats.MaxPingsOutstanding(pingMaxOut),
		nats.DisconnectErrHandler(func(_ *nats.Conn, err error) {
			if err != nil {
				c.log.Warn("nats disconnected", "err", err)
			}
			select {
			case c.poke <- struct{}{}:
			default:
			}
		}),
		nats.ReconnectHandler(func(nc *nats.Conn) {
			c.log.Info("nats reconnected", "url", RedactURL(nc.ConnectedUrl()))
		}),
		nats.ErrorHandler(func(_ *nats.Conn, sub *nats.Subscription, err error) {
			subj := ""
			if sub != nil {
				subj = sub.Subject
			}
			c.log.Warn("nats async error", "subject", subj, "err", err)
		}),
	}
	if !external {
		return nats.Connect(u, append(opts, nats.UserInfo(c.auth.User, c.auth.Password))...)
	}
	if c.cfg.CredsFile != "" {
		opts = append(opts, nats.UserCredentials(c.cfg.CredsFile))
	}
	if (c.cfg.TLSCert == "") != (c.cfg.TLSKey == "") {
		return nil, errors.New("tls: a client certificate needs both the cert and the key file")
	}
	if c.cfg.TLSCert != "" {
		opts = append(opts, nats.ClientCert(c.cfg.TLSCert, c.cfg.TLSKey))
	}
	if c.cfg.TLSCA != "" {
		opts = append(opts, nats.RootCAs(c.cfg.TLSCA))
	}
	return nats.Connect(u, opts...)
}

// RedactURL removes user info (tokens, passwords) from each URL of a
// comma-separated list, for error messages and logs.
func RedactURL(list string) string {
	parts := strings.Split(list, ",")
	for i, p := range parts {
		p = strings.TrimSpace(p)
		u, err := url.Parse(p)
		if err != nil || u.Host == "" {
			// Not parseable as a URL: drop anything before an '@'.
			if at := strings.LastIndex(p, "@"); at >= 0 {
				p = "REDACTED@" + p[at+1:]
			}
			parts[i] = p
			continue
		}
		if u.User != nil {
			u.User = url.User("REDACTED")
		}
		parts[i] = u.String()
	}
	return strings.Join(parts, ",")
}

// JetStream returns the JetStream context.
func (c *Conn) JetStream() jetstream.JetStream { return c.js }

// NATS returns the underlying core NATS connection.
func (c *Conn) NATS() *nats.Conn { return c.nc }

// Logger is the Config.Logger this Conn logs to (one that discards when
// none was set).
func (c *Conn) Logger() *slog.Logger { return c.log }

// Config is the configuration the Conn was made with, defaults applied.
func (c *Conn) Config() Config { return c.cfg }

// URL is the client URL of the server in use (the embedded one's too).
func (c *Conn) URL() string { return c.url }

// Embedded reports whether this Conn runs the embedded server (it started
// it, or took it over from a process that went away) and so stops it on
// Close.
func (c *Conn) Embedded() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.srv != nil
}

// Lost is closed when this Conn joined another process's embedded server,
// that server went away, and this Conn could not take it over (or the
// process that did never let it back in). Its client is closed then, and
// Err says why: the command should stop and exit non-zero.
func (c *Conn) Lost() <-chan struct{} { return c.lost }

// Err is why the Conn was lost, nil while it was not.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.lostErr
}

// Secrets are the credentials this Conn uses that must never be printed:
// the embedded server's password, and the passwords and tokens in
// Config.URL. Code that writes logs, outcomes or reports scrubs them.
func (c *Conn) Secrets() []string {
	var out []string
	if c.auth.Password != "" {
		out = append(out, c.auth.Password)
	}
	for _, p := range strings.Split(c.cfg.URL, ",") {
		u, err := url.Parse(strings.TrimSpace(p))
		if err != nil || u.User == nil {
			continue
		}
		if pw, ok := u.User.Password(); ok {
			if pw != "" {
				out = append(out, pw)
			}
		} else if tok := u.User.Username(); tok != "" {
			out = append(out, tok) // nats://TOKEN@host
		}
	}
	return out
}

// Close stops a joiner's watch, drains the connection and, if this Conn
// runs the embedded server, shuts it down and releases the data dir's
// lock last (a joiner then takes the server over). Safe to call twice.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() { c.closeErr = c.close() })
	return c.closeErr
}

func (c *Conn) close() error {
	if c.stopWatch != nil {
		// A takeover under way finishes first: then this Conn owns the
		// server and shuts it down below.
		close(c.stopWatch)
		<-c.watchDone
	}
	var errs []error
	if c.nc != nil && !c.nc.IsClosed() && !c.nc.IsConnected() {
		// Nothing to drain into: the server is gone.
		c.nc.Close()
	}
	if c.nc != nil && !c.nc.IsClosed() {
		closed := make(chan struct{})
		c.nc.SetClosedHandler(func(*nats.Conn) { close(closed) })
		if err := c.nc.Drain(); err != nil {
			c.nc.Close()
		} else {
			select {
			case <-closed:
			case <-time.After(10 * time.Second):
				errs = append(errs, errors.New("draining nats connection: timed out"))
				c.nc.Close()
			}
		}
	}
	c.mu.Lock()
	srv, lock, logs := c.srv, c.lock, c.srvLogs
	c.mu.Unlock()
	if srv != nil {
		// The lock goes last: a joiner that gets it finds the port free
		// and the store closed.
		srv.Shutdown()
		srv.WaitForShutdown()
	}
	if logs != nil {
		logs.close()
	}
	if lock != nil {
		unlock(lock)
	}
	return errors.Join(errs...)
}
