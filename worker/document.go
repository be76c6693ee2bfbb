package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"
	"unsafe"

	"github.com/llmpipeline/pipeline/chunk"
	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/queue"
	"github.com/llmpipeline/pipeline/job"
	"github.com/llmpipeline/pipeline/schemas"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/tidwall/gjson"
)

// maxFailedNamed bounds the failed chunks a partial document's reason names.
const maxFailedNamed = 5

// Documents merges long documents: it implements queue.Documents with the
// Handler's schemas, clock, metrics and redaction.
type Documents struct {
	h       *Handler
	mu      sync.Mutex
	mergers map[string]*chunk.Merger // by schema version
}

var _ queue.Documents = (*Documents)(nil)

// Documents is the merger of the documents whose chunks h handles.
func (h *Handler) Documents() *Documents {
	return &Documents{h: h, mergers: map[string]*chunk.Merger{}}
}

// Merge decides a document's outcome from its chunks' outcomes: a result
// with the merged data when every chunk succeeded and the merge passes the
// schema; a dead letter of class merge when it does not; of class partial,
// with the merge of the chunks that succeeded, when some chunk failed.
func (ds *Documents) Merge(ctx context.Context, end queue.DocumentEnd) queue.Outcome {
	h := ds.h
	out := job.Outcome{JobID: end.ID, Run: end.Run, FinishedAt: h.cfg.Now()}
	var parts []chunk.Part
	var failed []string
	var data []jsonData
	for _, c := range end.Chunks {
		// A chunk whose stored outcome is gone or cannot be read never
		// becomes readable by retrying: it is a failed chunk, and the
		// document ends as partial (replay runs it again).
		why := c.Gone
		var co chunkOutcome
		if why == "" {
			var err error
			if co, err = readChunkOutcome(c.Payload); err != nil {
				why = "its stored outcome cannot be read: " + err.Error()
			}
		}
		if why != "" {
			id := job.ChunkID(end.ID, c.K)
			failed = append(failed, fmt.Sprintf("%s (%s)", id, why))
			out.ChunkRuns = append(out.ChunkRuns, job.ChunkSummary{K: c.K, JobID: id, Run: c.Run, Status: job.StatusDeadLettered, Reason: why})
			continue
		}
		if out.Schema == "" {
			out.Schema = co.Schema
			if err := jsonv2.Unmarshal(c.Payload, &co.whole, job.DecodeOptions()); err == nil {
				out.Job = documentJob(co.whole)
			}
		}
		if out.StartedAt.IsZero() || co.StartedAt.Before(out.StartedAt) {
			out.StartedAt = co.StartedAt
		}
		s := job.ChunkSummary{K: c.K, JobID: co.JobID, Run: co.Run, Status: co.Status, Class: co.Class, Reason: co.Reason,
			Attempts: co.Attempts, CostUSD: co.CostUSD}
		if co.Chunk != nil {
			s.Start, s.End = co.Chunk.Start, co.Chunk.End
		}
		s.PromptTokens, s.CompletionTokens = co.PromptTokens, co.CompletionTokens
		out.Attempts += s.Attempts
		out.PromptTokens += s.PromptTokens
		out.CompletionTokens += s.CompletionTokens
		if co.CostUSD != nil {
			sum := *co.CostUSD
			if out.CostUSD != nil {
				sum += *out.CostUSD
			}
			out.CostUSD = &sum
		}
		if co.Model != "" {
			out.Model = co.Model
		}
		if c.Stream == broker.StreamResults && co.Status == job.StatusSucceeded {
			parts = append(parts, chunk.Part{Chunk: c.K, Data: co.Data})
			data = append(data, jsonData{k: len(out.ChunkRuns), data: co.Data})
		} else {
			failed = append(failed, fmt.Sprintf("%s (%s: %s)", co.JobID, co.Class, firstLine(co.Reason)))
		}
		out.ChunkRuns = append(out.ChunkRuns, s)
	}
	if out.Schema == "" {
		out.Schema = end.Schema // no chunk's outcome could be read
	}
	out.Chunks = &job.ChunkCount{Total: len(end.Chunks), Succeeded: len(parts)}
	failedReason := func() string {
		named := failed[:min(len(failed), maxFailedNamed)]
		reason := fmt.Sprintf("%d of %d chunks failed: %s", len(failed), len(end.Chunks), strings.Join(named, "; "))
		if len(failed) > len(named) {
			reason += fmt.Sprintf("; and %d more", len(failed)-len(named))
		}
		return reason
	}
	// Conditions that retrying never changes (the schema gone from the
	// workers, merge rules that do not compile) end the document as a
	// dead letter naming them, with every chunk's answer kept; a retry
	// would hand the last chunk back until max-deliver.
	cannot := func(cause string) queue.Outcome {
		out.Hint = "restore the schema the chunks ran with in the workers' schemas (or fix its x-merge-key); every chunk's answer is kept in chunk_runs"
		if len(failed) > 0 {
			return h.documentLetter(end, out, job.ClassPartial, failedReason()+"; and "+cause, data)
		}
		return h.documentLetter(end, out, job.ClassMerge, cause, data)
	}
	sc, ok := h.cfg.Schemas.Get(out.Schema)
	if !ok {
		return cannot(fmt.Sprintf("the chunks cannot be merged: schema %q is not among the workers' schemas", out.Schema))
	}
	out.SchemaVersion = sc.Version
	m, err := ds.merger(sc.Version, sc.Raw)
	if err != nil {
		return cannot("the chunks cannot be merged: the schema's merge rules: " + err.Error())
	}
	merged, conflicts, err := m.Merge(parts)
	if err != nil {
		return h.documentLetter(end, out, job.ClassMerge, err.Error(), data)
	}
	out.Data = merged
	out.Conflicts = conflicts
	if len(failed) > 0 {
		return h.documentLetter(end, out, job.ClassPartial, failedReason(), nil)
	}
	diags, omitted, err := sc.Validate(merged, 50)
	if err != nil || len(diags) > 0 {
		for _, d := range diags {
			out.MergeDiagnostics = append(out.MergeDiagnostics, job.Diagnostic{Path: d.Path, Keyword: d.Keyword, Message: d.Message, Expected: d.Expected, Received: d.Received})
		}
		reason := fmt.Sprintf("the merge of the %d chunks fails the schema: %d problems, first %s %s", len(end.Chunks), len(diags)+omitted, first(diags).Path, first(diags).Message)
		if err != nil {
			reason = "the merge of the chunks is not valid JSON for the schema: " + err.Error()
		}
		return h.documentLetter(end, out, job.ClassMerge, reason, data)
	}
	if reason, ok := checkTruth(end, sc, merged, &out); !ok {
		out.Hint = "the merged document fails the schema's x-rules or x-grounded (merge_diagnostics): a rule over fields that different chunks give holds only on the merge; check the chunks' answers (chunk_runs) and the rule, or split less (--chunk-chars)"
		return h.documentLetter(end, out, job.ClassMerge, reason, data)
	}
	out.Status = job.StatusSucceeded
	h.cfg.Metrics.outcome(out.Schema, out.Status, "")
	return h.redact(h.publish(&queue.Delivery{SchemaToken: out.Schema}, queue.ActionResult, out, ""))
}

// chunkOutcome is what a document's outcome needs of a chunk's: not its
// job (the chunk's text) nor its attempts' raw answers, which are most of
// its bytes and are skipped, not decoded.
type chunkOutcome struct {
	JobID     string          `json:"job_id"`
	Schema    string          `json:"schema"`
	Run       int             `json:"run"`
	Status    string          `json:"status"`
	Class     job.Class       `json:"class"`
	Reason    string          `json:"reason"`
	Model     string          `json:"model"`
	CostUSD   *float64        `json:"cost_usd"`
	Attempts  int             `json:"attempts"`
	Data      json.RawMessage `json:"data"`
	Chunk     *job.ChunkOf    `json:"chunk"`
	StartedAt time.Time       `json:"started_at"`
	// PromptTokens and CompletionTokens are the sums over its trace.
	PromptTokens     int `json:"-"`
	CompletionTokens int `json:"-"`

	whole job.Outcome // the first chunk's, decoded whole for the document's job
}

// readChunkOutcome reads what a document needs of a chunk's outcome in one
// pass over its members: gjson skips the others (the chunk's text, the
// attempts' raw answers) by their delimiters, without decoding them.
func readChunkOutcome(payload []byte) (chunkOutcome, error) {
	var co chunkOutcome
	if len(payload) == 0 || payload[0] != '{' {
		return co, errors.New("not a JSON object")
	}
	// The payload was stored by a worker (EncodeOutcome) and is not
	// changed while it is read: it is read in place, and what is kept of
	// it is copied.
	doc := unsafe.String(&payload[0], len(payload))
	var err error
	gjson.Parse(doc).ForEach(func(k, v gjson.Result) bool {
		switch k.Str {
		case "job_id":
			co.JobID = strings.Clone(v.String())
		case "schema":
			co.Schema = strings.Clone(v.String())
		case "run":
			co.Run = int(v.Int())
		case "status":
			co.Status = strings.Clone(v.String())
		case "class":
			co.Class = job.Class(strings.Clone(v.String()))
		case "reason":
			co.Reason = strings.Clone(v.String())
		case "model":
			co.Model = strings.Clone(v.String())
		case "cost_usd":
			if v.Type == gjson.Number {
				c := v.Float()
				co.CostUSD = &c
			}
		case "attempts":
			co.Attempts = int(v.Int())
		case "data":
			co.Data = json.RawMessage(v.Raw)
		case "started_at":
			co.StartedAt, err = time.Parse(time.RFC3339Nano, v.String())
		case "chunk":
			var c job.ChunkOf
			if err = jsonv2.Unmarshal([]byte(v.Raw), &c); err == nil {
				co.Chunk = &c
			}
		case "trace":
			v.ForEach(func(_, a gjson.Result) bool {
				a.ForEach(func(k, v gjson.Result) bool {
					switch k.Str {
					case "prompt_tokens":
						co.PromptTokens += int(v.Int())
					case "completion_tokens":
						co.CompletionTokens += int(v.Int())
					}
					return true
				})
				return true
			})
		}
		return err == nil
	})
	if err != nil {
		return co, err
	}
	if co.JobID == "" || co.Status == "" {
		return co, errors.New("no job id or status")
	}
	return co, nil
}

type jsonData struct {
	k    int
	data []byte
}

// documentLetter dead-letters a document; data (for class merge) keeps
// every chunk's answer in its summary.
func (h *Handler) documentLetter(end queue.DocumentEnd, out job.Outcome, class job.Class, reason string, data []jsonData) queue.Outcome {
	for _, d := range data {
		out.ChunkRuns[d.k].Data = d.data
	}
	out.Merged, out.Data = out.Data, nil
	out.Status = job.StatusDeadLettered
	out.Class = class
	out.Reason = reason
	switch {
	case out.Hint != "": // the caller's
	case class == job.ClassPartial:
		out.Hint = "fix what failed the chunks (their dead letters say why), then `pipeline dlq replay " + end.ID + "`: only the failed chunks run again"
	default:
		out.Hint = "the chunks' answers merge into data the schema refuses: loosen the schema (a maximum count over the whole document, an x-merge-key), or split less (--chunk-chars)"
	}
	h.cfg.Metrics.outcome(metricSchema(out.Schema, h.cfg.Schemas), out.Status, class)
	return h.redact(h.publish(&queue.Delivery{SchemaToken: out.Schema}, queue.ActionDeadLetter, out, string(class)+": "+reason))
}

func (ds *Documents) merger(version string, raw []byte) (*chunk.Merger, error) {
	ds.mu.Lock()
	defer ds.mu.Unlock()
	if m, ok := ds.mergers[version]; ok {
		return m, nil
	}
	m, err := chunk.NewMerger(raw)
	if err != nil {
		return nil, err
	}
	ds.mergers[version] = m
	return m, nil
}

// documentJob is the document's job as its outcome records it: the
// chunk's, without the input (the chunks hold it) and with the document's
// id and instructions.
func documentJob(co job.Outcome) []byte {
	c := co.Chunk
	if c == nil {
		return nil
	}
	j, err := job.Parse(co.Job)
	if err != nil {
		return nil
	}
	doc := struct {
		ID           string          `json:"id"`
		Schema       string          `json:"schema"`
		Instructions string          `json:"instructions,omitempty"`
		Metadata     json.RawMessage `json:"metadata,omitempty"`
		Chars        int             `json:"chars"`
		Chunking     *job.Chunking   `json:"chunking,omitempty"`
	}{ID: c.Document, Schema: j.Schema, Instructions: c.Instructions, Metadata: j.Metadata, Chars: c.Chars, Chunking: j.Chunking}
	b, err := jsonv2.Marshal(doc)
	if err != nil {
		return nil
	}
	return b
}

// firstLine is the first line of s.
func firstLine(s string) string {
	line, _, _ := strings.Cut(s, "\n")
	return line
}

// first is the first of ds (a zero Diagnostic when none).
func first(ds []schemas.Diagnostic) schemas.Diagnostic {
	if len(ds) == 0 {
		return schemas.Diagnostic{}
	}
	return ds[0]
}
