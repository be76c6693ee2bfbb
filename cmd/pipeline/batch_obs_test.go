package main

import (
	"cmp"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/internal/poll"
	"github.com/llmpipeline/pipeline/llm/batchtest"
)

// sample is one line of the Prometheus text format: its name, labels and
// value.
type sample struct {
	name   string
	labels map[string]string
	value  float64
}

var (
	sampleRe = regexp.MustCompile(`^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$`)
	labelRe  = regexp.MustCompile(`([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"`)
)

// scrape reads the samples of name from the /metrics at addr.
func scrape(t *testing.T, addr, name string) ([]sample, error) {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return nil, err
	}
	var out []sample
	for line := range strings.SplitSeq(string(body), "\n") {
		m := sampleRe.FindStringSubmatch(line)
		if m == nil || m[1] != name {
			continue
		}
		v, err := strconv.ParseFloat(m[3], 64)
		if err != nil {
			t.Fatalf("metric line %q: %v", line, err)
		}
		s := sample{name: m[1], labels: map[string]string{}, value: v}
		for _, l := range labelRe.FindAllStringSubmatch(m[2], -1) {
			s.labels[l[1]] = l[2]
		}
		out = append(out, s)
	}
	return out, nil
}

// sum adds the samples whose labels include want.
func sum(samples []sample, want map[string]string) float64 {
	var n float64
next:
	for _, s := range samples {
		for k, v := range want {
			if s.labels[k] != v {
				continue next
			}
		}
		n += s.value
	}
	return n
}

// batchMetrics is what a test reads of a batch run's metrics.
type batchMetrics struct {
	batches, requests, waiting []sample
}

func scrapeBatch(t *testing.T, addr string) (batchMetrics, error) {
	t.Helper()
	var m batchMetrics
	var err error
	if m.batches, err = scrape(t, addr, "pipeline_batches"); err != nil {
		return m, err
	}
	if m.requests, err = scrape(t, addr, "pipeline_batch_requests_total"); err != nil {
		return m, err
	}
	m.waiting, err = scrape(t, addr, "pipeline_batch_requests_waiting")
	return m, err
}

func freeAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // the run listens here
	return addr
}

// TestBatchRunMetrics runs 20 ticket jobs (half valid at once, half
// healed and then dead-lettered) through `pipeline run --batch
// --metrics-addr` against a provider that holds its batches: while held,
// the batch gauge shows every batch submitted and in_progress, and the 20
// requests waiting in them; released, the request counter counts 10
// results, 10 heal turns and 10 dead letters, and the gauge every batch
// the provider created as ended and completed, none in flight.
func TestBatchRunMetrics(t *testing.T) {
	t.Parallel()
	wantTestKeys(t)
	srv := batchtest.New(batchtest.Config{Answer: ticketAnswers(), Key: "sk-test", Hold: true})
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	ids := ticketJobs(t, dir, "met", 20)
	addr := freeAddr(t)

	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out, errs syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- mainContext(ctx, []string{"pipeline", "run", "--data-dir", dir, "--model", "openai:gpt-4o-mini", "--llm-url", srv.URL + "/v1",
			"--max-attempts", "2", "--concurrency", "20", "--batch", "--batch-wait", "100ms", "--batch-poll", "50ms", "--metrics-addr", addr},
			strings.NewReader(""), &out, &errs)
	}()
	inFlight := map[string]string{"provider": "openai", "state": "submitted", "status": "in_progress"}
	var m batchMetrics
	wait := func(what string, ok func() bool) {
		t.Helper()
		err := poll.Wait(t, 60*time.Second, func() error {
			var err error
			if m, err = scrapeBatch(t, addr); err == nil && ok() {
				return nil
			}
			select {
			case code := <-done:
				t.Fatalf("run ended (exit %d) before %s; last scrape %+v\nstderr:\n%s", code, what, m, errs.String())
			default:
			}
			return cmp.Or(err, errors.New("not yet"))
		})
		if err != nil {
			t.Fatalf("no %s after 60s; last scrape %+v (%v)\nstderr:\n%s", what, m, err, errs.String())
		}
	}
	wait("batch held in progress with the 20 requests", func() bool {
		held := len(srv.Batches())
		return held > 0 && sum(m.batches, inFlight) == float64(held) &&
			sum(m.waiting, map[string]string{"where": "batch"}) == float64(len(ids))
	})
	t.Logf("held: %d batches in_progress, 20 requests in them", len(srv.Batches()))
	if n := sum(m.requests, nil); n != 0 {
		t.Errorf("requests counted %v before any batch answered, want 0", n)
	}
	srv.SetHold(false)
	for _, id := range srv.Batches() {
		srv.Release(id)
	}
	outcome := func(o string) float64 {
		return sum(m.requests, map[string]string{"provider": "openai", "outcome": o})
	}
	ended := map[string]string{"provider": "openai", "state": "ended", "status": "completed"}
	wait("every job ended and every batch settled", func() bool {
		return outcome("result")+outcome("dead_letter") == float64(len(ids)) && sum(m.batches, ended) == float64(srv.Creates())
	})
	cancel()
	if code := <-done; code != 0 {
		t.Errorf("run exit %d\n%s", code, errs.String())
	}
	for o, want := range map[string]float64{"result": 10, "heal": 10, "dead_letter": 10, "retry": 0, "requeued": 0} {
		if got := outcome(o); got != want {
			t.Errorf("pipeline_batch_requests_total{outcome=%q} = %v, want %v", o, got, want)
		}
	}
	if srv.Creates() < 2 {
		t.Errorf("%d batches, want the heal turns in a later one", srv.Creates())
	}
	if all := sum(m.batches, nil); all != float64(srv.Creates()) {
		t.Errorf("pipeline_batches sums to %v with every batch ended and completed, want %d: %+v", all, srv.Creates(), m.batches)
	}
	if n := sum(m.waiting, nil); n != 0 {
		t.Errorf("requests waiting %v after the run, want 0: %+v", n, m.waiting)
	}
	for _, s := range append(append(m.batches, m.requests...), m.waiting...) {
		for _, v := range s.labels {
			for _, id := range ids {
				if strings.Contains(v, id) {
					t.Errorf("job id %s in a label of %s", id, s.name)
				}
			}
			for _, id := range srv.Batches() {
				if strings.Contains(v, id) {
					t.Errorf("batch id %s in a label of %s", id, s.name)
				}
			}
		}
	}
}

// TestBatchRunProgressShowsBatches: on a terminal, the progress line of a
// batch run shows the batches in flight by state and the requests in
// them, and the run still ends with its summary.
func TestBatchRunProgressShowsBatches(t *testing.T) {
	t.Parallel()
	wantTestKeys(t)
	srv := batchtest.New(batchtest.Config{Answer: ticketAnswers(), Key: "sk-test", Hold: true})
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	ticketJobs(t, dir, "tty", 4)
	var out, errs syncBuffer
	app := newAppEnv(&env{stdin: strings.NewReader(""), stdout: &out, stderr: &errs,
		terminal: func(s any) bool { return s == any(&errs) }})
	done := make(chan error, 1)
	go func() {
		done <- runApp(t.Context(), app, []string{"pipeline", "run", "--data-dir", dir, "--until-idle", "--model", "openai:gpt-4o-mini", "--llm-url", srv.URL + "/v1",
			"--max-attempts", "2", "--concurrency", "4", "--batch", "--batch-size", "4", "--batch-wait", "1s", "--batch-poll", "50ms"})
	}()
	drawn := regexp.MustCompile(`in flight \d+  batches in_progress 1  requests 4 in batches`)
	err := poll.Wait(t, 60*time.Second, func() error {
		if drawn.MatchString(errs.String()) {
			return nil
		}
		select {
		case err := <-done:
			t.Fatalf("run ended (%v) before the progress showed the held batch:\n%q", err, errs.String())
		default:
		}
		return errors.New("not drawn yet")
	})
	if err != nil {
		t.Fatalf("the progress never showed the batch held in progress:\n%q", errs.String())
	}
	srv.SetHold(false)
	for _, id := range srv.Batches() {
		srv.Release(id)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("run: %v\n%s", err, errs.String())
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("run did not end after the batches were released:\n%q", errs.String())
	}
	if !summaryRe.MatchString(errs.String()) {
		t.Errorf("no summary line after the progress:\n%q", errs.String())
	}
}
