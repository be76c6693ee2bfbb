package main

import (
	"fmt"
	"slices"
	"strings"
	"time"
)

// The goals the bench measures against.
const (
	goalEfficiency = 0.95
	// goalRatio: the pipeline's non-model path against raw JetStream doing
	// the same broker work (the ledger's KV Get and Create per job).
	goalRatio   = 0.70
	goalRSSMB   = 256.0
	goalReport  = time.Second
	goalSinkLag = 1.0 // seconds
	rssK        = 1024
	reportBench = "BenchmarkBuild/dead=1M"
)

// goal is one line of the goals table.
type goal struct {
	Name, Target, Measured, Verdict string
}

func verdict(measured bool, met bool, by string) string {
	switch {
	case !measured:
		return "not measured"
	case met:
		return "met (" + by + ")"
	default:
		return "**missed** (" + by + ")"
	}
}

func efficiencyGoal(name string, rs []caseResult, latency time.Duration) goal {
	g := goal{Name: name, Target: fmt.Sprintf(">= %.2f for every K at L=%v", goalEfficiency, latency)}
	if len(rs) == 0 {
		g.Verdict = verdict(false, false, "")
		return g
	}
	var parts, short []string
	worst, ok := 2.0, true
	for _, r := range rs {
		if r.Err != "" {
			parts = append(parts, fmt.Sprintf("K=%d failed", r.K))
			ok = false
			continue
		}
		parts = append(parts, fmt.Sprintf("K=%d %.3f", r.K, r.Efficiency))
		worst = min(worst, r.Efficiency)
		if r.Efficiency < goalEfficiency {
			short = append(short, fmt.Sprintf("K=%d by %.3f", r.K, goalEfficiency-r.Efficiency))
		}
	}
	g.Measured = strings.Join(parts, ", ")
	switch {
	case !ok:
		g.Verdict = "**missed** (a case failed)"
	case len(short) == 0:
		g.Verdict = verdict(true, true, fmt.Sprintf("worst %.3f", worst))
	default:
		g.Verdict = verdict(true, false, "short at "+strings.Join(short, ", "))
	}
	return g
}

func goals(r *benchRun) []goal {
	var gs []goal
	if r.Opts.enabled("latency") {
		gs = append(gs, efficiencyGoal("Efficiency, simulated model", r.Latency, r.Opts.Latency))
	}
	if r.Opts.enabled("http") {
		gs = append(gs, efficiencyGoal("Efficiency, HTTP path", r.HTTP, r.Opts.HTTPLatency))
	}
	if r.Opts.enabled("cpu") {
		p, l := medianRate(r.CPU), medianRate(r.RawLedger)
		g := goal{Name: "Non-model path vs raw JetStream", Target: fmt.Sprintf(">= %.2f of raw JetStream doing the same broker work (the ledger's KV Get and Create per job), same run", goalRatio)}
		if p > 0 && l > 0 {
			ratio := p / l
			g.Measured = fmt.Sprintf("%.0f / %.0f jobs/s = %.2f (medians, canned model, against raw JetStream with the ledger's KV Get and Create per job)", p, l, ratio)
			if s := medianRate(r.CPUSim); s > 0 {
				g.Measured += fmt.Sprintf("; with the zero-latency simulator %.0f jobs/s = %.2f", s, s/l)
			}
			if q := medianRate(r.Raw); q > 0 {
				g.Measured += fmt.Sprintf("; bare raw JetStream (no ledger) %.0f jobs/s, %.2f", q, p/q)
			}
			g.Verdict = verdict(true, ratio >= goalRatio, fmt.Sprintf("%+.0f points", (ratio-goalRatio)*100))
		} else {
			g.Verdict = verdict(false, false, "")
		}
		gs = append(gs, g)
		all := append(slices.Clone(r.CPU), r.CPUSim...)
		lag := worstLag(all)
		g = goal{Name: "Sink lag at the CPU-bound rate", Target: fmt.Sprintf("< %.0f s", goalSinkLag)}
		if lag >= 0 {
			g.Measured = fmt.Sprintf("%.2f s (worst of %d runs, sampled every 100 ms)", lag, len(all))
			g.Verdict = verdict(true, lag < goalSinkLag, fmt.Sprintf("%.2f s %s", abs(goalSinkLag-lag), map[bool]string{true: "to spare", false: "over"}[lag < goalSinkLag]))
		} else {
			g.Verdict = verdict(false, false, "")
		}
		gs = append(gs, g)
	}
	if r.Opts.enabled("latency") || r.Opts.enabled("http") {
		g := goal{Name: fmt.Sprintf("Peak RSS at K=%d", rssK), Target: fmt.Sprintf("< %.0f MB", goalRSSMB)}
		var parts []string
		worst, seen := 0.0, false
		for i, rs := range [][]caseResult{r.Latency, r.HTTP, r.HTTPNew} {
			for _, c := range rs {
				if c.K == rssK && c.Err == "" {
					label := c.Section
					if i == 2 {
						label += " (new data dir)"
					}
					parts = append(parts, fmt.Sprintf("%s %.0f MB", label, c.PeakRSSMB))
					worst, seen = max(worst, c.PeakRSSMB), true
				}
			}
		}
		g.Measured = strings.Join(parts, ", ")
		g.Verdict = verdict(seen, worst < goalRSSMB, fmt.Sprintf("%.0f MB %s", abs(goalRSSMB-worst), map[bool]string{true: "to spare", false: "over"}[worst < goalRSSMB]))
		gs = append(gs, g)
	}
	if r.Opts.enabled("micro") {
		g := goal{Name: "Full report over 1M dead letters", Target: "< 1 s"}
		if l, ok := findBench(r.Micro, reportBench); ok {
			d := time.Duration(l.Values["ns/op"])
			g.Measured = fmt.Sprintf("%v per report (%s)", d.Round(time.Millisecond), reportBench)
			g.Verdict = verdict(true, d < goalReport, fmt.Sprintf("%.1fx the budget", float64(d)/float64(goalReport)))
		} else {
			g.Verdict = verdict(false, false, "")
			if r.Opts.Quick {
				g.Verdict = "not measured (--quick runs the 100k case only)"
			}
		}
		gs = append(gs, g)
		gs = append(gs, evalGoal(r))
	}
	return gs
}

// evalBench is the eval benchmark the goal reads (package eval).
const evalBench = "BenchmarkRun/100000"

// goalEval is the budget of one eval of 100,000 labelled records.
const goalEval = 5 * time.Second

// evalGoal: pipeline eval scores 100,000 labelled records in under 5 s,
// with a peak live heap that does not grow with the file.
func evalGoal(r *benchRun) goal {
	g := goal{Name: "Eval of 100,000 labelled records", Target: "< 5 s, flat memory"}
	l, ok := findBench(r.Micro, evalBench)
	if !ok {
		g.Verdict = verdict(false, false, "")
		return g
	}
	d := time.Duration(l.Values["ns/op"])
	g.Measured = fmt.Sprintf("%v per eval, %.1f CPU s, peak live heap %.1f MiB (%s)", d.Round(time.Millisecond),
		l.Values["cpu-s/op"], l.Values["peak-heap-MiB"], evalBench)
	if small, ok := findBench(r.Micro, "BenchmarkRun/10000"); ok {
		g.Measured += fmt.Sprintf("; 10,000 records: peak live heap %.1f MiB", small.Values["peak-heap-MiB"])
	}
	g.Verdict = verdict(true, d < goalEval, fmt.Sprintf("%.1fx the budget", float64(d)/float64(goalEval)))
	return g
}

func abs(x float64) float64 {
	if x < 0 {
		return -x
	}
	return x
}

func renderMarkdown(r *benchRun) string {
	var b strings.Builder
	p := func(format string, a ...any) { fmt.Fprintf(&b, format, a...) }
	p("# pipeline: performance figures\n\n")
	p("Written by `scripts/bench%s` on %s (took %v). ", flagsLine(r.Opts), r.Started.UTC().Format("2006-01-02 15:04 UTC"), r.Finished.Sub(r.Started).Round(time.Second))
	p("bench/PROFILES.md has the profiles' findings. Figures from a shared, noisy machine: compare rows of one run, not runs.\n\n")

	p("## Machine\n\n| | |\n|---|---|\n")
	p("| CPUs (nproc) | %d |\n| CPU | %s |\n| memory | %s |\n| Go | %s |\n| kernel | %s |\n", r.Machine.CPUs, r.Machine.CPUModel, r.Machine.MemTotal, r.Machine.Go, r.Machine.Kernel)
	p("| load average (1, 5, 15 min) | at start %s; at end %s (other engineers' builds and tests share the cores) |\n", r.LoadStart, r.LoadEnd)
	p("| CPU pressure (/proc/pressure/cpu, some) | at start %s; at end %s |\n\n", orDash(r.PressureStart), orDash(r.PressureEnd))

	p("## Goals\n\n| goal | target | measured | verdict |\n|---|---|---|---|\n")
	for _, g := range goals(r) {
		p("| %s | %s | %s | %s |\n", g.Name, g.Target, g.Measured, g.Verdict)
	}
	p("\n")
	p("Every pipeline case runs with the soft memory limit `pipeline run` sets by default (200 MiB, `debug.SetMemoryLimit`; GOMEMLIMIT wins when set); the raw JetStream baseline runs without.\n\n")

	if len(r.Latency) > 0 {
		p("## 1. Latency-bound: simulated model, L = %v\n\n", r.Opts.Latency)
		p("No faults (one model call per job), the built-in `invoice` schema, jobs in multiples of K (about %v of rounds, at least %d jobs for K >= 64). ", r.Opts.Duration, r.Opts.MinJobs)
		p("jobs/s = jobs / (first fetch .. last outcome stored in its stream); CPU is the whole process (embedded nats-server, simulator, workers, sink) over the run, per job.\n\n")
		p(slotNote)
		p("| K | jobs | jobs/s | ideal K/L | efficiency | mean in flight | slot cycle ms | in handler ms | between jobs ms | handler→stored ms | CPU ms/job | CPU cores | CPU wait s | peak RSS MB | run s |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for _, c := range r.Latency {
			if c.Err != "" {
				p("| %d | %d | failed: %s | | | | | | | | | | | | |\n", c.K, c.Jobs, oneLine(c.Err))
				continue
			}
			cycle := float64(c.K) / c.JobsPerSec * 1000
			p("| %d | %d | %.1f | %.0f | %.3f | %.1f | %.1f | %.1f | %.1f | %.1f | %.3f | %.2f | %.1f | %.0f | %.1f |\n", c.K, c.Jobs, c.JobsPerSec, c.Ideal, c.Efficiency, c.MeanInFlight,
				cycle, c.HandlerMs, cycle-c.HandlerMs, c.StoreMs, c.CPUPerJob*1000, c.CPUSeconds/c.Seconds, c.CPUWait, c.PeakRSSMB, c.Seconds)
		}
		p("\n")
	}
	if len(r.HTTP) > 0 {
		p("## 2. HTTP path: llm.NewOpenAI against a local OpenAI-compatible server, L = %v\n\n", r.Opts.HTTPLatency)
		p("The server is a child process on 127.0.0.1 (real chat-completions wire format, a valid invoice per answer, no rate-limit headers); its CPU and RSS are its own, from its rusage. ")
		p("The model stack is run's, rate limiter and fleet included. Each case's data dir has answered one job before the measured run, with a stack of its own, as a run restarted on its data dir has: the limiter starts from what the provider said of its limits then (KV PIPELINE_PROVIDER_LIMITS). ")
		p("The last row is the largest K on a new data dir: the limiter knows nothing of the provider, so the first call goes alone and the others wait for its answer, one L per run.\n\n")
		p("| K | jobs | jobs/s | ideal K/L | efficiency | mean in flight | slot cycle ms | in handler ms | between jobs ms | handler→stored ms | CPU ms/job | server CPU ms/job | CPU wait s | peak RSS MB | server RSS MB | run s |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for i, c := range append(append([]caseResult(nil), r.HTTP...), r.HTTPNew...) {
			k := itoa(c.K)
			if i >= len(r.HTTP) {
				k += ", new data dir"
			}
			if c.Err != "" {
				p("| %s | %d | failed: %s | | | | | | | | | | | | | |\n", k, c.Jobs, oneLine(c.Err))
				continue
			}
			cycle := float64(c.K) / c.JobsPerSec * 1000
			p("| %s | %d | %.1f | %.0f | %.3f | %.1f | %.1f | %.1f | %.1f | %.1f | %.3f | %.3f | %.1f | %.0f | %.0f | %.1f |\n", k, c.Jobs, c.JobsPerSec, c.Ideal, c.Efficiency, c.MeanInFlight,
				cycle, c.HandlerMs, cycle-c.HandlerMs, c.StoreMs, c.CPUPerJob*1000,
				c.ServerCPUSeconds/float64(max(c.Jobs, 1))*1000, c.CPUWait, c.PeakRSSMB, c.ServerRSSMB, c.Seconds)
		}
		p("\n")
	}
	if len(r.CPU) > 0 || len(r.Raw) > 0 {
		p("## 3. CPU-bound: zero-latency model vs raw JetStream, K = %d\n\n", r.Opts.CPUK)
		p("Pipeline: consume, model call, sanitize, validate, publish result, ack, sink into SQLite; the model is either canned (answers at once with one of 16 valid invoices written beforehand: the non-model path alone) or the simulator at zero latency (which writes each instance: model work on the same cores); \"no index\" is the canned case without the sink. ")
		p("Raw: the same job bytes preloaded into the JOBS work queue, consumed with explicit ack, a result of the pipeline's mean result size published asynchronously, the job acked on its confirmation. ")
		p("Raw + ledger KV: the same, with what the job ledger asks of the broker done as a hand-written loop would with nats.go's KeyValue: a Get of the job's key before the result and a Create of it after the result's confirmation, before the ack (the pipeline gathers its reads into multi-key direct gets and publishes its Creates asynchronously). ")
		p("Sink lag: the streams' last sequences against the index's cursors (every message up to a cursor is indexed; the sink commits them with the rows), sampled every 100 ms; the lag is the longest time between the streams holding n outcomes and the index holding n.\n\n")
		p("| run | jobs | jobs/s | CPU ms/job | CPU cores | CPU wait s | peak RSS MB | sink lag s | job B | result B | run s |\n|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n")
		for i := range max(len(r.CPU), len(r.CPUSim), len(r.CPUNoIndex), len(r.Raw), len(r.RawLedger)) {
			for _, rs := range [][]caseResult{r.CPU, r.CPUSim, r.CPUNoIndex, r.Raw, r.RawLedger} {
				if i >= len(rs) {
					continue
				}
				c := rs[i]
				if c.Err != "" {
					p("| %s | %d | failed: %s | | | | | | | | |\n", c.Name, c.Jobs, oneLine(c.Err))
					continue
				}
				lag := "-"
				if c.SinkLag >= 0 {
					lag = fmt.Sprintf("%.2f", c.SinkLag)
				}
				p("| %s | %d | %.0f | %.3f | %.2f | %.1f | %.0f | %s | %d | %d | %.1f |\n", c.Name, c.Jobs, c.JobsPerSec, c.CPUPerJob*1000, c.CPUSeconds/max(c.Seconds, 1e-9), c.CPUWait, c.PeakRSSMB, lag, c.JobBytes, c.ResultBytes, c.Seconds)
			}
		}
		if pm, rm := medianRate(r.CPU), medianRate(r.Raw); pm > 0 && rm > 0 {
			p("\nMedians: pipeline with the canned model %.0f jobs/s, raw JetStream %.0f jobs/s, **ratio %.2f**", pm, rm, pm/rm)
			if sm := medianRate(r.CPUSim); sm > 0 {
				p("; with the zero-latency simulator %.0f jobs/s (ratio %.2f: the simulator writes every instance, model work the canned model does not do)", sm, sm/rm)
			}
			if lm := medianRate(r.RawLedger); lm > 0 {
				p("; raw JetStream with the ledger's KV Get and Create %.0f jobs/s (ratio %.2f to raw; the pipeline %.2f of it)", lm, lm/rm, pm/lm)
			}
			if nm := medianRate(r.CPUNoIndex); nm > 0 {
				p("; without the index %.0f jobs/s (ratio %.2f: the workers alone, nothing reads the outcomes into SQLite, a diagnostic and not a deployment; the difference is what the sink costs: each outcome, handed over by the worker that stored it, inserted into SQLite)", nm, nm/rm)
			}
			p(".\n")
		}
		p("\n")
	}
	if len(r.Micro) > 0 || len(r.MicroErr) > 0 {
		p("## 4. Micro-benchmarks\n\n`go test -run '^$' -bench <pattern> -benchmem -benchtime %s` per package.\n\n```text\n", r.Opts.Benchtime)
		pkg := ""
		for _, l := range r.Micro {
			if l.Pkg != pkg {
				pkg = l.Pkg
				p("# %s\n", pkg)
			}
			p("%s\n", l.Raw)
		}
		p("```\n\n")
		for _, e := range r.MicroErr {
			p("- failed: %s\n", oneLine(e))
		}
	}
	if len(r.Profiles) > 0 {
		p("Profiles written: %s.\n", strings.Join(r.Profiles, ", "))
	}
	p("%s", renderLimits(r.Limits, r.Opts.LimitDuration))
	return b.String()
}

// slotNote explains the latency tables' breakdown of a slot's cycle.
const slotNote = "A slot's cycle (K / jobs/s) splits into: in handler (model call, sanitize, validate) and between jobs (the wait for a fetched job, its ledger read and parse, and the run's start and tail spread over its jobs). " +
	"Handler→stored (encode the outcome, publish, the stream's ack; from RESULTS timestamps, over a sample of about 1000 jobs) is not part of it: settler goroutines store and ack the outcome while the slot runs its next job. " +
	"CPU cores is the process's CPU time (the sink's flush after the last result included) over the run's seconds. CPU wait is the time the process's threads were runnable but waited for a CPU held by other processes (schedstat): when it is large against the CPU used, the machine's other load, not the pipeline, held the run back.\n\n"

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func oneLine(s string) string {
	s = strings.ReplaceAll(s, "\n", " ")
	s = strings.ReplaceAll(s, "|", "/")
	if len(s) > 300 {
		s = s[:300] + "..."
	}
	return s
}

// flagsLine reconstructs the flags that differ from the defaults.
func flagsLine(o options) string {
	var f []string
	if o.Quick {
		f = append(f, "--quick")
	}
	if o.Only != nil {
		var s []string
		for _, x := range sections {
			if o.Only[x] {
				s = append(s, x)
			}
		}
		f = append(f, "--only "+strings.Join(s, ","))
	}
	if o.Latency != 200*time.Millisecond {
		f = append(f, "--latency "+o.Latency.String())
	}
	if o.HTTPLatency != 500*time.Millisecond {
		f = append(f, "--http-latency "+o.HTTPLatency.String())
	}
	if !slices.Equal(o.Ks, []int{1, 16, 64, 256, 1024}) {
		var s []string
		for _, k := range o.Ks {
			s = append(s, itoa(k))
		}
		f = append(f, "--k "+strings.Join(s, ","))
	}
	if o.Profile != "" {
		f = append(f, "--profile "+o.Profile)
	}
	if len(f) == 0 {
		return ""
	}
	return " " + strings.Join(f, " ")
}
