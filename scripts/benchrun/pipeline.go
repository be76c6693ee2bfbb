package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/llmpipeline/pipeline/examples"
	"github.com/llmpipeline/pipeline/index"
	"github.com/llmpipeline/pipeline/internal/app"
	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/config"
	"github.com/llmpipeline/pipeline/internal/queue"
	"github.com/llmpipeline/pipeline/internal/secret"
	"github.com/llmpipeline/pipeline/internal/sink"
	"github.com/llmpipeline/pipeline/job"
	"github.com/llmpipeline/pipeline/llm"
	"github.com/llmpipeline/pipeline/schemas"
	"github.com/llmpipeline/pipeline/worker"
)

// benchSchema is the built-in schema every case extracts (about 2.9 KB).
const benchSchema = "invoice"

// caseSpec is what one child process measures.
type caseSpec struct {
	Kind    string        // sim, canned, http, raw
	K       int           // jobs in flight
	Jobs    int           // jobs submitted
	Latency time.Duration // model latency (sim); the server's (http, informational)
	LLMURL  string        // http: the OpenAI-compatible base URL
	// SampleEvery > 0 samples published outcomes against indexed ones.
	SampleEvery time.Duration
	CPUProfile  string
	MemProfile  string
	// ResultBytes: raw only, the result size to mirror (the jobs are the
	// same bytes as the pipeline's).
	ResultBytes int
	// NoIndex runs the workers without the sink: outcomes reach the
	// streams, nothing reads them into SQLite. A diagnostic case, not a
	// deployment (the report needs the index).
	NoIndex bool
	// Docs, DocBytes, ChunkChars: chunks only, the long documents.
	Docs, DocBytes, ChunkChars int
	// Warm > 0: a run of its own (a stack of its own) answers this many
	// jobs on the case's data dir before the measured run, as a run
	// before a restart did; not measured.
	Warm int
}

// caseResult is what a child reports (one JSON line on stdout).
type caseResult struct {
	Section string  `json:"section"`
	Name    string  `json:"name"`
	Kind    string  `json:"kind"`
	K       int     `json:"k"`
	Jobs    int     `json:"jobs"`
	Latency float64 `json:"latency_s"`
	// Seconds is from the workers' start to the last outcome stored in its
	// stream; Wall adds the until-idle detection and the sink's flush.
	Seconds    float64 `json:"seconds"`
	Wall       float64 `json:"wall_s"`
	JobsPerSec float64 `json:"jobs_per_s"`
	Ideal      float64 `json:"ideal_jobs_per_s,omitempty"`
	Efficiency float64 `json:"efficiency,omitempty"`
	// MeanInFlight is the mean number of jobs inside the handler (model
	// call, sanitize, validate) over the run: K when no slot ever waits.
	MeanInFlight float64 `json:"mean_in_flight,omitempty"`
	CPUSeconds   float64 `json:"cpu_s"`
	// HandlerMs is the mean time a job spent in the handler (model call,
	// sanitize, validate); StoreMs the mean time from the handler's return
	// to its result being stored in RESULTS (encode, publish, server ack).
	// K / JobsPerSec is a slot's whole cycle: the rest of it went to
	// fetching and dispatching.
	HandlerMs float64 `json:"handler_ms,omitempty"`
	StoreMs   float64 `json:"store_ms,omitempty"`
	// CPUWait is the time the process's threads were runnable but waited
	// for a CPU taken by other processes (schedstat run delay).
	CPUWait   float64 `json:"cpu_wait_s"`
	CPUPerJob float64 `json:"cpu_s_per_job"`
	PeakRSSMB float64 `json:"peak_rss_mb"`
	// Server* are the HTTP model server's (a separate process).
	ServerCPUSeconds float64 `json:"server_cpu_s,omitempty"`
	ServerRSSMB      float64 `json:"server_rss_mb,omitempty"`
	// SinkLag is the longest an outcome stored in RESULTS/DLQ waited to be
	// counted in the SQLite index (-1: not measured).
	SinkLag      float64 `json:"sink_lag_s"`
	Succeeded    int     `json:"succeeded"`
	DeadLettered int     `json:"dead_lettered"`
	Indexed      int     `json:"indexed"`
	JobBytes     int     `json:"job_bytes"`
	ResultBytes  int     `json:"result_bytes"`
	// Chunks, Documents, MergeSeconds and MergeShare: the chunks case's
	// chunk jobs, documents, the time spent merging and its share of
	// CPUSeconds.
	Chunks       int     `json:"chunks,omitempty"`
	Documents    int     `json:"documents,omitempty"`
	MergeSeconds float64 `json:"merge_s,omitempty"`
	MergeShare   float64 `json:"merge_share,omitempty"`
	Err          string  `json:"error,omitempty"`
}

// benchJobs returns n invoice jobs (ids prefix-0000000 on) cycling over the example inputs, with
// their exact JSON and their mean size.
func benchJobs(prefix string, n int) ([]queue.SubmitItem, int, error) {
	var inputs []job.Job
	sc := bufio.NewScanner(bytes.NewReader(examples.Jobs()))
	sc.Buffer(make([]byte, 0, 64<<10), 1<<20)
	for sc.Scan() {
		j, err := job.Parse(sc.Bytes())
		if err == nil && j.Schema == benchSchema {
			inputs = append(inputs, j)
		}
	}
	if err := sc.Err(); err != nil {
		return nil, 0, fmt.Errorf("reading example jobs: %w", err)
	}
	if len(inputs) == 0 {
		return nil, 0, errors.New("no example invoice jobs")
	}
	items := make([]queue.SubmitItem, n)
	total := 0
	for i := range items {
		src := inputs[i%len(inputs)]
		j := job.Job{ID: fmt.Sprintf("%s-%07d", prefix, i), Schema: benchSchema, Input: src.Input, Instructions: src.Instructions}
		data, err := json.Marshal(j)
		if err != nil {
			return nil, 0, fmt.Errorf("encoding job: %w", err)
		}
		items[i] = queue.SubmitItem{Data: data, Schema: benchSchema, MsgID: j.ID}
		total += len(data)
	}
	return items, total / max(n, 1), nil
}

// runConfig is the configuration of `pipeline run --until-idle
// --concurrency K` for the case, run's own defaults for everything else:
// the simulator with every fault rate at 0 (one attempt per job), or the
// OpenAI client on the bench's server.
func runConfig(spec caseSpec) (*config.Config, error) {
	args := []string{"--until-idle", "--concurrency", strconv.Itoa(spec.K)}
	switch spec.Kind {
	case "sim", "chunks":
		args = append(args, "--model", "sim", "--sim-latency", spec.Latency.String(), "--sim-fault-scale", "0")
	case "http":
		args = append(args, "--model", "openai:bench", "--llm-url", spec.LLMURL)
	case "canned":
	default:
		return nil, fmt.Errorf("unknown model kind %q", spec.Kind)
	}
	return config.Resolve("run", config.RunFlags(), args)
}

// buildStack builds the stack `pipeline run` runs (internal/app): the
// provider behind its rate limiter and breaker, metered, in the heal loop
// and the worker's handler. The canned model takes the provider's place,
// behind the same breaker.
func buildStack(spec caseSpec, cfg *config.Config, reg *schemas.Registry, log *slog.Logger) (*app.Stack, error) {
	d := app.Deps{Log: log, Notice: io.Discard}
	if spec.Kind != "canned" {
		return app.BuildStack(cfg, reg, d, secret.New())
	}
	answers, err := validAnswers(context.Background(), 16)
	if err != nil {
		return nil, err
	}
	b := llm.NewBreaker(&cannedModel{answers: answers}, llm.BreakerConfig{
		Threshold: cfg.Model.BreakerThreshold, Cooldown: cfg.Model.BreakerCooldown, Logger: log})
	return app.BuildStackOn(cfg, reg, d, secret.New(), app.BuiltModel{Model: b, Name: "canned", Breaker: b, Provider: "canned"})
}

// runPipeline submits spec.Jobs invoice jobs to a fresh embedded server,
// then runs worker.Serve until idle on the stack `pipeline run --until-idle
// --concurrency K` builds (internal/app), and measures the run.
func runPipeline(ctx context.Context, spec caseSpec, log *slog.Logger) (res caseResult, err error) {
	res = caseResult{Kind: spec.Kind, K: spec.K, Jobs: spec.Jobs, Latency: spec.Latency.Seconds(), SinkLag: -1}
	dir, err := os.MkdirTemp("", "pipeline-bench-*")
	if err != nil {
		return res, fmt.Errorf("creating temp dir: %w", err)
	}
	defer os.RemoveAll(dir)

	reg, err := schemas.Builtin()
	if err != nil {
		return res, fmt.Errorf("loading built-in schemas: %w", err)
	}
	if spec.Kind == "chunks" {
		if reg, err = documentSchemas(reg); err != nil {
			return res, err
		}
	}
	cfg, err := runConfig(spec)
	if err != nil {
		return res, err
	}
	stack, err := buildStack(spec, cfg, reg, log)
	if err != nil {
		return res, fmt.Errorf("building the model stack: %w", err)
	}
	h := stack.Handler
	conn, err := broker.Connect(ctx, broker.Config{DataDir: filepath.Join(dir, "data"), DuplicateWindow: 2 * time.Minute, Logger: log})
	if err != nil {
		return res, fmt.Errorf("connecting to NATS: %w", err)
	}
	defer conn.Close()
	st, err := index.Open(filepath.Join(dir, "pipeline.db"))
	if err != nil {
		return res, fmt.Errorf("opening index: %w", err)
	}
	defer st.Close()

	expect := spec.Jobs // outcomes at the end
	if spec.Kind == "chunks" {
		n, err := submitDocuments(ctx, conn, spec)
		if err != nil {
			return res, err
		}
		res.Chunks, res.Documents, res.Jobs = n, spec.Docs, n
		expect = n + spec.Docs
		runtime.GC()
	} else {
		items, jobBytes, err := benchJobs("bench", spec.Jobs)
		if err != nil {
			return res, err
		}
		res.JobBytes = jobBytes
		if spec.Warm > 0 {
			if err := warmUp(ctx, spec, cfg, reg, conn, st, log); err != nil {
				return res, err
			}
			expect += spec.Warm
		}
		if _, err := queue.Submit(ctx, conn, items, nil); err != nil {
			return res, fmt.Errorf("submitting %d jobs: %w", len(items), err)
		}
	}
	if !resetPeakRSS() {
		log.Warn("could not reset the peak RSS: it includes the submit phase")
	}

	sc, err := stack.ServeConfig(cfg, log) // run's, as run builds it
	if err != nil {
		return res, err
	}
	// As run: the limiter joins its fleet and reads what the provider
	// said of its limits before (a warm-up's answer).
	leave, err := stack.ShareLimits(ctx, conn, log)
	if err != nil {
		return res, err
	}
	defer leave()
	stopProfile, err := startProfiles(spec)
	if err != nil {
		return res, err
	}
	cpu0, err := cpuTime()
	if err != nil {
		return res, err
	}
	wait0, _ := runDelay() // best effort: zero when schedstat is missing
	t0 := time.Now()

	var samples []sample
	sampleCtx, stopSampling := context.WithCancel(ctx)
	var sampling sync.WaitGroup
	if spec.SampleEvery > 0 {
		sampling.Go(func() { samples = sampleLag(sampleCtx, conn, st, spec.SampleEvery, log) })
	}

	// The handler is the worker's own; the wrapper only adds up the time
	// jobs spend inside it, so mean in-flight = busy / run time (Little's
	// law) shows whether slots sat idle between jobs.
	// It also notes when a job left the handler, to compare with when its
	// result was stored in RESULTS (the stream's timestamp): every job of a
	// run of up to storeSample jobs, every Jobs/storeSample-th of a larger
	// one, so the harness keeps no per-job map in the process it measures
	// (60000 entries were 12% of the live heap, scanned by every GC).
	var busy, handled atomic.Int64
	var endMu sync.Mutex
	every := int64(max(1, spec.Jobs/storeSample))
	ended := make(map[string]time.Time, min(spec.Jobs, 2*storeSample))
	sc.Store = st
	if spec.NoIndex {
		sc.Store = nil
	}
	timed := queue.HandlerFunc(func(ctx context.Context, d *queue.Delivery) queue.Outcome {
		start := time.Now()
		out := h.Handle(ctx, d)
		end := time.Now()
		busy.Add(int64(end.Sub(start)))
		if handled.Add(1)%every == 0 {
			endMu.Lock()
			ended[d.MsgID] = end
			endMu.Unlock()
		}
		return out
	})
	docs := &timedDocs{inner: h.Documents()} // the stack's, timed
	sc.Workers.Documents = docs
	serr := worker.Serve(ctx, conn, timed, sc)
	wall := time.Since(t0)
	cpu1, cerr := cpuTime()
	wait1, _ := runDelay()
	stopSampling()
	sampling.Wait()
	if perr := stopProfile(); perr != nil {
		log.Warn("writing profiles", "err", perr)
	}
	if serr != nil {
		return res, fmt.Errorf("serving: %w", serr)
	}
	if cerr != nil {
		return res, cerr
	}

	last, stored, bytes, err := streamsEnd(ctx, conn)
	if err != nil {
		return res, err
	}
	stats := index.Stats{Jobs: int(stored)}
	if !spec.NoIndex {
		if stats, err = st.Stats(ctx, index.Filter{}); err != nil {
			return res, fmt.Errorf("reading index stats: %w", err)
		}
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
	measured := stats.Jobs - spec.Warm // the warm-up's outcomes are in the index too
	res.JobsPerSec = float64(measured) / res.Seconds
	if spec.Kind == "chunks" {
		res.JobsPerSec = float64(res.Chunks) / res.Seconds
	}
	res.MeanInFlight = time.Duration(busy.Load()).Seconds() / res.Seconds
	res.HandlerMs = time.Duration(busy.Load()).Seconds() * 1000 / float64(max(measured, 1))
	if d, err := storeDelay(ctx, conn, ended); err != nil {
		log.Warn("reading result times", "err", err)
	} else {
		res.StoreMs = d.Seconds() * 1000
	}
	res.CPUSeconds = (cpu1 - cpu0).Seconds()
	res.CPUWait = max(0, (wait1 - wait0).Seconds())
	res.CPUPerJob = res.CPUSeconds / float64(max(measured, 1))
	res.PeakRSSMB = float64(hwm) / 1024
	res.Succeeded, res.DeadLettered, res.Indexed = stats.Succeeded, stats.DeadLettered, stats.Jobs
	if stored > 0 {
		res.ResultBytes = int(bytes / stored)
	}
	if spec.SampleEvery > 0 {
		res.SinkLag = maxLag(samples).Seconds()
	}
	res.MergeSeconds = time.Duration(docs.busy.Load()).Seconds()
	if res.CPUSeconds > 0 {
		res.MergeShare = res.MergeSeconds / res.CPUSeconds
	}
	if stats.Jobs != expect || stored != uint64(expect) {
		return res, fmt.Errorf("%d outcomes expected, %d in the streams, %d in the index", expect, stored, stats.Jobs)
	}
	return res, nil
}

// warmUp answers spec.Warm jobs on conn's data dir with a stack of its
// own, as the run before a restart did, before the measured run builds
// its stack: the measured limiter starts from what the provider said then
// (KV PIPELINE_PROVIDER_LIMITS), not from a probe of one call.
func warmUp(ctx context.Context, spec caseSpec, cfg *config.Config, reg *schemas.Registry, conn *broker.Conn, st *index.Store, log *slog.Logger) error {
	stack, err := buildStack(spec, cfg, reg, log)
	if err != nil {
		return fmt.Errorf("building the warm-up's stack: %w", err)
	}
	leave, err := stack.ShareLimits(ctx, conn, log)
	if err != nil {
		return err
	}
	defer leave()
	items, _, err := benchJobs("warm", spec.Warm)
	if err != nil {
		return err
	}
	if _, err := queue.Submit(ctx, conn, items, nil); err != nil {
		return fmt.Errorf("submitting the warm-up's %d jobs: %w", len(items), err)
	}
	sc, err := stack.ServeConfig(cfg, log)
	if err != nil {
		return err
	}
	sc.Store = st
	if err := worker.Serve(ctx, conn, stack.Handler, sc); err != nil {
		return fmt.Errorf("serving the warm-up: %w", err)
	}
	return nil
}

// streamsEnd returns when the last outcome was stored in RESULTS or DLQ,
// how many there are and their total size.
func streamsEnd(ctx context.Context, conn *broker.Conn) (last time.Time, msgs, size uint64, err error) {
	for _, name := range []string{broker.StreamResults, broker.StreamDLQ} {
		s, err := conn.JetStream().Stream(ctx, name)
		if err != nil {
			return last, 0, 0, fmt.Errorf("looking up stream %s: %w", name, err)
		}
		info, err := s.Info(ctx)
		if err != nil {
			return last, 0, 0, fmt.Errorf("reading stream %s: %w", name, err)
		}
		if info.State.LastTime.After(last) {
			last = info.State.LastTime
		}
		msgs += info.State.Msgs
		size += info.State.Bytes
	}
	return last, msgs, size, nil
}

// storeSample is about how many jobs of a run storeDelay averages over.
const storeSample = 1000

// storeDelay is the mean time between a job leaving the handler and its
// result being stored in RESULTS, over the jobs in ended.
func storeDelay(ctx context.Context, conn *broker.Conn, ended map[string]time.Time) (time.Duration, error) {
	var sum time.Duration
	n := 0
	err := sink.ReadStream(ctx, conn, broker.StreamResults, "", func(m sink.Msg) error {
		if end, ok := ended[m.MsgID]; ok && !m.Time.IsZero() {
			sum += m.Time.Sub(end)
			n++
		}
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("reading results: %w", err)
	}
	if n == 0 {
		return 0, errors.New("no result matched a handled job")
	}
	return sum / time.Duration(n), nil
}

// sample is one observation of outcomes stored in the streams and
// outcomes counted in the SQLite index.
type sample struct {
	at                 time.Time
	published, indexed uint64
}

// sampleLag observes, every period until ctx ends, how many outcomes the
// streams hold and how many the sink has stored in the index: the streams'
// last sequences against the cursors the sink commits with its rows (every
// message up to a cursor is indexed), two rows read from SQLite.
func sampleLag(ctx context.Context, conn *broker.Conn, st *index.Store, every time.Duration, log *slog.Logger) []sample {
	t := time.NewTicker(every)
	defer t.Stop()
	var out []sample
	for {
		s, err := sinkProgress(ctx, conn, st)
		if err == nil {
			out = append(out, s)
		} else if ctx.Err() == nil {
			log.Warn("sampling the sink lag", "err", err)
		}
		select {
		case <-ctx.Done():
			return out
		case <-t.C:
		}
	}
}

func sinkProgress(ctx context.Context, conn *broker.Conn, st *index.Store) (sample, error) {
	s := sample{at: time.Now()}
	for _, name := range []string{broker.StreamResults, broker.StreamDLQ} {
		str, err := conn.JetStream().Stream(ctx, name)
		if err != nil {
			return s, fmt.Errorf("looking up stream %s: %w", name, err)
		}
		s.published += str.CachedInfo().State.LastSeq
	}
	cursors, err := st.Cursors(ctx)
	if err != nil {
		return s, err
	}
	for _, seq := range cursors {
		s.indexed += seq
	}
	return s, nil
}

// maxLag is the longest time, over the samples, between the moment the
// streams held n outcomes and the first sample where the index held n. An
// outcome never seen indexed lags until the last sample. The result is
// exact to within one sampling period.
func maxLag(samples []sample) time.Duration {
	var worst time.Duration
	j := 0
	for _, s := range samples {
		if s.published == 0 {
			continue
		}
		for j < len(samples) && samples[j].indexed < s.published {
			j++
		}
		var lag time.Duration
		if j < len(samples) {
			lag = samples[j].at.Sub(s.at)
		} else {
			lag = samples[len(samples)-1].at.Sub(s.at)
		}
		worst = max(worst, lag)
	}
	return worst
}

// startProfiles starts the CPU profile and returns the function that stops
// it and writes the heap profile.
func startProfiles(spec caseSpec) (func() error, error) {
	var cpuFile *os.File
	if spec.CPUProfile != "" {
		f, err := os.Create(spec.CPUProfile)
		if err != nil {
			return nil, fmt.Errorf("creating CPU profile: %w", err)
		}
		if err := pprof.StartCPUProfile(f); err != nil {
			f.Close()
			return nil, fmt.Errorf("starting CPU profile: %w", err)
		}
		cpuFile = f
	}
	return func() error {
		var errs []error
		if cpuFile != nil {
			pprof.StopCPUProfile()
			errs = append(errs, cpuFile.Close())
		}
		if spec.MemProfile != "" {
			f, err := os.Create(spec.MemProfile)
			if err != nil {
				return errors.Join(append(errs, fmt.Errorf("creating heap profile: %w", err))...)
			}
			errs = append(errs, pprof.Lookup("allocs").WriteTo(f, 0), f.Close())
		}
		return errors.Join(errs...)
	}, nil
}
