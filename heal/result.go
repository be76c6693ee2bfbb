package heal

import (
	"time"

	"github.com/llmpipeline/pipeline/job"
	"github.com/llmpipeline/pipeline/model"
	"github.com/llmpipeline/pipeline/schemas"
)

// Result is how a job's loop ended.
type Result struct {
	// Data is the validated JSON when job.Class is job.ClassNone.
	Data  []byte
	Class job.Class
	// Reason says in words why the loop stopped; Hint what to do about it.
	Reason string
	Hint   string
	// Attempts has one entry per model call that returned an answer.
	Attempts []Attempt
	// Err is the model error behind job.ClassTransport, job.ClassAuth,
	// job.ClassNotFound, job.ClassRequest.
	Err error
	// Model is the spec of the model of the last attempt: the one that
	// produced the final answer (Config.Model when no model answered).
	Model string
	// Grounding says where each x-grounded value of Data is in the input
	// (code point offsets), in document order; nil when the schema grounds
	// nothing.
	Grounding []schemas.Grounding
	// Skipped lists the models passed over because they were unavailable
	// (transport failure, breaker open, request error), each with why.
	Skipped []Skip
}

// Skip is a model of the chain passed over for a job.
type Skip struct {
	Model  string
	Reason string
}

// OK reports whether the job succeeded.
func (r Result) OK() bool { return r.Class == job.ClassNone }

// Attempt is the trace of one model call.
type Attempt struct {
	N int
	// Model is the spec of the model that answered (Config.Model or a
	// fallback's Name).
	Model       string
	Temperature float64
	Raw         string    // the model's output as received
	Stages      []string  // sanitizer stages applied
	Class       job.Class // job.ClassNone when the output validated
	// FinishReason is the provider's own word.
	FinishReason       string
	Diagnostics        []schemas.Diagnostic
	DiagnosticsOmitted int
	Usage              model.Usage
	Latency            time.Duration
	TransportRetries   int
}

// Usage is the token usage of every attempt of the job, failed ones
// included.
func (r Result) Usage() model.Usage {
	var u model.Usage
	for _, a := range r.Attempts {
		u = u.Add(a.Usage)
	}
	return u
}

// HealUsage is the usage of the attempts after the first: the tokens spent
// on healing.
func (r Result) HealUsage() model.Usage {
	var u model.Usage
	for _, a := range r.Attempts {
		if a.N > 1 {
			u = u.Add(a.Usage)
		}
	}
	return u
}

// TransportRetries is the number of transport retries spent across the
// job's attempts.
func (r Result) TransportRetries() int {
	n := 0
	for _, a := range r.Attempts {
		n += a.TransportRetries
	}
	return n
}
