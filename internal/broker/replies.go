package broker

import (
	"fmt"
	"strconv"
	"sync"

	"github.com/nats-io/nats.go"
)

// Requests answered by many messages (a direct get of many subjects) share
// one subscription: a wildcard inbox, each request under its own last token.

// replyMux receives the replies of many-message requests on one
// subscription, a wildcard inbox, each request under its own last token.
type replyMux struct {
	once   sync.Once
	err    error
	prefix string
	mu     sync.Mutex
	next   uint64
	wait   map[string]chan *nats.Msg
}

// request publishes body on subject with a reply subject of its own and
// returns the channel its replies arrive on (room for want of them; more
// are dropped) and the function that stops them.
func (x *replyMux) request(nc *nats.Conn, subject string, body []byte, want int) (<-chan *nats.Msg, func(), error) {
	x.once.Do(func() {
		x.prefix = nc.NewRespInbox() + "."
		x.wait = make(map[string]chan *nats.Msg)
		_, x.err = nc.Subscribe(x.prefix+"*", x.deliver)
	})
	if x.err != nil {
		return nil, nil, fmt.Errorf("subscribing to the replies of direct gets: %w", x.err)
	}
	ch := make(chan *nats.Msg, want)
	x.mu.Lock()
	x.next++
	token := strconv.FormatUint(x.next, 36)
	x.wait[token] = ch
	x.mu.Unlock()
	done := func() {
		x.mu.Lock()
		delete(x.wait, token)
		x.mu.Unlock()
	}
	if err := nc.PublishRequest(subject, x.prefix+token, body); err != nil {
		done()
		return nil, nil, fmt.Errorf("requesting %s: %w", subject, err)
	}
	return ch, done, nil
}

func (x *replyMux) deliver(m *nats.Msg) {
	token := m.Subject[len(x.prefix):]
	x.mu.Lock()
	ch := x.wait[token]
	x.mu.Unlock()
	if ch == nil {
		return // a request that gave up
	}
	select {
	case ch <- m:
	default: // more replies than asked for: not ours to block on
	}
}

// RequestMany publishes body on subject and returns the channel its
// replies arrive on (room for want of them; more are dropped) and the
// function that stops them. Every such request of the Conn shares one
// wildcard inbox subscription.
func (c *Conn) RequestMany(subject string, body []byte, want int) (<-chan *nats.Msg, func(), error) {
	return c.replies.request(c.nc, subject, body, want)
}
