package main

import (
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/internal/poll"
)

// TestMetricsEndpoint scrapes --metrics-addr while a run is working and
// checks the metric families and that no job id leaks into a label.
func TestMetricsEndpoint(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	file, ids := jobsFile(t, 12)
	mustCLI(t, "", "submit", "--data-dir", dir, file)

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // the run listens here; a port freed this instant is not reused at once

	done := make(chan int, 1)
	go func() {
		_, _, code := runCLI(t, "", "run", "--data-dir", dir, "--until-idle", "--concurrency", "1",
			"--sim-latency", "150ms", "--metrics-addr", addr)
		done <- code
	}()

	wants := []string{
		"pipeline_jobs_total{", "pipeline_attempts_per_job", "pipeline_model_latency_seconds",
		"pipeline_model_tokens_total{", `pipeline_breaker_state{provider="sim",state="closed"} 1`,
		"pipeline_jobs_in_flight 1", "pipeline_consumer_pending", "pipeline_dlq_rows",
	}
	var body string
	// Wait for a scrape with every family while a job is in flight (a
	// family appears with its first observation, which under load may
	// come after another's); past 30s the checks below say what the last
	// scrape lacks.
	_ = poll.Wait(t, 30*time.Second, func() error {
		resp, err := http.Get("http://" + addr + "/metrics")
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			body = string(b)
			all := true
			for _, want := range wants {
				all = all && strings.Contains(body, want)
			}
			if all {
				return nil
			}
		}
		select {
		case code := <-done:
			t.Fatalf("run ended (exit %d) before a job was counted in the metrics; last scrape:\n%s", code, body)
		default:
		}
		return errors.New("not counted yet")
	})
	for _, want := range wants {
		if !strings.Contains(body, want) {
			t.Errorf("metrics lack %q", want)
		}
	}
	for _, id := range ids {
		if strings.Contains(body, id) {
			t.Errorf("job id %s appears in the metrics (labels must stay low-cardinality)", id)
		}
	}
	if code := <-done; code != 0 {
		t.Errorf("run exit %d", code)
	}
}
