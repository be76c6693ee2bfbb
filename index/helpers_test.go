package index

import (
	"encoding/json"
	"path/filepath"
	"testing"

	"github.com/llmpipeline/pipeline/internal/jobtest"
	"github.com/llmpipeline/pipeline/job"
)

func openTemp(tb testing.TB) *Store {
	tb.Helper()
	s, err := Open(filepath.Join(tb.TempDir(), "pipeline.db"))
	if err != nil {
		tb.Fatalf("Open: %v", err)
	}
	tb.Cleanup(func() {
		if err := s.Close(); err != nil {
			tb.Errorf("Close: %v", err)
		}
	})
	return s
}

// message encodes o as a worker publishes it: the outcome without data and
// job, then both appended as they are (see worker.encodeOutcome).
func message(tb testing.TB, o job.Outcome) []byte {
	tb.Helper()
	data, job := o.Data, o.Job
	o.Data, o.Job = nil, nil
	b, err := json.Marshal(o)
	if err != nil {
		tb.Fatal(err)
	}
	b = b[:len(b)-1]
	if len(data) > 0 {
		b = append(append(b, `,"data":`...), data...)
	}
	if len(job) > 0 {
		b = append(append(b, `,"job":`...), job...)
	}
	return append(b, '}')
}

// The columns of outcomes and attempts as migration 0001 created them, for
// tests that build a file of an older version from a current one.
const (
	outcomesV1Columns = `id, job_id, run, schema_id, version, dead, class, reason, model, attempts, deliveries,
		prompt_tokens, completion_tokens, tokens, heal_tokens, first_path, started_at, finished_at, replayed`
	attemptsV1Columns = `outcome_id, n, temperature, class, finish_reason, repairs, diagnostics, prompt_tokens,
		completion_tokens, cached_tokens, reasoning_tokens, latency_ms, transport_retries`
)

// The outcomes the index's tests write: internal/jobtest's, shared with
// the codec's tests.
var (
	t0        = jobtest.T0
	outcome   = jobtest.Outcome
	diag      = jobtest.Diag
	realistic = jobtest.Realistic
)

// embeddedMigrations is how many migrations the binary embeds (the
// versions need not be contiguous while branches add theirs).
func embeddedMigrations(t *testing.T) int {
	t.Helper()
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	return len(ms)
}
