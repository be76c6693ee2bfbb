package index

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/job"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

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

// outcome builds a realistic outcome: attempts model calls, each failing
// with the given diagnostics except the last one of a succeeded job.
func outcome(id string, dead bool, attempts int, at time.Time, diags ...job.Diagnostic) job.Outcome {
	o := job.Outcome{
		JobID:         id,
		Schema:        "invoice",
		SchemaVersion: "v1hash",
		Status:        job.StatusSucceeded,
		Model:         "sim",
		Attempts:      attempts,
		Job:           json.RawMessage(fmt.Sprintf(`{"id":%q,"schema":"invoice","input":"Invoice INV-1 from ACME, total 120.50 EUR, 3 items: bolts 2x10, nuts 5x3, washers 100x0.2"}`, id)),
		Deliveries:    1,
		StartedAt:     at.Add(-time.Second),
		FinishedAt:    at,
	}
	if dead {
		o.Status = job.StatusDeadLettered
		o.Class = "exhausted"
		o.Reason = fmt.Sprintf("%d attempts used, still %d diagnostics", attempts, len(diags))
	} else {
		o.Data = json.RawMessage(`{"total":120.5}`)
	}
	for n := 1; n <= attempts; n++ {
		a := job.Attempt{
			N:                n,
			Temperature:      0.7 - 0.2*float64(n-1),
			Raw:              "```json\n{\"invoice_id\":\"INV-1\",\"vendor\":\"ACME\",\"total\":\"120.50\",\"currency\":\"eur\",\"items\":[{\"name\":\"bolts\",\"qty\":2,\"price\":10},{\"name\":\"nuts\",\"qty\":5,\"price\":\"3\"}],}\n```",
			Repairs:          []string{"code_fence", "trailing_comma"},
			FinishReason:     "stop",
			PromptTokens:     400 + 150*(n-1),
			CompletionTokens: 120,
			LatencyMS:        180,
		}
		if dead || n < attempts {
			a.Class = "schema"
			a.Diagnostics = diags
		}
		o.Trace = append(o.Trace, a)
	}
	return o
}

func diag(path, keyword, received string) job.Diagnostic {
	return job.Diagnostic{Path: path, Keyword: keyword, Message: keyword + " failed at " + path, Expected: "something else", Received: received}
}

// realistic is the benchmark's outcome: 2 attempts, 3 diagnostics each.
func realistic(i int) job.Outcome {
	return outcome(fmt.Sprintf("job-%07d", i), true, 2, t0.Add(time.Duration(i)*time.Millisecond),
		diag(fmt.Sprintf("/items/%d/price", i%4), "type", `"3"`),
		diag("/currency", "enum", `"eur"`),
		diag("/total", "type", `"120.50"`),
	)
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
