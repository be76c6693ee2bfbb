package broker

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// publishRetries is how many times a publish whose ack failed (timeout, no
// responders while reconnecting) is tried again synchronously. The same
// Nats-Msg-Id makes a retry that was in fact stored a duplicate, not a copy.
const publishRetries = 5

// PublishAsync publishes msg asynchronously; when the publisher is stalled
// by too many outstanding publishes it waits for them and tries again.
func (c *Conn) PublishAsync(ctx context.Context, msg *nats.Msg) (jetstream.PubAckFuture, error) {
	for {
		fut, err := c.js.PublishMsgAsync(msg)
		if !errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
			return fut, err
		}
		select {
		case <-c.js.PublishAsyncComplete():
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

// AwaitPubAck waits for an async publish's ack; when it failed, the message
// is published again synchronously, up to publishRetries times.
func (c *Conn) AwaitPubAck(ctx context.Context, fut jetstream.PubAckFuture) (*jetstream.PubAck, error) {
	var err error
	select {
	case ack := <-fut.Ok():
		return ack, nil
	case err = <-fut.Err():
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	msg := fut.Msg()
	for i := 0; i < publishRetries; i++ {
		c.log.Debug("publish not acknowledged; retrying", "subject", msg.Subject, "err", err)
		select {
		case <-time.After(time.Duration(i) * 200 * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		pctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		var ack *jetstream.PubAck
		ack, err = c.js.PublishMsg(pctx, msg)
		cancel()
		if err == nil {
			return ack, nil
		}
	}
	return nil, fmt.Errorf("publishing to %s: %w", msg.Subject, err)
}

// NewMsg is a message on subject with Nats-Msg-Id msgID (when not empty)
// and body data.
func NewMsg(subject, msgID string, data []byte) *nats.Msg {
	m := nats.NewMsg(subject)
	m.Data = data
	if msgID != "" {
		m.Header.Set(jetstream.MsgIDHeader, msgID)
	}
	return m
}
