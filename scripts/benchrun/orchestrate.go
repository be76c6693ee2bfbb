package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"
)

// run is everything one bench invocation measured.
type benchRun struct {
	Machine   machine
	Started   time.Time
	Finished  time.Time
	LoadStart string
	LoadEnd   string
	// PressureStart, PressureEnd: /proc/pressure/cpu "some" averages.
	PressureStart, PressureEnd string
	Opts                       options
	Latency                    []caseResult
	HTTP                       []caseResult // on a data dir that answered a job before
	HTTPNew                    []caseResult // the largest K on a new data dir
	CPU                        []caseResult // pipeline runs with the canned (free) model
	CPUSim                     []caseResult // pipeline runs with the zero-latency simulator
	CPUNoIndex                 []caseResult // canned model, no sink: the index's share
	Raw                        []caseResult // raw JetStream runs
	RawLedger                  []caseResult // raw JetStream with the ledger's KV Get and Create per job
	Limits                     []limitCase
	Micro                      []benchLine
	MicroErr                   []string
	Profiles                   []string
}

func orchestrate(ctx context.Context, o options, stdout, stderr io.Writer) error {
	self, err := os.Executable()
	if err != nil {
		return fmt.Errorf("finding this executable: %w", err)
	}
	r := &benchRun{Machine: describeMachine(), Started: time.Now(), LoadStart: loadAvg(), PressureStart: cpuPressure(), Opts: o}
	fmt.Fprintf(stdout, "pipeline bench: %d CPUs (%s), %s, %s; load average %s\n",
		r.Machine.CPUs, r.Machine.CPUModel, r.Machine.MemTotal, r.Machine.Go, r.LoadStart)
	if o.Profile != "" {
		if err := os.MkdirAll(o.Profile, 0o755); err != nil {
			return fmt.Errorf("creating --profile dir: %w", err)
		}
	}
	prof := func(name string) []string {
		if o.Profile == "" {
			return nil
		}
		cpu, mem := filepath.Join(o.Profile, name+".cpu.pprof"), filepath.Join(o.Profile, name+".heap.pprof")
		r.Profiles = append(r.Profiles, cpu, mem)
		return []string{"-cpuprofile", cpu, "-memprofile", mem}
	}

	if o.enabled("latency") {
		fmt.Fprintf(stdout, "\n== latency: simulated model, L=%v, no faults, schema %s\n", o.Latency, benchSchema)
		for _, k := range o.Ks {
			n := jobsFor(k, o.Latency, o.Duration, o.MinJobs)
			args := []string{"-kind", "sim", "-k", itoa(k), "-jobs", itoa(n), "-latency", o.Latency.String()}
			res := runChild(ctx, self, args, caseTimeout(n, k, o.Latency), stderr)
			res.Section, res.Name = "latency", fmt.Sprintf("sim K=%d", k)
			withIdeal(&res, k, o.Latency)
			r.Latency = append(r.Latency, res)
			printCase(stdout, res)
		}
	}
	if o.enabled("http") {
		fmt.Fprintf(stdout, "\n== http: llm.NewOpenAI against a local server (child process), L=%v\n", o.HTTPLatency)
		// Each case's data dir has answered a job before (as a run
		// restarted on its data dir): the limiter starts from what the
		// provider said then. The largest K runs once more on a new data
		// dir, where the first call probes the provider alone.
		httpCase := func(k, warm int, name string) caseResult {
			res := runHTTPCase(ctx, self, k, jobsFor(k, o.HTTPLatency, o.Duration, o.MinJobs), o.HTTPLatency, warm, stderr)
			res.Section, res.Name = "http", name
			withIdeal(&res, k, o.HTTPLatency)
			printCase(stdout, res)
			return res
		}
		for _, k := range o.Ks {
			r.HTTP = append(r.HTTP, httpCase(k, 1, fmt.Sprintf("openai K=%d", k)))
		}
		if len(o.Ks) > 0 {
			k := slices.Max(o.Ks)
			r.HTTPNew = append(r.HTTPNew, httpCase(k, 0, fmt.Sprintf("openai K=%d new data dir", k)))
		}
	}
	if o.enabled("cpu") {
		fmt.Fprintf(stdout, "\n== cpu: zero-latency model vs raw JetStream, K=%d, %d reps\n", o.CPUK, o.Reps)
		for i := range o.Reps {
			var resultBytes int
			for _, kind := range []string{"canned", "sim"} {
				args := []string{"-kind", kind, "-k", itoa(o.CPUK), "-jobs", itoa(o.CPUJobs), "-latency", "0s", "-sample", "100ms"}
				res := runChild(ctx, self, args, caseTimeout(o.CPUJobs, 1, 0), stderr)
				res.Section, res.Name = "cpu", fmt.Sprintf("pipeline, %s model #%d", kind, i+1)
				if kind == "canned" {
					r.CPU = append(r.CPU, res)
				} else {
					r.CPUSim = append(r.CPUSim, res)
				}
				printCase(stdout, res)
				if resultBytes == 0 {
					resultBytes = res.ResultBytes
				}
			}
			noIndex := runChild(ctx, self, []string{"-kind", "canned", "-no-index", "-k", itoa(o.CPUK), "-jobs", itoa(o.CPUJobs), "-latency", "0s"},
				caseTimeout(o.CPUJobs, 1, 0), stderr)
			noIndex.Section, noIndex.Name = "cpu", fmt.Sprintf("pipeline, canned model, no index #%d", i+1)
			r.CPUNoIndex = append(r.CPUNoIndex, noIndex)
			printCase(stdout, noIndex)
			if resultBytes == 0 {
				resultBytes = 2048
			}
			raw := runChild(ctx, self, []string{"-kind", "raw", "-k", itoa(o.CPUK), "-jobs", itoa(o.RawJobs), "-result-bytes", itoa(resultBytes)},
				caseTimeout(o.RawJobs, 1, 0), stderr)
			raw.Section, raw.Name = "cpu", fmt.Sprintf("raw JetStream #%d", i+1)
			r.Raw = append(r.Raw, raw)
			printCase(stdout, raw)
			rl := runChild(ctx, self, []string{"-kind", "raw-ledger", "-k", itoa(o.CPUK), "-jobs", itoa(o.RawJobs), "-result-bytes", itoa(resultBytes)},
				caseTimeout(o.RawJobs, 1, 0), stderr)
			rl.Section, rl.Name = "cpu", fmt.Sprintf("raw JetStream + ledger KV #%d", i+1)
			r.RawLedger = append(r.RawLedger, rl)
			printCase(stdout, rl)
		}
		if p, q := medianRate(r.CPU), medianRate(r.Raw); p > 0 && q > 0 {
			fmt.Fprintf(stdout, "median: pipeline (canned model) %.0f jobs/s, (sim) %.0f jobs/s, raw %.0f jobs/s, ratio %.2f; worst sink lag %.2fs\n",
				p, medianRate(r.CPUSim), q, p/q, worstLag(append(slices.Clone(r.CPU), r.CPUSim...)))
		}
	}
	if o.Profile != "" {
		// Profiled runs come apart from the measured ones, so the
		// profiler's cost is in none of the figures.
		fmt.Fprintf(stdout, "\n== profiles (extra runs, not in the tables) into %s\n", o.Profile)
		k := slices.Max(o.Ks)
		if o.enabled("latency") {
			n := jobsFor(k, o.Latency, o.Duration, o.MinJobs)
			res := runChild(ctx, self, append([]string{"-kind", "sim", "-k", itoa(k), "-jobs", itoa(n), "-latency", o.Latency.String()}, prof(fmt.Sprintf("latency-k%d", k))...),
				caseTimeout(n, k, o.Latency), stderr)
			res.Name = fmt.Sprintf("profiled sim K=%d", k)
			printCase(stdout, res)
		}
		if o.enabled("cpu") {
			for _, kind := range []string{"canned", "sim"} {
				res := runChild(ctx, self, append([]string{"-kind", kind, "-k", itoa(o.CPUK), "-jobs", itoa(o.CPUJobs), "-latency", "0s"}, prof("cpu-"+kind)...),
					caseTimeout(o.CPUJobs, 1, 0), stderr)
				res.Name = "profiled " + kind
				printCase(stdout, res)
			}
		}
	}
	if o.enabled("micro") {
		fmt.Fprintf(stdout, "\n== micro: go test -bench (benchtime %s)\n", o.Benchtime)
		for _, pkg := range microPackages(o) {
			lines, err := runMicro(ctx, o.Root, pkg, o.Benchtime, stderr)
			if err != nil {
				msg := fmt.Sprintf("%s: %v", pkg.Dir, err)
				r.MicroErr = append(r.MicroErr, msg)
				fmt.Fprintf(stdout, "FAILED %s\n", msg)
			}
			for _, l := range lines {
				fmt.Fprintln(stdout, l.Raw)
			}
			r.Micro = append(r.Micro, lines...)
		}
	}
	if o.enabled("ratelimit") {
		fmt.Fprintf(stdout, "\n== ratelimit: pipeline run against a local server enforcing %d RPM, %d TPM (%s per case)\n", limitRPM, limitTPM, o.LimitDuration)
		cs, err := runLimitSection(ctx, o, stdout, stderr)
		if err != nil {
			return err
		}
		r.Limits = cs
	}
	var chunks *caseResult
	if o.enabled("chunks") {
		c := runChunkSection(ctx, o, self, stdout, stderr)
		chunks = &c
	}
	r.Finished, r.LoadEnd, r.PressureEnd = time.Now(), loadAvg(), cpuPressure()

	md := renderMarkdown(r)
	if o.Out != "" && len(o.Only) == 1 && o.Only["chunks"] && chunks != nil {
		// The chunks section alone replaces its own section of the results
		// file, as the ratelimit section does.
		md = spliceHeading(o.Out, chunksHeading, renderChunks(*chunks, r.Started))
	}
	if o.Out != "" && len(o.Only) == 1 && o.Only["ratelimit"] {
		// The ratelimit section alone replaces its own section of the
		// results file and leaves the other sections' figures as they are.
		md = spliceSection(o.Out, renderLimits(r.Limits, o.LimitDuration))
	}
	fmt.Fprintf(stdout, "\n%s", md)
	if o.Out != "" {
		if err := os.MkdirAll(filepath.Dir(o.Out), 0o755); err != nil {
			return fmt.Errorf("creating %s: %w", filepath.Dir(o.Out), err)
		}
		if err := os.WriteFile(o.Out, []byte(md), 0o644); err != nil {
			return fmt.Errorf("writing %s: %w", o.Out, err)
		}
		fmt.Fprintf(stdout, "\nwrote %s\n", o.Out)
	}
	return nil
}

func itoa(i int) string { return fmt.Sprint(i) }

// caseTimeout bounds a child: three times the ideal duration plus setup.
func caseTimeout(jobs, k int, latency time.Duration) time.Duration {
	ideal := time.Duration(float64(jobs)/float64(k)) * latency
	return 3*ideal + 2*time.Minute + time.Duration(jobs)*time.Millisecond
}

func withIdeal(r *caseResult, k int, latency time.Duration) {
	r.K, r.Latency = k, latency.Seconds()
	r.Ideal = float64(k) / latency.Seconds()
	if r.JobsPerSec > 0 {
		r.Efficiency = r.JobsPerSec / r.Ideal
	}
}

// runChild runs "self case args..." and decodes its result. A child that
// fails, times out or prints no result gives a result with Err set; its
// stderr's tail says why.
func runChild(ctx context.Context, self string, args []string, timeout time.Duration, stderr io.Writer) caseResult {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, self, append([]string{"case"}, args...)...)
	cmd.Cancel = func() error { return cmd.Process.Signal(syscall.SIGTERM) }
	cmd.WaitDelay = 30 * time.Second
	var out, errb bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = io.MultiWriter(&errb, stderr)
	runErr := cmd.Run()
	var res caseResult
	if line := lastLine(out.Bytes()); len(line) > 0 {
		if err := json.Unmarshal(line, &res); err != nil {
			res.Err = fmt.Sprintf("decoding the child's result: %v", err)
		}
	} else {
		res.Err = "no result"
	}
	if runErr != nil && res.Err == "" {
		res.Err = runErr.Error()
	}
	if runErr != nil && ctx.Err() != nil {
		res.Err = fmt.Sprintf("timed out after %v: %s", timeout, res.Err)
	}
	if res.Err != "" && res.SinkLag == 0 {
		res.SinkLag = -1
	}
	if res.Err != "" {
		if tail := tailLines(errb.String(), 5); tail != "" {
			res.Err += " (stderr: " + tail + ")"
		}
	}
	return res
}

// runHTTPCase starts the local OpenAI-compatible server as a child
// process, runs the case against it, stops the server and adds its CPU
// time and peak RSS (from its rusage) to the result.
func runHTTPCase(ctx context.Context, self string, k, n int, latency time.Duration, warm int, stderr io.Writer) caseResult {
	srv := exec.Command(self, "openai-server", "-latency", latency.String())
	srv.Stderr = stderr
	stdout, err := srv.StdoutPipe()
	if err != nil {
		return caseResult{Err: fmt.Sprintf("server stdout: %v", err), SinkLag: -1}
	}
	if err := srv.Start(); err != nil {
		return caseResult{Err: fmt.Sprintf("starting the server: %v", err), SinkLag: -1}
	}
	stopServer := func() (cpu, rss float64, err error) {
		_ = srv.Process.Signal(syscall.SIGTERM) // Wait reports what happened
		go io.Copy(io.Discard, stdout)
		werr := srv.Wait()
		if ru, ok := srv.ProcessState.SysUsage().(*syscall.Rusage); ok {
			cpu = float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
			rss = float64(ru.Maxrss) / 1024
		}
		return cpu, rss, werr
	}
	url, err := readAnnounce(stdout, 30*time.Second)
	if err != nil {
		_, _, _ = stopServer()
		return caseResult{Err: fmt.Sprintf("server did not start: %v", err), SinkLag: -1}
	}
	res := runChild(ctx, self, []string{"-kind", "http", "-k", itoa(k), "-jobs", itoa(n), "-latency", latency.String(), "-llm-url", url, "-warm", itoa(warm)},
		caseTimeout(n, k, latency), stderr)
	cpu, rss, err := stopServer()
	res.ServerCPUSeconds, res.ServerRSSMB = cpu, rss
	if err != nil && res.Err == "" {
		res.Err = fmt.Sprintf("server: %v", err)
	}
	return res
}

// readAnnounce reads the server's "listening <url>" line.
func readAnnounce(r io.Reader, timeout time.Duration) (string, error) {
	type got struct {
		url string
		err error
	}
	ch := make(chan got, 1)
	go func() {
		line, err := bufio.NewReader(r).ReadString('\n')
		url, ok := strings.CutPrefix(strings.TrimSpace(line), "listening ")
		if err == nil && !ok {
			err = fmt.Errorf("unexpected line %q", line)
		}
		ch <- got{url, err}
	}()
	select {
	case g := <-ch:
		return g.url, g.err
	case <-time.After(timeout):
		return "", errors.New("no address announced")
	}
}

func lastLine(b []byte) []byte {
	b = bytes.TrimSpace(b)
	if i := bytes.LastIndexByte(b, '\n'); i >= 0 {
		return b[i+1:]
	}
	return b
}

func tailLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

func printCase(w io.Writer, r caseResult) {
	if r.Err != "" {
		fmt.Fprintf(w, "%-22s FAILED: %s\n", r.Name, r.Err)
		return
	}
	fmt.Fprintf(w, "%-22s jobs=%-6d %8.1f jobs/s", r.Name, r.Jobs, r.JobsPerSec)
	if r.Ideal > 0 {
		fmt.Fprintf(w, " ideal=%.0f eff=%.3f", r.Ideal, r.Efficiency)
	}
	if r.MeanInFlight > 0 {
		fmt.Fprintf(w, " in-flight=%.0f", r.MeanInFlight)
	}
	if r.HandlerMs > 0 && r.JobsPerSec > 0 {
		// The slot's cycle and its split, as in the latency tables; the
		// store runs beside the slot's next job.
		cycle := float64(r.K) / r.JobsPerSec * 1000
		fmt.Fprintf(w, " cycle=%.1fms (handler %.1f, between jobs %.1f; handler->stored %.1f)", cycle, r.HandlerMs, cycle-r.HandlerMs, r.StoreMs)
	}
	fmt.Fprintf(w, " cpu=%.3fms/job wait=%.1fs rss=%.0fMB", r.CPUPerJob*1000, r.CPUWait, r.PeakRSSMB)
	if r.ServerCPUSeconds > 0 {
		fmt.Fprintf(w, " server cpu=%.3fms/job rss=%.0fMB", r.ServerCPUSeconds/float64(max(r.Jobs, 1))*1000, r.ServerRSSMB)
	}
	if r.SinkLag >= 0 {
		fmt.Fprintf(w, " sink lag=%.2fs", r.SinkLag)
	}
	fmt.Fprintf(w, " (%.1fs)\n", r.Seconds)
}

func medianRate(rs []caseResult) float64 {
	var v []float64
	for _, r := range rs {
		if r.Err == "" && r.JobsPerSec > 0 {
			v = append(v, r.JobsPerSec)
		}
	}
	return median(v)
}

func median(v []float64) float64 {
	if len(v) == 0 {
		return 0
	}
	v = slices.Clone(v)
	slices.Sort(v)
	if len(v)%2 == 1 {
		return v[len(v)/2]
	}
	return (v[len(v)/2-1] + v[len(v)/2]) / 2
}

// worstLag is the largest measured sink lag (-1 when none was measured).
func worstLag(rs []caseResult) float64 {
	worst := -1.0
	for _, r := range rs {
		if r.Err == "" && r.SinkLag > worst {
			worst = r.SinkLag
		}
	}
	return worst
}
