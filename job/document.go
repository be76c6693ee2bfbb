package job

import "encoding/json"

// ChunkCount is how many chunks a long document had, and how many of them
// ended as a result.
type ChunkCount struct {
	Total     int `json:"total"`
	Succeeded int `json:"succeeded"`
}

// ChunkSummary is how one chunk of a long document ended, as its
// document's outcome records it.
type ChunkSummary struct {
	K      int    `json:"k"`
	JobID  string `json:"job_id"`
	Run    int    `json:"run,omitzero"`
	Start  int    `json:"start"`
	End    int    `json:"end"`
	Status string `json:"status"`
	Class  Class  `json:"class,omitempty"`
	Reason string `json:"reason,omitempty"`
	// Attempts, the token counts and CostUSD are the chunk's own.
	Attempts         int      `json:"attempts"`
	PromptTokens     int      `json:"prompt_tokens,omitzero"`
	CompletionTokens int      `json:"completion_tokens,omitzero"`
	CostUSD          *float64 `json:"cost_usd,omitempty"`
	// Data is the chunk's answer, kept on a document whose merge failed
	// the schema (class merge) so that the cause can be found.
	Data json.RawMessage `json:"data,omitzero"`
}

// Conflict is a field of a long document where a later chunk answered
// another non-null value than the one kept (the first's): Values lists the
// kept one first.
type Conflict struct {
	Path   string          `json:"path"`
	Values []ConflictValue `json:"values"`
}

// ConflictValue is one chunk's value in a Conflict.
type ConflictValue struct {
	Chunk int             `json:"chunk"`
	Value json.RawMessage `json:"value"`
}
