package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/llmpipeline/pipeline/heal"
	"github.com/llmpipeline/pipeline/internal/ledger"
	"github.com/llmpipeline/pipeline/internal/payload"
	"github.com/llmpipeline/pipeline/internal/queue"
	"github.com/llmpipeline/pipeline/internal/secret"
	"github.com/llmpipeline/pipeline/job"
	"github.com/llmpipeline/pipeline/model"
	"github.com/llmpipeline/pipeline/schemas"
)

// Config configures a Handler.
type Config struct {
	// Schemas resolves a job's schema id.
	Schemas *schemas.Registry
	// Loop runs the heal loop for one job.
	Loop *heal.Loop
	// Model is the model spec recorded with every outcome ("openai:gpt-4o-mini").
	Model string
	// RetryDelay is the base delay before a job whose model call failed in
	// transport is delivered again (default 5s; jittered by the runtime).
	RetryDelay time.Duration
	// Metrics, if set, is updated for every job.
	Metrics *Metrics
	Logger  *slog.Logger
	// Now is the clock (default time.Now).
	Now func() time.Time
	// Cost prices one attempt of a model spec from its usage (false: the
	// model is priced nowhere); nil prices nothing. The attempt's cost is
	// stored in the trace, their sum on the outcome.
	Cost func(model string, u model.Usage) (float64, bool)
	// BatchCost prices an attempt answered through a provider batch (see
	// WithBatched); nil prices those with Cost.
	BatchCost func(model string, u model.Usage) (float64, bool)
	// Budget, if set, is checked before a job starts: once it is reached a
	// job fetched ahead is handed back to the stream (not started, not
	// paid for) for the next run. Serve's gate stops the fetching.
	Budget *Budget
	// Secrets, if set, are replaced by [REDACTED] in every outcome before
	// it is stored: a model or a provider may echo a key or a credential
	// into an answer, a reason or a transcript.
	Secrets *secret.Redactor
	// Files reads the jobs' files (images, PDFs) from the object store;
	// nil when the handler has none (a job with files is then handed back).
	Files FileStore
}

// FileStore is where the jobs' files are: payload.Store.
type FileStore interface {
	StatFile(ctx context.Context, digest string) (payload.FileInfo, bool, error)
	OpenFile(ctx context.Context, digest string) (io.ReadCloser, error)
}

// Handler turns one job delivery into an outcome: it resolves the schema,
// runs the heal loop and decides what the runtime does with the message.
// It implements queue.Handler.
type Handler struct {
	cfg Config
}

var _ queue.Handler = (*Handler)(nil)

// New returns a Handler.
func New(cfg Config) (*Handler, error) {
	if cfg.Schemas == nil {
		return nil, errors.New("worker: Config.Schemas is required")
	}
	if cfg.Loop == nil {
		return nil, errors.New("worker: Config.Loop is required")
	}
	if cfg.RetryDelay <= 0 {
		cfg.RetryDelay = 5 * time.Second
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	return &Handler{cfg: cfg}, nil
}

// Handle implements queue.Handler.
func (h *Handler) Handle(ctx context.Context, d *queue.Delivery) queue.Outcome {
	return h.redact(h.handle(ctx, d))
}

// redact replaces the secrets in an outcome's message. The decoded record
// handed to the sink of this process is dropped when anything was
// replaced, so the sink indexes the redacted message instead.
func (h *Handler) redact(out queue.Outcome) queue.Outcome {
	if h.cfg.Secrets.Contains(out.Payload) {
		out.Payload, out.Record = h.cfg.Secrets.Bytes(out.Payload), nil
	}
	return out
}

func (h *Handler) handle(ctx context.Context, d *queue.Delivery) queue.Outcome {
	if m := h.cfg.Metrics; m != nil {
		m.InFlight.Inc()
		defer m.InFlight.Dec()
	}
	start := h.cfg.Now()
	out := job.Outcome{
		JobID:      d.Job.ID,
		Schema:     d.Job.Schema,
		Run:        ledger.RunOf(d.MsgID, d.Job.ID),
		Model:      h.cfg.Model,
		Job:        withoutFileBytes(jobJSON(d)),
		Files:      job.Records(d.Job.Files),
		Deliveries: d.NumDelivered,
		StartedAt:  start,
		Chunk:      d.Job.Chunk,
	}
	if out.JobID == "" || d.JobErr != nil {
		// An invalid job is keyed on its message id, the id its dead letter
		// is stored under on DLQ: its own "id" may be missing, or not an id
		// at all ("bad id with spaces"), and would not match the stream.
		out.JobID = d.MsgID
		out.Run = 0
	}
	if out.Schema == "" || d.JobErr != nil {
		out.Schema = d.SchemaToken
	}

	switch {
	case d.JobErr != nil:
		return h.deadLetter(d, out, job.ClassInvalidJob, d.JobErr.Error(),
			"fix the job and submit it again; `pipeline submit` checks every line before publishing")
	case d.Orphan:
		return h.deadLetter(d, out, job.ClassAbandoned,
			fmt.Sprintf("delivery limit reached: no worker finished the job in %d deliveries (a worker crashed or hung)", d.NumDelivered),
			"look for crashes or hangs in the worker logs, then `pipeline dlq replay`")
	}
	if d.Job.Schema != d.SchemaToken && d.SchemaToken != "" {
		return h.deadLetter(d, out, job.ClassInvalidJob,
			fmt.Sprintf("job schema %q does not match its subject's schema %q", d.Job.Schema, d.SchemaToken),
			"publish jobs on pipeline.jobs.<schema> of their own schema (the schema id escaped by broker.SchemaToken)")
	}
	sc, ok := h.cfg.Schemas.Get(d.Job.Schema)
	if ce, broken := h.cfg.Schemas.BrokenSchema(d.Job.Schema); !ok && broken {
		// The schema's file is there but did not load (pipeline run
		// --skip-broken-schemas): the dead letter says why.
		return h.deadLetter(d, out, job.ClassUnknownSchema,
			fmt.Sprintf("schema %q did not load: %v", d.Job.Schema, ce),
			"fix the schema file (pipeline schemas lint names the problem), restart the workers, then `pipeline dlq replay`")
	}
	if !ok {
		return h.deadLetter(d, out, job.ClassUnknownSchema,
			fmt.Sprintf("unknown schema %q", d.Job.Schema),
			"add the schema to the --schemas directory of the workers, then `pipeline dlq replay`")
	}
	out.SchemaVersion = sc.Version
	if h.cfg.Budget.Reached() {
		return queue.Outcome{Action: queue.ActionRetry, Delay: budgetHandBack, Reason: "budget reached: not started"}
	}

	files, missing, err := h.files(ctx, d.Job)
	switch {
	case err != nil:
		return queue.Outcome{Action: queue.ActionRetry, Delay: h.cfg.RetryDelay, Reason: "reading the job's files: " + err.Error()}
	case missing != "":
		return h.deadLetter(d, out, job.ClassInvalidJob, missing,
			"submit the job again with its file: `pipeline submit` stores every file it names")
	}
	res := h.cfg.Loop.Run(ctx, heal.Task{
		JobID:        d.Job.ID,
		Schema:       sc,
		Input:        d.Job.Input,
		Instructions: d.Job.Instructions,
		Files:        files,
		Part:         d.Job.Chunk != nil,
	})
	out.Attempts = len(res.Attempts)
	out.Trace = h.trace(res.Attempts, batchedOf(ctx))
	if total, _, priced := job.Cost(out.Trace); priced {
		out.CostUSD = &total
	}
	if res.Model != "" {
		out.Model = res.Model // the model of the final answer
	}
	h.cfg.Metrics.observe(d.Job.Schema, res)

	switch res.Class {
	case job.ClassNone:
		out.Status = job.StatusSucceeded
		out.Data = res.Data
		out.Grounding = grounding(res.Grounding)
		out.FinishedAt = h.cfg.Now()
		h.cfg.Metrics.outcome(d.Job.Schema, out.Status, "")
		return h.publish(d, queue.ActionResult, out, "")
	case job.ClassAuth:
		return queue.Outcome{Action: queue.ActionStop, Delay: h.cfg.RetryDelay, Err: res.Err,
			Reason: "model rejected the credentials"}
	case job.ClassNotFound:
		return queue.Outcome{Action: queue.ActionStop, Delay: h.cfg.RetryDelay, Err: res.Err,
			Reason: "the provider has no such endpoint or model"}
	case job.ClassNoCredit:
		return queue.Outcome{Action: queue.ActionStop, Delay: h.cfg.RetryDelay, Err: res.Err,
			Reason: "the provider account has no credit"}
	case job.ClassTransport:
		if ctx.Err() != nil {
			// Shutting down: not the job's fault, not a delivery's worth.
			return queue.Outcome{Action: queue.ActionRetry, Delay: h.cfg.RetryDelay, Reason: "worker stopping"}
		}
		if !d.Last() {
			return queue.Outcome{Action: queue.ActionRetry, Delay: h.backoff(d.NumDelivered),
				Reason: "model unavailable: " + errString(res.Err)}
		}
	}
	return h.deadLetter(d, out, res.Class, reason(res), res.Hint)
}

func (h *Handler) deadLetter(d *queue.Delivery, out job.Outcome, class job.Class, reason, hint string) queue.Outcome {
	out.Status = job.StatusDeadLettered
	out.Class = class
	out.Reason = reason
	out.Hint = hint
	out.FinishedAt = h.cfg.Now()
	h.cfg.Metrics.outcome(metricSchema(out.Schema, h.cfg.Schemas), out.Status, class)
	h.cfg.Logger.Debug("dead letter", "job", out.JobID, "schema", out.Schema, "class", class, "reason", reason)
	return h.publish(d, queue.ActionDeadLetter, out, string(class)+": "+reason)
}

// backoff is the delay before the next delivery after a transport failure:
// exponential in the delivery count, capped at a minute.
func (h *Handler) backoff(delivered int) time.Duration {
	d := h.cfg.RetryDelay << min(max(delivered-1, 0), 4)
	d = min(d, time.Minute)
	return d/2 + rand.N(d/2+1)
}

func reason(res heal.Result) string {
	if res.Reason != "" {
		return res.Reason
	}
	return errString(res.Err)
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// jobJSON keeps the job as JSON when it is JSON, and as a JSON string of the
// raw bytes when it is not, so a dead letter always holds what arrived. A
// job that ParseJob decoded is JSON: it is not scanned again.
func jobJSON(d *queue.Delivery) json.RawMessage {
	if d.JobErr == nil || json.Valid(d.Data) {
		return json.RawMessage(d.Data)
	}
	b, _ := json.Marshal(string(d.Data)) // a string always marshals
	return b
}

// budgetHandBack is the delay before a job handed back unstarted because
// the budget is reached is delivered again: short, since the next run
// should find it at once.
const budgetHandBack = time.Second

// trace turns the loop's attempts into the stored trace, each with its
// model and its cost.
func (h *Handler) trace(as []heal.Attempt, batched func(int) bool) []job.Attempt {
	out := trace(as)
	for i := range out {
		if out[i].Model == "" {
			out[i].Model = h.cfg.Model
		}
		if batched != nil && batched(as[i].N) {
			out[i].Batch = true
			if h.cfg.BatchCost != nil {
				if c, ok := h.cfg.BatchCost(out[i].Model, as[i].Usage); ok {
					out[i].CostUSD = &c
				}
				continue
			}
		}
		if h.cfg.Cost != nil {
			if c, ok := h.cfg.Cost(out[i].Model, as[i].Usage); ok {
				out[i].CostUSD = &c
			}
		}
	}
	return out
}

func trace(as []heal.Attempt) []job.Attempt {
	out := make([]job.Attempt, len(as))
	for i, a := range as {
		ds := make([]job.Diagnostic, len(a.Diagnostics))
		for j, d := range a.Diagnostics {
			ds[j] = job.Diagnostic{Path: d.Path, Keyword: d.Keyword, Message: d.Message, Expected: d.Expected, Received: d.Received}
		}
		out[i] = job.Attempt{
			N:                  a.N,
			Model:              a.Model,
			Temperature:        a.Temperature,
			Raw:                a.Raw,
			Repairs:            a.Stages,
			Class:              a.Class,
			FinishReason:       a.FinishReason,
			Diagnostics:        ds,
			DiagnosticsOmitted: a.DiagnosticsOmitted,
			PromptTokens:       a.Usage.PromptTokens,
			CompletionTokens:   a.Usage.CompletionTokens,
			CachedTokens:       a.Usage.CachedTokens,
			CacheWriteTokens:   a.Usage.CacheWriteTokens,
			ReasoningTokens:    a.Usage.ReasoningTokens,
			LatencyMS:          a.Latency.Milliseconds(),
			TransportRetries:   a.TransportRetries,
		}
	}
	return out
}

// grounding is the loop's grounding as the outcome records it.
func grounding(gs []schemas.Grounding) []job.Grounding {
	if len(gs) == 0 {
		return nil
	}
	out := make([]job.Grounding, len(gs))
	for i, g := range gs {
		out[i] = job.Grounding{Path: g.Path, Start: g.Start, End: g.End, Match: g.Match}
	}
	return out
}
