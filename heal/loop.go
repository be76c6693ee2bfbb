package heal

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/llmpipeline/pipeline/job"
	"github.com/llmpipeline/pipeline/model"
	"github.com/llmpipeline/pipeline/sanitize"
	"github.com/llmpipeline/pipeline/schemas"
)

// Loop runs jobs through a model: attempt, sanitize, validate, heal. It is
// safe for concurrent use; each Run is independent.
type Loop struct {
	model model.Model
	cfg   Config
	// systems caches the system turn per schema (*schemas.Schema ->
	// string): it is the same for every job of a schema, and building it
	// copied the whole schema text per job.
	systems sync.Map
}

// New returns a Loop calling m. It refuses a nil model and a config with a
// negative number or an unknown history, naming the field.
func New(m model.Model, cfg Config) (*Loop, error) {
	if m == nil {
		return nil, errors.New("creating heal loop: model is nil")
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return &Loop{model: m, cfg: cfg.withDefaults()}, nil
}

// Config returns the effective configuration, defaults applied.
func (l *Loop) Config() Config { return l.cfg }

// stage is one model of the chain with its attempts.
type stage struct {
	name     string
	model    model.Model
	attempts int
}

// stages is the chain: the primary, then the fallbacks.
func (l *Loop) stages() []stage {
	out := make([]stage, 0, 1+len(l.cfg.Fallbacks))
	out = append(out, stage{name: l.cfg.Model, model: l.model, attempts: l.cfg.MaxAttempts})
	for _, f := range l.cfg.Fallbacks {
		out = append(out, stage{name: f.Name, model: f.Model, attempts: f.Attempts})
	}
	return out
}

// Run takes one job to its end: validated data, or a failure class with the
// trace of every attempt. The Task and its messages are never modified.
// On ctx cancellation Run returns promptly with job.ClassTransport and ctx's
// error in Err (the job is not at fault; the caller naks it).
//
// With fallbacks, a model whose attempts end in a healable failure, or
// that is unavailable, hands the job to the next model of the chain, which
// continues the same conversation at its own first temperature. Attempt
// numbers run on across the chain; each attempt records its model.
func (l *Loop) Run(ctx context.Context, t Task) Result {
	res := Result{Model: l.cfg.Model}
	if t.Schema == nil {
		res.Class = job.ClassRequest
		res.Err = errors.New("running heal loop: task has no schema")
		res.Reason = res.Err.Error()
		return res
	}
	base := taskMessages(t, l.system(t.Schema))
	in := truthOf(t)
	var turns []failedTurn
	chain := l.stages()
	n := 0 // attempts answered so far, across the chain
	for si, st := range chain {
		lastStage := si == len(chain)-1
		first := len(res.Attempts) // this stage's first attempt in res.Attempts
		for k := 1; k <= st.attempts; k++ {
			if err := ctx.Err(); err != nil {
				return l.cancelled(res, n+1, err)
			}
			temp := l.cfg.TemperatureFor(k)
			req := model.Request{
				Messages:    conversation(base, turns, l.cfg.History),
				Temperature: temp,
				MaxTokens:   l.cfg.MaxTokens,
				Schema:      t.Schema.Raw,
				SchemaID:    t.Schema.ID,
				JobID:       t.JobID,
				Attempt:     n + 1,
			}
			start := time.Now()
			resp, err := st.model.Complete(ctx, req)
			if err != nil {
				if ctxErr := ctx.Err(); ctxErr != nil {
					return l.cancelled(res, n+1, ctxErr)
				}
				if !lastStage && unavailable(err) {
					res.Skipped = append(res.Skipped, Skip{Model: st.name, Reason: err.Error()})
					l.cfg.Logger.LogAttrs(ctx, slog.LevelDebug, "model unavailable: the job goes to the next model",
						slog.String("job", t.JobID), slog.String("model", st.name), slog.String("err", err.Error()))
					break
				}
				return l.modelFailed(res, n+1, err)
			}
			resp = filtered(resp)
			n++
			a := Attempt{
				N:                n,
				Model:            st.name,
				Temperature:      temp,
				Raw:              resp.Content,
				FinishReason:     resp.RawFinishReason,
				Usage:            resp.Usage,
				Latency:          resp.Latency,
				TransportRetries: resp.TransportRetries,
			}
			if a.FinishReason == "" {
				a.FinishReason = resp.FinishReason
			}
			if resp.Temperature != nil {
				a.Temperature = *resp.Temperature
			}
			if a.Latency == 0 {
				a.Latency = time.Since(start)
			}
			data, grounding, feedback := l.judge(t.Schema, in, resp, &a)
			res.Attempts = append(res.Attempts, a)
			res.Model = st.name
			l.log(ctx, t, a)

			switch a.Class {
			case job.ClassNone:
				res.Class = job.ClassNone
				res.Data = data
				res.Grounding = grounding
				return res
			case job.ClassRefused:
				res.Class = job.ClassRefused
				res.Reason = fmt.Sprintf("attempt %d: the model refused: %s", n, clip(resp.Refusal, maxRefusalReason))
				res.Hint = "the model declined this input; a refusal is never healed or retried (the same input is refused again): " +
					"read the input and instructions (pipeline dlq show), then replay the job with another --model or fix the input"
				return res
			case job.ClassTruncated:
				res.Class = job.ClassTruncated
				res.Reason = fmt.Sprintf("attempt %d: output truncated (%s)", n, truncCause(resp))
				res.Hint = "raise --max-tokens"
				if l.cfg.MaxTokens > 0 {
					res.Hint += fmt.Sprintf(" (now %d)", l.cfg.MaxTokens)
				}
				res.Hint += " or split the schema into smaller ones; a truncated output is never retried as is"
				return res
			}
			turns = append(turns, failedTurn{raw: a.Raw, feedback: feedback, toolCallID: resp.ToolCallID})
			if len(res.Attempts)-first > 1 {
				prev := res.Attempts[len(res.Attempts)-2]
				if why, stuck := noProgress(prev, a); stuck {
					res.Class = job.ClassNoProgress
					res.Reason = fmt.Sprintf("attempt %d %s as attempt %d; still failing: %s", n, why, n-1, failing(a))
					res.Hint = "the model does not fix these fields from the feedback: check the schema (pipeline schemas lint) " +
						"and the failure report (pipeline report)"
					if lastStage {
						return res
					}
					break // the next model takes the conversation on
				}
			}
		}
	}
	if len(res.Attempts) == 0 {
		// Every model was skipped; cannot happen, the last one's error ends
		// the run above.
		return l.modelFailed(res, 1, errors.New("no model of the chain answered"))
	}
	last := res.Attempts[len(res.Attempts)-1]
	res.Class = job.ClassExhausted
	res.Reason = fmt.Sprintf("%s used; still failing: %s", attemptsUsed(res.Attempts), failing(last))
	res.Hint = "raise --max-attempts, or look at these fields in the failure report (pipeline report)"
	if len(chain) > 1 {
		res.Hint = "raise --max-attempts or --fallback-attempts, or look at these fields in the failure report (pipeline report)"
	}
	return res
}

// unavailable reports whether a model error hands the job to the next
// model of the chain: the model could not be reached (transport, its
// breaker open), refused the request as such (request_error: the context
// window exceeded) or does not exist there (not_found: a model name or
// URL the provider does not know). Credentials refused (auth) and an
// account without credit (no_credit) stop the worker instead.
func unavailable(err error) bool {
	switch model.KindOf(err) {
	case model.KindTransport, model.KindRequest, model.KindNotFound:
		return true
	}
	return false
}

// tooLong reports whether a request error says the prompt is longer than
// the model's context window, in the words of OpenAI and vLLM ("maximum
// context length"), Anthropic ("prompt is too long"), llama.cpp
// ("context size"), Gemini ("exceeds the maximum number of tokens").
func tooLong(err error) bool {
	msg := strings.ToLower(err.Error())
	for _, s := range []string{"context_length_exceeded", "maximum context length", "context window", "context size",
		"prompt is too long", "input is too long", "exceeds the maximum number of tokens"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// attemptsUsed says how many attempts were made, by model when more than
// one model answered: "3 attempts (2 openai:a, 1 openai:b)".
func attemptsUsed(as []Attempt) string {
	s := fmt.Sprintf("%d attempts", len(as))
	if len(as) == 1 {
		s = "1 attempt"
	}
	var models []string
	count := map[string]int{}
	for _, a := range as {
		if count[a.Model] == 0 {
			models = append(models, a.Model)
		}
		count[a.Model]++
	}
	if len(models) < 2 {
		return s
	}
	parts := make([]string, len(models))
	for i, m := range models {
		parts[i] = fmt.Sprintf("%d %s", count[m], m)
	}
	return s + " (" + strings.Join(parts, ", ") + ")"
}

// judge classifies one answer, filling a's class, stages and diagnostics.
// It returns the validated JSON on success (and where its x-grounded
// values are in the input), the heal feedback for a healable failure.
// The schema's truth checks (x-grounded against in, x-rules) run once the
// JSON Schema is satisfied; their diagnostics are schema failures like any
// other.
func (l *Loop) judge(s *schemas.Schema, in truthCheck, resp model.Response, a *Attempt) (data []byte, grounding []schemas.Grounding, feedback string) {
	if resp.Refusal != "" {
		// A refusal is no answer to sanitize or validate. The trace keeps
		// its text as the raw output when the model gave nothing else.
		a.Class = job.ClassRefused
		if a.Raw == "" {
			a.Raw = resp.Refusal
		}
		return nil, nil, ""
	}
	if isTruncation(resp) {
		a.Class = job.ClassTruncated
		return nil, nil, ""
	}
	// One copy of the answer, owned by this call: the data returned on
	// success is a sub-slice of it.
	raw := []byte(resp.Content)
	if doc := trimSpace(raw); len(doc) > 0 && (doc[0] == '{' || doc[0] == '[') {
		// Most answers are already one JSON object. Validate says so (its
		// error is only ever "not JSON"), and for such an answer
		// sanitize.Clean would return these same trimmed bytes with no
		// stage, so its own scan of the answer is skipped.
		if diags, omitted, err := s.Validate(doc, l.cfg.MaxDiagnostics); err == nil {
			return l.validated(s, in, doc, diags, omitted, a)
		}
	}
	clean, err := sanitize.Clean(raw)
	a.Stages = slices.Clone(clean.Stages)
	switch {
	case errors.Is(err, sanitize.ErrTruncated):
		a.Class = job.ClassTruncated
		return nil, nil, ""
	case err != nil:
		a.Class = job.ClassGrammar
		return nil, nil, grammarFeedback(err.Error())
	}
	diags, omitted, err := s.Validate(clean.JSON, l.cfg.MaxDiagnostics)
	if err != nil {
		a.Class = job.ClassGrammar
		return nil, nil, grammarFeedback(err.Error())
	}
	return l.validated(s, in, clean.JSON, diags, omitted, a)
}

// validated classifies JSON that parsed by its diagnostics, then, when
// the JSON Schema is satisfied, by the schema's truth checks.
func (l *Loop) validated(s *schemas.Schema, in truthCheck, doc []byte, diags []schemas.Diagnostic, omitted int, a *Attempt) (data []byte, grounding []schemas.Grounding, feedback string) {
	if len(diags) == 0 && s.HasChecks() {
		var err error
		diags, omitted, grounding, err = in.check(s, doc, l.cfg.MaxDiagnostics)
		if err != nil {
			a.Class = job.ClassGrammar
			return nil, nil, grammarFeedback(err.Error())
		}
	}
	if len(diags) == 0 {
		a.Class = job.ClassNone
		return doc, grounding, ""
	}
	a.Class = job.ClassSchema
	a.Diagnostics = diags
	a.DiagnosticsOmitted = omitted
	return nil, nil, schemaFeedback(schemas.Lines(diags, omitted))
}

// maxRefusalReason bounds the refusal text quoted in a Result's Reason (the
// trace keeps it whole).
const maxRefusalReason = 1000

// clip cuts s to at most n bytes, on a rune boundary, marking the cut.
func clip(s string, n int) string {
	s = strings.TrimSpace(s)
	if len(s) <= n {
		return s
	}
	for n > 0 && !utf8.RuneStart(s[n]) {
		n--
	}
	return s[:n] + "..."
}

// trimSpace trims JSON whitespace, as sanitize.Clean does before it
// returns an answer that is already JSON.
func trimSpace(b []byte) []byte {
	i, j := 0, len(b)
	for i < j && isSpace(b[i]) {
		i++
	}
	for j > i && isSpace(b[j-1]) {
		j--
	}
	return b[i:j]
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// filtered turns an answer the provider's content filter stopped (finish
// reason content_filter: OpenAI, Azure OpenAI, Gemini's OpenAI-compatible
// API) into a refusal: the same input meets the same filter, so healing
// it would only pay for more filtered answers.
func filtered(r model.Response) model.Response {
	if r.Refusal == "" && r.RawFinishReason == "content_filter" {
		r.Refusal = "finish_reason content_filter: the provider's content filter stopped the answer"
	}
	return r
}

// isTruncation: the normalised finish reason, or any provider's own
// spelling of "stopped at the token limit".
func isTruncation(r model.Response) bool {
	if r.FinishReason == model.FinishLength {
		return true
	}
	switch r.RawFinishReason {
	case "length", "max_tokens", "MAX_TOKENS":
		return true
	}
	return false
}

func truncCause(r model.Response) string {
	if isTruncation(r) {
		word := r.RawFinishReason
		if word == "" {
			word = r.FinishReason
		}
		return "finish reason " + word
	}
	return "the JSON ends inside a value"
}

// noProgress reports whether b repeats a: the same output, or the same set
// of diagnostics.
func noProgress(a, b Attempt) (string, bool) {
	if strings.TrimSpace(a.Raw) == strings.TrimSpace(b.Raw) {
		return "repeated the output", true
	}
	if a.Class == job.ClassSchema && b.Class == job.ClassSchema && a.DiagnosticsOmitted == b.DiagnosticsOmitted &&
		slices.Equal(a.Diagnostics, b.Diagnostics) {
		return "failed with the same diagnostics", true
	}
	return "", false
}

// failing names what an attempt still fails on: its paths and keywords.
func failing(a Attempt) string {
	if a.Class == job.ClassGrammar {
		return "no parsable JSON"
	}
	parts := make([]string, 0, len(a.Diagnostics)+1)
	for _, d := range a.Diagnostics {
		p := d.Path
		if p == "" {
			p = "(root)"
		}
		parts = append(parts, p+" ("+d.Keyword+")")
	}
	if a.DiagnosticsOmitted > 0 {
		parts = append(parts, fmt.Sprintf("and %d more", a.DiagnosticsOmitted))
	}
	return strings.Join(parts, ", ")
}

// modelFailed ends the run on a model error, keeping the attempts so far.
func (l *Loop) modelFailed(res Result, n int, err error) Result {
	res.Err = fmt.Errorf("calling model, attempt %d: %w", n, err)
	var me *model.Error
	errors.As(err, &me)
	switch model.KindOf(err) {
	case model.KindAuth:
		res.Class = job.ClassAuth
		res.Reason = "model refused the credentials: " + err.Error()
		res.Hint = "fix the API key"
		if me != nil && me.KeyEnv != "" {
			res.Hint += " in " + me.KeyEnv
		}
		res.Hint += "; no job is dead-lettered for this"
	case model.KindNoCredit:
		res.Class = job.ClassNoCredit
		res.Reason = "the provider account has no credit: " + err.Error()
		res.Hint = "add credit or raise the spending limit of the provider account, then run again; no job is dead-lettered for this"
	case model.KindNotFound:
		res.Class = job.ClassNotFound
		res.Reason = "the provider has no such endpoint or model: " + err.Error()
		res.Hint = "check the base URL and the model name; no job is dead-lettered for this"
	case model.KindRequest:
		res.Class = job.ClassRequest
		res.Reason = "model rejected the request: " + err.Error()
		res.Hint = "check the model name and request options (--model, --response-format, --max-tokens)"
		if tooLong(err) {
			res.Hint = "the job does not fit the model's context window: a --fallback-model with a larger one takes such jobs at once, or split the input into smaller jobs"
		}
	default:
		res.Class = job.ClassTransport
		res.Reason = "model unreachable: " + err.Error()
		res.Hint = "not the job's fault: it is retried later"
	}
	return res
}

// cancelled ends the run on ctx cancellation.
func (l *Loop) cancelled(res Result, n int, err error) Result {
	res.Class = job.ClassTransport
	res.Err = fmt.Errorf("calling model, attempt %d: %w", n, err)
	res.Reason = "cancelled: " + err.Error()
	res.Hint = "not the job's fault: it is retried later"
	return res
}

func (l *Loop) log(ctx context.Context, t Task, a Attempt) {
	if !l.cfg.Logger.Enabled(ctx, slog.LevelDebug) {
		return
	}
	l.cfg.Logger.LogAttrs(ctx, slog.LevelDebug, "heal attempt",
		slog.String("job", t.JobID),
		slog.String("schema", t.Schema.ID),
		slog.String("model", a.Model),
		slog.Int("attempt", a.N),
		slog.Float64("temperature", a.Temperature),
		slog.String("class", string(a.Class)),
		slog.Int("diagnostics", len(a.Diagnostics)+a.DiagnosticsOmitted),
		slog.Int("tokens", a.Usage.Total()),
		slog.Duration("latency", a.Latency))
}

// system returns the system turn of a schema, built once. A schema is
// immutable once compiled, so the pointer is its identity.
func (l *Loop) system(s *schemas.Schema) string {
	if s == nil {
		return systemTurn(nil)
	}
	if v, ok := l.systems.Load(s); ok {
		return v.(string)
	}
	v, _ := l.systems.LoadOrStore(s, systemTurn(s))
	return v.(string)
}
