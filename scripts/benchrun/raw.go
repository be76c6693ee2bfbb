package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/ledger"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// runRaw is the broker's limit for the pipeline's work on this machine:
// the same jobs (same bytes) preloaded into the JOBS work-queue stream,
// consumed with explicit ack, a result of the pipeline's result size
// published asynchronously to RESULTS and the job acked on the result's
// confirmation, at most K in flight. Nothing else: no model, no sanitize,
// no validation, no sink.
//
// Kind "raw-ledger" adds what the job ledger asks of the broker, as a
// hand-written loop with nats.go's KeyValue would do it: a Get of the
// job's ledger key before the result (a job already recorded is only
// acked) and a Create of it after the result's confirmation, before the
// ack. It shows what the pipeline's guarantee against answering a job twice
// costs the broker, apart from the pipeline's own work.
func runRaw(ctx context.Context, spec caseSpec, log *slog.Logger) (res caseResult, err error) {
	res = caseResult{Kind: spec.Kind, K: spec.K, Jobs: spec.Jobs, SinkLag: -1}
	dir, err := os.MkdirTemp("", "pipeline-bench-raw-*")
	if err != nil {
		return res, fmt.Errorf("creating temp dir: %w", err)
	}
	defer os.RemoveAll(dir)
	conn, err := broker.Connect(ctx, broker.Config{DataDir: filepath.Join(dir, "data"), DuplicateWindow: 2 * time.Minute, Logger: log})
	if err != nil {
		return res, fmt.Errorf("connecting to NATS: %w", err)
	}
	defer conn.Close()
	js := conn.JetStream()

	items, jobBytes, err := benchJobs("bench", spec.Jobs)
	if err != nil {
		return res, err
	}
	res.JobBytes = jobBytes
	resultSize := spec.ResultBytes
	if resultSize <= 0 {
		resultSize = 2048
	}
	res.ResultBytes = resultSize
	result := bytes.Repeat([]byte("r"), resultSize)

	for _, it := range items {
		if _, err := publishAsync(ctx, js, newMsg(broker.SchemaSubject(broker.SubjectJobs, it.Schema), it.MsgID, it.Data)); err != nil {
			return res, fmt.Errorf("preloading jobs: %w", err)
		}
	}
	select {
	case <-js.PublishAsyncComplete():
	case <-ctx.Done():
		return res, ctx.Err()
	}
	items = nil
	resetPeakRSS()

	var ledger jetstream.KeyValue
	if spec.Kind == "raw-ledger" {
		if ledger, err = js.KeyValue(ctx, broker.BucketLedger); err != nil {
			return res, fmt.Errorf("opening the ledger bucket: %w", err)
		}
	}
	cons, err := js.CreateOrUpdateConsumer(ctx, broker.StreamJobs, jetstream.ConsumerConfig{
		Durable: "raw", AckPolicy: jetstream.AckExplicitPolicy, MaxAckPending: max(1024, 4*spec.K),
	})
	if err != nil {
		return res, fmt.Errorf("creating consumer: %w", err)
	}
	cpu0, err := cpuTime()
	if err != nil {
		return res, err
	}
	wait0, _ := runDelay()
	t0 := time.Now()
	sem := make(chan struct{}, spec.K)
	var wg sync.WaitGroup
	var done atomic.Int64
	var failed atomic.Pointer[error]
	finished := make(chan struct{})
	cc, err := cons.Consume(func(m jetstream.Msg) {
		sem <- struct{}{}
		id := m.Headers().Get(jetstream.MsgIDHeader)
		if ledger != nil {
			wg.Go(func() {
				defer func() { <-sem }()
				if err := rawLedgerJob(ctx, js, ledger, m, id, result); err != nil {
					failed.Store(&err)
					return
				}
				if done.Add(1) == int64(spec.Jobs) {
					close(finished)
				}
			})
			return
		}
		fut, err := publishAsync(ctx, js, newMsg(broker.SubjectResults+"."+benchSchema, id, result))
		if err != nil {
			failed.Store(&err)
			<-sem
			return
		}
		wg.Go(func() {
			defer func() { <-sem }()
			select {
			case <-fut.Ok():
			case err := <-fut.Err():
				failed.Store(&err)
				return
			}
			if err := m.Ack(); err != nil {
				failed.Store(&err)
				return
			}
			if done.Add(1) == int64(spec.Jobs) {
				close(finished)
			}
		})
	}, jetstream.PullMaxMessages(spec.K))
	if err != nil {
		return res, fmt.Errorf("consuming: %w", err)
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
wait:
	for {
		select {
		case <-finished:
			break wait
		case <-ctx.Done():
			cc.Stop()
			return res, ctx.Err()
		case <-tick.C:
			if p := failed.Load(); p != nil {
				cc.Stop()
				wg.Wait()
				return res, fmt.Errorf("raw consume: %w", *p)
			}
		}
	}
	cc.Stop()
	wg.Wait()
	wall := time.Since(t0)
	cpu1, err := cpuTime()
	if err != nil {
		return res, err
	}
	wait1, _ := runDelay()
	res.CPUWait = max(0, (wait1 - wait0).Seconds())
	last, stored, _, err := streamsEnd(ctx, conn)
	if err != nil {
		return res, err
	}
	hwm, err := procStatusKB("VmHWM")
	if err != nil {
		return res, err
	}
	res.Wall = wall.Seconds()
	res.Seconds = last.Sub(t0).Seconds()
	if res.Seconds <= 0 {
		res.Seconds = res.Wall
	}
	res.JobsPerSec = float64(spec.Jobs) / res.Seconds
	res.CPUSeconds = (cpu1 - cpu0).Seconds()
	res.CPUPerJob = res.CPUSeconds / float64(spec.Jobs)
	res.PeakRSSMB = float64(hwm) / 1024
	res.Succeeded = int(stored)
	if stored != uint64(spec.Jobs) {
		return res, fmt.Errorf("%d jobs, %d results stored", spec.Jobs, stored)
	}
	return res, nil
}

// rawLedgerJob is one job of the raw-ledger baseline: the ledger's Get,
// the result, the ledger's Create, the ack.
func rawLedgerJob(ctx context.Context, js jetstream.JetStream, kv jetstream.KeyValue, m jetstream.Msg, id string, result []byte) error {
	key := ledger.Key(id) + ".0"
	if _, err := kv.Get(ctx, key); err == nil {
		return m.Ack()
	} else if !errors.Is(err, jetstream.ErrKeyNotFound) {
		return err
	}
	fut, err := publishAsync(ctx, js, newMsg(broker.SubjectResults+"."+benchSchema, id, result))
	if err != nil {
		return err
	}
	var ack *jetstream.PubAck
	select {
	case ack = <-fut.Ok():
	case err := <-fut.Err():
		return err
	}
	value, err := json.Marshal(map[string]any{"job_id": id, "run": 0, "msg_id": id, "stream": ack.Stream, "seq": ack.Sequence, "at": time.Now().UTC()})
	if err != nil {
		return err
	}
	if _, err := kv.Create(ctx, key, value); err != nil {
		return err
	}
	return m.Ack()
}

// publishAsync publishes msg asynchronously; when the publisher is stalled
// by too many outstanding publishes ("stalled with too many outstanding
// async published messages") it waits for them and tries again, as
// the broker's own publisher does (broker.Conn.PublishAsync).
func publishAsync(ctx context.Context, js jetstream.JetStream, msg *nats.Msg) (jetstream.PubAckFuture, error) {
	for {
		fut, err := js.PublishMsgAsync(msg)
		if !errors.Is(err, jetstream.ErrTooManyStalledMsgs) {
			return fut, err
		}
		select {
		case <-js.PublishAsyncComplete():
		case <-time.After(50 * time.Millisecond):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
}

func newMsg(subject, msgID string, data []byte) *nats.Msg {
	m := nats.NewMsg(subject)
	m.Data = data
	m.Header.Set(jetstream.MsgIDHeader, msgID)
	return m
}
