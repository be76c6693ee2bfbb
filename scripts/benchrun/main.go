package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"runtime/debug"
	"strconv"
	"strings"
	"syscall"
	"time"
)

func main() {
	os.Exit(run(os.Args[1:], os.Stdout, os.Stderr))
}

// run dispatches: "case" and "openai-server" are the child modes the
// orchestrator starts; anything else is the orchestrator's flags.
func run(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if len(args) > 0 {
		switch args[0] {
		case "case":
			return runCase(ctx, args[1:], stdout, stderr)
		case "openai-server":
			return runServer(ctx, args[1:], stdout, stderr)
		}
	}
	opts, err := parseOptions(args, stderr)
	if errors.Is(err, flag.ErrHelp) {
		return 0
	}
	if err != nil {
		fmt.Fprintf(stderr, "benchrun: %v\n", err)
		return 2
	}
	if err := orchestrate(ctx, opts, stdout, stderr); err != nil {
		fmt.Fprintf(stderr, "benchrun: %v\n", err)
		return 1
	}
	return 0
}

// runCase is the child that measures one case and prints its caseResult
// as one JSON line on stdout (with Err set when it failed).
func runCase(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("case", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var spec caseSpec
	fs.StringVar(&spec.Kind, "kind", "sim", "sim, canned, http, chunks, raw or raw-ledger")
	fs.IntVar(&spec.K, "k", 16, "jobs in flight")
	fs.IntVar(&spec.Jobs, "jobs", 1000, "jobs to submit")
	fs.DurationVar(&spec.Latency, "latency", 0, "sim: model latency")
	fs.StringVar(&spec.LLMURL, "llm-url", "", "http: OpenAI-compatible base URL")
	fs.DurationVar(&spec.SampleEvery, "sample", 0, "sample the sink lag this often (0: not measured)")
	fs.StringVar(&spec.CPUProfile, "cpuprofile", "", "write a CPU profile of the run phase")
	fs.StringVar(&spec.MemProfile, "memprofile", "", "write an allocation (heap) profile at the end")
	fs.IntVar(&spec.ResultBytes, "result-bytes", 0, "raw: result size")
	fs.IntVar(&spec.Docs, "docs", 0, "chunks: documents to submit")
	fs.IntVar(&spec.DocBytes, "doc-bytes", 0, "chunks: size of each document")
	fs.IntVar(&spec.ChunkChars, "chunk-chars", 0, "chunks: --chunk-chars of the split")
	fs.IntVar(&spec.Warm, "warm", 0, "jobs a run of its own answers on the data dir before the measured run (a run before a restart)")
	fs.BoolVar(&spec.NoIndex, "no-index", false, "pipeline cases: run the workers without the sink (no SQLite index), to show the index's share")
	memLimit := fs.Int64("memory-limit-mib", 200, "pipeline cases: soft memory limit in MiB, as `pipeline run --memory-limit` sets by default (0: none; GOMEMLIMIT wins when set)")
	logLevel := fs.String("log-level", "error", "log level on stderr")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	if !strings.HasPrefix(spec.Kind, "raw") && *memLimit > 0 && os.Getenv("GOMEMLIMIT") == "" {
		// The same default as pipeline run: RSS stays flat at high K
		// (the embedded server's block caches included) for some GC CPU.
		debug.SetMemoryLimit(*memLimit << 20)
	}
	var lvl slog.Level
	if err := lvl.UnmarshalText([]byte(*logLevel)); err != nil {
		fmt.Fprintf(stderr, "benchrun case: --log-level: %v\n", err)
		return 2
	}
	log := slog.New(slog.NewTextHandler(stderr, &slog.HandlerOptions{Level: lvl}))
	if spec.K < 1 || spec.Jobs < 1 {
		fmt.Fprintln(stderr, "benchrun case: -k and -jobs must be at least 1")
		return 2
	}
	var res caseResult
	var err error
	if strings.HasPrefix(spec.Kind, "raw") {
		res, err = runRaw(ctx, spec, log)
	} else {
		res, err = runPipeline(ctx, spec, log)
	}
	if err != nil {
		res.Err = err.Error()
	}
	if err := json.NewEncoder(stdout).Encode(res); err != nil {
		fmt.Fprintf(stderr, "benchrun case: writing the result: %v\n", err)
		return 1
	}
	if res.Err != "" {
		return 1
	}
	return 0
}

// runServer is the child that serves chat completions until SIGTERM.
func runServer(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("openai-server", flag.ContinueOnError)
	fs.SetOutput(stderr)
	latency := fs.Duration("latency", 500*time.Millisecond, "response latency")
	variants := fs.Int("variants", 16, "distinct valid answers to rotate through")
	if err := fs.Parse(args); err != nil {
		return 2
	}
	s, err := newChatServer(ctx, *latency, *variants)
	if err == nil {
		err = serveChat(ctx, s, stdout)
	}
	if err != nil {
		fmt.Fprintf(stderr, "benchrun openai-server: %v\n", err)
		return 1
	}
	return 0
}

// options are the orchestrator's flags.
type options struct {
	Quick       bool
	Latency     time.Duration
	HTTPLatency time.Duration
	Duration    time.Duration
	MinJobs     int
	Ks          []int
	CPUK        int
	CPUJobs     int
	RawJobs     int
	Reps        int
	Only        map[string]bool
	Profile     string
	Out         string
	Root        string
	Benchtime   string
	ReportBench string
	// LimitDuration is the length of one ratelimit case.
	LimitDuration time.Duration
}

var sections = []string{"latency", "http", "cpu", "micro", "ratelimit", "chunks"}

func parseOptions(args []string, stderr io.Writer) (options, error) {
	fs := flag.NewFlagSet("bench", flag.ContinueOnError)
	fs.SetOutput(stderr)
	fs.Usage = func() {
		fmt.Fprintf(stderr, `usage: scripts/bench [flags]

Measures the pipeline on this machine and writes bench/RESULTS.md.
Sections: latency (simulated model at --latency), http (OpenAI client against
a local server at --http-latency), cpu (zero-latency model vs raw JetStream,
sink lag), micro (go test -bench of sanitize, schemas, index, report),
ratelimit (pipeline run processes against a local server enforcing RPM and
TPM with 429s and headers: reactive, header-driven and --rpm/--tpm, 1 and 3
processes; run it with --only ratelimit), chunks (20 documents of 2 MiB split at
--chunk-chars 8000, simulator L=500ms K=256: chunk throughput, the merges' CPU,
peak RSS; run it with --only chunks).

`)
		fs.PrintDefaults()
	}
	var o options
	var ks, only string
	fs.BoolVar(&o.Quick, "quick", false, "small job counts, one repetition, no 1M-row report benchmark: a smoke run (writes no RESULTS.md unless --out is given)")
	fs.DurationVar(&o.Latency, "latency", 200*time.Millisecond, "simulated model latency L of the latency section")
	fs.DurationVar(&o.HTTPLatency, "http-latency", 500*time.Millisecond, "latency of the local OpenAI-compatible server")
	fs.DurationVar(&o.Duration, "duration", 0, "target length of one latency case; jobs = K x rounds of L (default 12s, quick 2s)")
	fs.IntVar(&o.MinJobs, "jobs", 0, "at least this many jobs for K >= 64 (default 5000, quick 500), rounded up to a multiple of K")
	fs.StringVar(&ks, "k", "1,16,64,256,1024", "concurrency levels of the latency and http sections")
	fs.IntVar(&o.CPUK, "cpu-k", 256, "jobs in flight in the cpu section")
	fs.IntVar(&o.CPUJobs, "cpu-jobs", 0, "jobs of the cpu section's pipeline runs (default 60000, quick 3000)")
	fs.IntVar(&o.RawJobs, "raw-jobs", 0, "jobs of the raw JetStream baseline (default 60000, quick 5000)")
	fs.IntVar(&o.Reps, "reps", 0, "repetitions of the cpu section, medians reported (default 5, quick 1)")
	fs.StringVar(&only, "only", "", "run only these sections (comma-separated: "+strings.Join(sections, ", ")+")")
	fs.StringVar(&o.Profile, "profile", "", "write CPU and heap profiles of extra runs (not in the tables) of the cpu cases and the largest-K latency case into this directory")
	fs.StringVar(&o.Out, "out", "", "results file (default bench/RESULTS.md; none with --quick); \"-\" for none")
	fs.StringVar(&o.Root, "root", ".", "module root (where go test runs)")
	fs.StringVar(&o.Benchtime, "benchtime", "", "go test -benchtime of the micro section (default 1s, quick 100ms)")
	fs.DurationVar(&o.LimitDuration, "limit-duration", 0, "length of one ratelimit case (default 30s, quick 12s)")
	if err := fs.Parse(args); err != nil {
		return o, err
	}
	if fs.NArg() > 0 {
		return o, fmt.Errorf("unexpected argument %q", fs.Arg(0))
	}
	for _, s := range strings.Split(ks, ",") {
		k, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || k < 1 {
			return o, fmt.Errorf("--k: %q is not a positive integer", s)
		}
		o.Ks = append(o.Ks, k)
	}
	if only != "" {
		o.Only = map[string]bool{}
		for _, s := range strings.Split(only, ",") {
			s = strings.TrimSpace(s)
			if !contains(sections, s) {
				return o, fmt.Errorf("--only: unknown section %q (use %s)", s, strings.Join(sections, ", "))
			}
			o.Only[s] = true
		}
	}
	if o.Latency <= 0 || o.HTTPLatency <= 0 {
		return o, errors.New("--latency and --http-latency must be positive")
	}
	def := func(v *int, full, quick int) {
		if *v <= 0 {
			*v = full
			if o.Quick {
				*v = quick
			}
		}
	}
	def(&o.MinJobs, 5000, 500)
	def(&o.CPUJobs, 60000, 3000)
	def(&o.RawJobs, 60000, 5000)
	def(&o.Reps, 5, 1)
	if o.Duration <= 0 {
		o.Duration = 12 * time.Second
		if o.Quick {
			o.Duration = 2 * time.Second
		}
	}
	if o.LimitDuration <= 0 {
		o.LimitDuration = 30 * time.Second
		if o.Quick {
			o.LimitDuration = 12 * time.Second
		}
	}
	if o.Benchtime == "" {
		o.Benchtime = "1s"
		if o.Quick {
			o.Benchtime = "100ms"
		}
	}
	o.ReportBench = "."
	if o.Quick {
		o.ReportBench = "Build/dead=100k"
	}
	switch {
	case o.Out == "-":
		o.Out = ""
	case o.Out == "" && !o.Quick:
		o.Out = "bench/RESULTS.md"
	}
	return o, nil
}

// enabled reports whether a section runs. The ratelimit section runs
// only when --only names it, so a plain run measures what it always did.
func (o options) enabled(section string) bool {
	if section == "ratelimit" || section == "chunks" {
		return o.Only[section]
	}
	return o.Only == nil || o.Only[section]
}

// jobsFor is the job count of a latency case: K jobs per round of L for
// about Duration, and at least MinJobs (rounded up to whole rounds) for
// K >= 64, so the last round is full and efficiency is not cut by a tail.
func jobsFor(k int, latency, target time.Duration, minJobs int) int {
	rounds := max(1, int((target+latency-1)/latency))
	if k >= 64 {
		rounds = max(rounds, (minJobs+k-1)/k)
	}
	return k * rounds
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
