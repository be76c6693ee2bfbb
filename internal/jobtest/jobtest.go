// Package jobtest builds the outcomes the tests of the codec and of the
// index write and read: realistic ones, with an attempt trace and the
// diagnostics of a failing invoice.
package jobtest

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/llmpipeline/pipeline/job"
)

// T0 is the tests' clock: the outcomes' times are taken from it.
var T0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// Outcome builds a realistic outcome: attempts model calls, each failing
// with the given diagnostics except the last one of a succeeded outcome.
func Outcome(id string, dead bool, attempts int, at time.Time, diags ...job.Diagnostic) job.Outcome {
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

// Diag is a diagnostic at path for keyword, having received received.
func Diag(path, keyword, received string) job.Diagnostic {
	return job.Diagnostic{Path: path, Keyword: keyword, Message: keyword + " failed at " + path, Expected: "something else", Received: received}
}

// Realistic is the benchmarks' i-th outcome: a dead letter of 2
// attempts, 3 diagnostics each.
func Realistic(i int) job.Outcome {
	return Outcome(fmt.Sprintf("job-%07d", i), true, 2, T0.Add(time.Duration(i)*time.Millisecond),
		Diag(fmt.Sprintf("/items/%d/price", i%4), "type", `"3"`),
		Diag("/currency", "enum", `"eur"`),
		Diag("/total", "type", `"120.50"`),
	)
}
