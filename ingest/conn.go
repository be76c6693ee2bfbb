package ingest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"strings"
	"sync"
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
	// publishAsyncMaxPending bounds the async publishes outstanding on one
	// Conn; past it PublishAsync stalls (and we wait and retry).
	publishAsyncMaxPending = 4096
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

	// srv is the embedded server when this Conn started it (owner), nil when
	// it dialled a URL or joined another Conn's server.
	srv *server.Server

	closeOnce sync.Once
	closeErr  error
}

func (cfg Config) withDefaults() Config {
	if cfg.Replicas <= 0 {
		cfg.Replicas = 1
	}
	if cfg.DuplicateWindow <= 0 {
		cfg.DuplicateWindow = DefaultDuplicateWindow
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
	c := &Conn{cfg: cfg, log: discardIfNil(cfg.Logger)}
	var err error
	switch {
	case cfg.URL != "":
		c.url = cfg.URL
		c.nc, err = c.dial(cfg.URL, true)
		if err != nil {
			return nil, fmt.Errorf("connecting to nats at %s: %w", RedactURL(cfg.URL), err)
		}
	case cfg.DataDir != "":
		if err := c.startOrJoin(ctx); err != nil {
			return nil, err
		}
	default:
		return nil, ErrNoDataDir
	}
	c.js, err = jetstream.New(c.nc, jetstream.WithPublishAsyncMaxPending(publishAsyncMaxPending),
		jetstream.WithPublishAsyncTimeout(publishAckTimeout))
	if err != nil {
		c.Close()
		return nil, fmt.Errorf("creating jetstream context: %w", err)
	}
	if err := c.ensureStreams(ctx); err != nil {
		c.Close()
		return nil, err
	}
	return c, nil
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
		return nats.Connect(u, opts...)
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

// URL is the client URL of the server in use (the embedded one's too).
func (c *Conn) URL() string { return c.url }

// Embedded reports whether this Conn started the embedded server (and so
// stops it on Close).
func (c *Conn) Embedded() bool { return c.srv != nil }

// Close drains the connection and, if this Conn started the embedded
// server, shuts it down last. Safe to call twice.
func (c *Conn) Close() error {
	c.closeOnce.Do(func() { c.closeErr = c.close() })
	return c.closeErr
}

func (c *Conn) close() error {
	var errs []error
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
	if c.srv != nil {
		c.srv.Shutdown()
		c.srv.WaitForShutdown()
		if err := c.forgetServer(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}
