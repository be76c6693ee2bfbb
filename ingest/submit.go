package ingest

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

// publishAsync publishes msg asynchronously; when the publisher is stalled
// by too many outstanding publishes it waits for them and tries again.
func (c *Conn) publishAsync(ctx context.Context, msg *nats.Msg) (jetstream.PubAckFuture, error) {
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

// awaitPubAck waits for an async publish's ack; when it failed, the message
// is published again synchronously, up to publishRetries times.
func (c *Conn) awaitPubAck(ctx context.Context, fut jetstream.PubAckFuture) (*jetstream.PubAck, error) {
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

func newMsg(subject, msgID string, data []byte) *nats.Msg {
	m := nats.NewMsg(subject)
	m.Data = data
	if msgID != "" {
		m.Header.Set(jetstream.MsgIDHeader, msgID)
	}
	return m
}

// Submit publishes jobs on pipeline.jobs.<schema> with Nats-Msg-Id = msgID(job)
// (the job id; replays pass their own), waiting for every ack. Items that
// carry a JobID are checked against the job ledger first (see SubmitItem).
// A job over the connection's InlineLimit is put in the object store and
// published as a message that names it, so no size makes a publish fail.
// progress, if not nil, is called with the count done so far (from one
// goroutine, in order). Publishes are asynchronous and bounded (a stalled
// publisher waits for its outstanding acks); a publish whose ack fails is
// retried.
func (c *Conn) Submit(ctx context.Context, jobs []SubmitItem, progress func(done int)) (SubmitStats, error) {
	for i, it := range jobs {
		if !ValidSchemaID(it.Schema) {
			return SubmitStats{}, fmt.Errorf("submitting job %d: schema %q: %s", i, it.Schema, schemaIDRule)
		}
		if it.MsgID == "" {
			return SubmitStats{}, fmt.Errorf("submitting job %d: empty message id", i)
		}
	}
	var stats SubmitStats
	jobs, err := c.filterEnded(ctx, jobs, &stats)
	if err != nil {
		return stats, fmt.Errorf("submitting jobs: %w", err)
	}
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	type pending struct {
		fut    jetstream.PubAckFuture
		object string // the body's object, "" when inline
	}
	futs := make(chan pending, publishAsyncMaxPending)
	acked := make(chan error, 1)
	go func() {
		n := 0
		for p := range futs {
			ack, err := c.awaitPubAck(ctx, p.fut)
			if err != nil {
				cancel(err)
				// Keep draining so the publisher never blocks on futs.
				for range futs {
				}
				acked <- err
				return
			}
			if ack.Duplicate {
				stats.Duplicates++
				// The job under this id is stored already: the object put
				// for this copy is garbage unless the stored one names it.
				c.dropIfUnreferenced(ctx, StreamJobs, ack.Sequence, p.object)
			} else {
				stats.Published++
			}
			n++
			if progress != nil {
				progress(n)
			}
		}
		acked <- nil
	}()

	var pubErr error
	for _, it := range jobs {
		if err := ctx.Err(); err != nil {
			pubErr = err
			break
		}
		msg := newMsg(SchemaSubject(SubjectJobs, it.Schema), it.MsgID, it.Data)
		object, err := c.offload(ctx, msg, payloadJobs)
		if err != nil {
			pubErr = fmt.Errorf("publishing job %s: %w", it.MsgID, err)
			break
		}
		fut, err := c.publishAsync(ctx, msg)
		if err != nil {
			pubErr = fmt.Errorf("publishing job %s: %w", it.MsgID, err)
			break
		}
		futs <- pending{fut: fut, object: object}
	}
	close(futs)
	ackErr := <-acked
	switch {
	case ackErr != nil:
		return stats, fmt.Errorf("submitting jobs: %w", ackErr)
	case pubErr != nil:
		if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
			return stats, fmt.Errorf("submitting jobs: %w", cause)
		}
		return stats, fmt.Errorf("submitting jobs: %w", pubErr)
	}
	return stats, nil
}
