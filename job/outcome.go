package job

import (
	"encoding/json"
	"time"
)

// Outcome statuses.
const (
	StatusSucceeded    = "succeeded"
	StatusDeadLettered = "dead_lettered"
)

// Outcome is how one job ended: the message the workers publish on RESULTS
// (status succeeded) or DLQ (status dead_lettered), and the row the sink
// indexes. It holds what makes a failure reproducible: the original job,
// every raw model output, the diagnostics per attempt, the attempts used.
// Optional numbers are omitzero (left out when 0 by encoding/json and
// json v2 alike, where json v2 would keep a 0 marked omitempty).
type Outcome struct {
	JobID  string `json:"job_id"`
	Schema string `json:"schema"`
	// SchemaVersion is the hash of the canonical schema text.
	SchemaVersion string `json:"schema_version,omitempty"`
	// Run is 0 for the job as submitted and n for its n-th replay.
	Run    int    `json:"run,omitzero"`
	Status string `json:"status"`
	// Class is the failure class of a dead letter (grammar, schema,
	// truncated, refused, no_progress, transport, request_error,
	// invalid_job, unknown_schema, exhausted); empty on success.
	Class  Class  `json:"class,omitempty"`
	Reason string `json:"reason,omitempty"`
	Hint   string `json:"hint,omitempty"`
	// Model is the spec of the model of the last attempt, the one that
	// produced the final answer (each attempt records its own).
	Model string `json:"model,omitempty"`
	// CostUSD is the cost of every attempt whose model's price is known,
	// in US dollars; nil when none was.
	CostUSD *float64 `json:"cost_usd,omitempty"`
	// Attempts is the number of model calls made (transport retries aside).
	Attempts int `json:"attempts"`
	// Data is the validated result; only on success.
	Data json.RawMessage `json:"data,omitzero"`
	// Grounding says where each x-grounded value of Data was found in the
	// job's input, in document order; only on success, and only when the
	// schema grounds values.
	Grounding []Grounding `json:"grounding,omitempty"`
	// Job is the job as it arrived (the raw message for an invalid job).
	Job json.RawMessage `json:"job,omitzero"`
	// Files names each file of the job (name, media type, bytes, sha256),
	// never its bytes: those stay in the object store, by digest.
	Files []File `json:"files,omitempty"`
	// Trace has one entry per model call, successes included.
	Trace      []Attempt `json:"trace,omitempty"`
	Deliveries int       `json:"deliveries,omitzero"`
	StartedAt  time.Time `json:"started_at"`
	FinishedAt time.Time `json:"finished_at"`

	// Chunk is set on a chunk job's outcome: which part of which long
	// document it is (document.go).
	Chunk *ChunkOf `json:"chunk,omitempty"`
	// Chunks, ChunkRuns, Conflicts, the token sums and MergeDiagnostics are
	// set on a long document's outcome (document.go).
	Chunks           *ChunkCount    `json:"chunks,omitempty"`
	ChunkRuns        []ChunkSummary `json:"chunk_runs,omitempty"`
	Conflicts        []Conflict     `json:"conflicts,omitempty"`
	PromptTokens     int            `json:"prompt_tokens,omitzero"`
	CompletionTokens int            `json:"completion_tokens,omitzero"`
	MergeDiagnostics []Diagnostic   `json:"merge_diagnostics,omitempty"`
	// Merged is a long document's dead letter's merge: of the chunks that
	// succeeded (class partial), or of all of them, which the schema
	// refused (class merge). Data stays for validated results only.
	Merged json.RawMessage `json:"merged,omitzero"`

	// Encoded, when set, is this outcome's message as EncodeOutcome wrote
	// it (a worker hands it to the sink of its process with the Outcome):
	// the index cuts the payload from it instead of encoding the outcome
	// again. It is never encoded itself.
	Encoded []byte `json:"-"`
}

// Grounding is where one x-grounded value of a result is in the job's
// input: Start and End are offsets in Unicode code points, so input[start:end]
// in Python is the value (exactly, or after normalisation: Match is "exact"
// or "normalized"). For a chunk job, the offsets are in the chunk's input.
type Grounding struct {
	Path  string `json:"path"`
	Start int    `json:"start"`
	End   int    `json:"end"`
	Match string `json:"match"`
}

// Attempt is the trace of one model call.
type Attempt struct {
	N int `json:"n"`
	// Model is the spec of the model that answered this call.
	Model        string       `json:"model,omitempty"`
	Temperature  float64      `json:"temperature"`
	Raw          string       `json:"raw"`
	Repairs      []string     `json:"repairs,omitempty"`
	Class        Class        `json:"class,omitempty"` // ClassNone when this attempt's output was valid
	FinishReason string       `json:"finish_reason,omitempty"`
	Diagnostics  []Diagnostic `json:"diagnostics,omitempty"`
	// DiagnosticsOmitted counts diagnostics past the cap.
	DiagnosticsOmitted int   `json:"diagnostics_omitted,omitzero"`
	PromptTokens       int   `json:"prompt_tokens,omitzero"`
	CompletionTokens   int   `json:"completion_tokens,omitzero"`
	CachedTokens       int   `json:"cached_tokens,omitzero"`
	ReasoningTokens    int   `json:"reasoning_tokens,omitzero"`
	LatencyMS          int64 `json:"latency_ms"`
	TransportRetries   int   `json:"transport_retries,omitzero"`

	// CacheWriteTokens are the prompt tokens written to the provider's
	// prompt cache (Anthropic cache_creation_input_tokens), part of
	// PromptTokens as CachedTokens (the cache reads) are.
	CacheWriteTokens int `json:"cache_write_tokens,omitzero"`
	// CostUSD is what the call cost by its reported usage and its model's
	// price, in US dollars; nil when the price is unknown (0 for the
	// simulator).
	CostUSD *float64 `json:"cost_usd,omitempty"`
	// Batch is true when the call went through the provider's batch API
	// (batch mode): it is priced with the model's batch discount.
	Batch bool `json:"batch,omitzero"`
}

// BatchCost counts the attempts of a trace that went through a provider
// batch and sums their known costs.
func BatchCost(trace []Attempt) (n int, cost float64) {
	for k := range trace {
		if !trace[k].Batch {
			continue
		}
		n++
		if c := trace[k].CostUSD; c != nil {
			cost += *c
		}
	}
	return n, cost
}

// Cost sums the known costs of a trace: of every attempt, and of attempts
// 2..n (healing). priced is false when no attempt's price was known.
func Cost(trace []Attempt) (total, heal float64, priced bool) {
	for k := range trace {
		c := trace[k].CostUSD
		if c == nil {
			continue
		}
		priced = true
		total += *c
		if k > 0 {
			heal += *c
		}
	}
	return total, heal, priced
}

// Diagnostic is one validation failure of an attempt as the outcome records
// it (see schemas.Diagnostic; this package keeps its own copy of the shape
// so that it depends on nothing else).
type Diagnostic struct {
	Path     string `json:"path"`
	Keyword  string `json:"keyword"`
	Message  string `json:"message,omitempty"`
	Expected string `json:"expected,omitempty"`
	Received string `json:"received,omitempty"`
}
