package sim

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"math/rand/v2"
	"sync"
	"time"

	"github.com/llmpipeline/pipeline/internal/ctxwait"
	"github.com/llmpipeline/pipeline/model"
)

// Force modes of the simulator.
const (
	ForceTruncated  = "truncated"     // output cut short, finish reason length
	ForceGrammar    = "grammar"       // prose without any JSON, different every attempt
	ForceTransport  = "transport"     // a *model.Error of kind transport (HTTP 503)
	ForceAuth       = "auth"          // a *model.Error of kind auth (HTTP 401)
	ForceRequest    = "request_error" // a *model.Error of kind request_error (HTTP 400)
	ForceNoProgress = "no_progress"   // one schema fault, then the same output on every heal turn
)

// Config configures the simulated model. Rates are probabilities in
// [0, 1], applied independently per call.
type Config struct {
	// Seed makes outputs reproducible: the same Seed, job id and attempt
	// give the same output.
	Seed int64
	// Latency is slept (interruptibly) on every call: the simulated
	// model's response time.
	Latency time.Duration
	// Formatting faults, which the sanitizer repairs: a Markdown code fence,
	// prose before and after, a trailing comma. Applied on every turn.
	FenceRate, ProseRate, TrailingCommaRate float64
	// Schema faults, which need a heal turn: a number written as a string
	// ("12,50"), a required field left out, an enum value in the wrong case
	// ("eur" for "EUR"). Applied on first attempts only.
	WrongTypeRate, MissingRequiredRate, EnumNearMissRate float64
	// FixRate is the probability that each path named in the heal feedback
	// gets fixed on the next turn.
	FixRate float64
	// Force, when set, produces one failure class on every call: truncated,
	// grammar, transport, auth, request_error or no_progress.
	Force string
}

// DefaultConfig is the demo's simulator: about a third of first answers
// need a heal turn, nine in ten heal turns fix what they were told, and
// 5ms of latency.
func DefaultConfig() Config {
	return Config{
		Seed:                1,
		Latency:             5 * time.Millisecond,
		FenceRate:           0.3,
		ProseRate:           0.15,
		TrailingCommaRate:   0.1,
		WrongTypeRate:       0.12,
		MissingRequiredRate: 0.08,
		EnumNearMissRate:    0.1,
		FixRate:             0.9,
	}
}

// Model is the built-in simulated model, for demos, rehearsal and load tests:
// no network, no key. It reads the request's JSON Schema and writes a valid
// instance with realistic-looking values (names, dates, amounts, codes),
// then injects the faults real models make at the configured rates. On a
// heal turn it reads the conversation as a model would: it takes its
// previous answer (the last assistant turn) and fixes each path named in the
// feedback (lines "- /path: expected ..., got ...") with probability
// FixRate.
//
// Supported keywords: type (and type arrays with null), properties,
// required, items, prefixItems, minItems, maxItems, uniqueItems, enum,
// const, minimum, maximum, exclusiveMinimum, exclusiveMaximum, multipleOf,
// minLength, maxLength, format (date, date-time, time, email, uri, uuid,
// hostname, ipv4, ipv6, duration), $ref into the same document (#/$defs,
// #/definitions, any pointer), allOf (merged), anyOf and oneOf (first
// branch, skipping a leading null). The simulator never satisfies
// `pattern`: it writes a plain word there, like a model that ignores
// regular expressions, so a schema with a strict pattern shows up in the
// dead letters; the demo relies on it.
//
// Safe for concurrent use; compiled schemas are cached by their text.
type Model struct {
	cfg Config

	mu    sync.RWMutex
	cache map[string]*cachedSchema
}

type cachedSchema struct {
	root *snode
	err  error
}

// maxCachedSchemas bounds the compiled-schema cache.
const maxCachedSchemas = 512

// providerName is what Provider returns and what model.Error.Provider holds.
const providerName = "sim"

// ErrConfig is returned (wrapped) by New for a Config it cannot run.
var ErrConfig = errors.New("invalid simulator config")

var _ model.Model = (*Model)(nil)

// New returns a simulator. Rates must be within [0, 1] and Force one of
// the documented modes.
func New(cfg Config) (*Model, error) {
	rates := map[string]float64{
		"fence": cfg.FenceRate, "prose": cfg.ProseRate, "trailing comma": cfg.TrailingCommaRate,
		"wrong type": cfg.WrongTypeRate, "missing required": cfg.MissingRequiredRate,
		"enum near-miss": cfg.EnumNearMissRate, "fix": cfg.FixRate,
	}
	for name, r := range rates {
		if !(r >= 0 && r <= 1) {
			return nil, fmt.Errorf("%w: %s rate %v: want a probability in [0, 1]", ErrConfig, name, r)
		}
	}
	switch cfg.Force {
	case "", ForceTruncated, ForceGrammar, ForceTransport, ForceAuth, ForceRequest, ForceNoProgress:
	default:
		return nil, fmt.Errorf("%w: force %q: want truncated, grammar, transport, auth, request_error or no_progress", ErrConfig, cfg.Force)
	}
	if cfg.Latency < 0 {
		return nil, fmt.Errorf("%w: latency %s is negative", ErrConfig, cfg.Latency)
	}
	return &Model{cfg: cfg, cache: map[string]*cachedSchema{}}, nil
}

// Provider returns "sim".
func (s *Model) Provider() string { return providerName }

// schema returns the compiled schema for raw, from the cache when it can.
func (s *Model) schema(raw []byte) (*snode, error) {
	s.mu.RLock()
	c, ok := s.cache[string(raw)]
	s.mu.RUnlock()
	if ok {
		return c.root, c.err
	}
	root, err := compileSchema(raw)
	s.mu.Lock()
	if len(s.cache) >= maxCachedSchemas {
		clear(s.cache)
	}
	s.cache[string(raw)] = &cachedSchema{root: root, err: err}
	s.mu.Unlock()
	return root, err
}

// Complete answers one request. See Model for what it does.
func (s *Model) Complete(ctx context.Context, req model.Request) (model.Response, error) {
	start := time.Now()
	if err := ctxwait.Sleep(ctx, s.cfg.Latency); err != nil {
		return model.Response{}, fmt.Errorf("sim: waiting for the simulated latency: %w", err)
	}
	switch s.cfg.Force {
	case ForceTransport:
		return model.Response{}, &model.Error{Kind: model.KindTransport, Provider: providerName, StatusCode: 503, Message: "simulated overload (forced transport failure)"}
	case ForceAuth:
		return model.Response{}, &model.Error{Kind: model.KindAuth, Provider: providerName, StatusCode: 401, Message: "simulated invalid API key (forced auth failure)", KeyEnv: "SIM_API_KEY"}
	case ForceRequest:
		return model.Response{}, &model.Error{Kind: model.KindRequest, Provider: providerName, StatusCode: 400, Message: "simulated: the model does not exist (forced request error)"}
	}
	if len(bytes.TrimSpace(req.Schema)) == 0 {
		return model.Response{}, &model.Error{Kind: model.KindRequest, Provider: providerName, Message: "the simulator needs the job's JSON Schema in the request"}
	}
	root, err := s.schema(req.Schema)
	if err != nil {
		return model.Response{}, &model.Error{Kind: model.KindRequest, Provider: providerName, Message: err.Error()}
	}
	r := s.rng(req)
	g := &gen{r: r}
	content := s.answer(g, root, req)

	resp := model.Response{Content: content, FinishReason: model.FinishStop, RawFinishReason: "stop"}
	if s.cfg.Force == ForceTruncated {
		resp.Content = content[:len(content)*3/5]
		resp.FinishReason, resp.RawFinishReason = model.FinishLength, "length"
	}
	if req.MaxTokens > 0 && tokens(len(resp.Content)) > req.MaxTokens {
		resp.Content = resp.Content[:min(len(resp.Content), req.MaxTokens*4)]
		resp.FinishReason, resp.RawFinishReason = model.FinishLength, "length"
	}
	prompt := 0
	for _, m := range req.Messages {
		prompt += len(m.Content) + 16
	}
	if err := readFiles(ctx, req.Messages); err != nil {
		return model.Response{}, &model.Error{Kind: model.KindRequest, Provider: providerName, Message: err.Error()}
	}
	resp.Usage = model.Usage{PromptTokens: tokens(prompt) + model.FileTokens(req.Messages), CompletionTokens: tokens(len(resp.Content))}
	resp.Latency = time.Since(start)
	return resp, nil
}

// readFiles reads the files of msgs as a provider receives them: each
// whole, once; a file that cannot be read fails the call.
func readFiles(ctx context.Context, msgs []model.Message) error {
	for i := range msgs {
		for _, f := range msgs[i].Files {
			if f.Open == nil {
				continue
			}
			r, err := f.Open(ctx)
			if err != nil {
				return fmt.Errorf("reading file %s: %w", f.Name, err)
			}
			n, err := io.Copy(io.Discard, r)
			r.Close()
			if err == nil && n != f.Size {
				err = fmt.Errorf("%d bytes, not its %d", n, f.Size)
			}
			if err != nil {
				return fmt.Errorf("reading file %s: %w", f.Name, err)
			}
		}
	}
	return nil
}

// tokens is the usual rough estimate: four bytes a token.
func tokens(n int) int { return (n + 3) / 4 }

// rng is seeded from Seed, the job id (or the conversation when there is
// none) and the attempt.
func (s *Model) rng(req model.Request) *rand.Rand {
	h := fnv.New64a()
	if req.JobID != "" {
		h.Write([]byte(req.JobID))
	} else {
		for _, m := range req.Messages {
			if m.Role == "user" {
				h.Write([]byte(m.Content))
				break
			}
		}
	}
	k := h.Sum64()
	return rand.New(rand.NewPCG(uint64(s.cfg.Seed)^k, k*0x9E3779B97F4A7C15+uint64(req.Attempt)))
}

// answer writes the content of one turn.
func (s *Model) answer(g *gen, root *snode, req model.Request) string {
	prev, feedback, isHeal := lastExchange(req.Messages)
	if s.cfg.Force == ForceGrammar {
		return grammarText(req.Attempt, g)
	}
	if !isHeal {
		v := g.value(root, "", 0)
		if s.cfg.Force == ForceNoProgress {
			forceFault(g, v)
		} else {
			s.schemaFaults(g, v)
		}
		return s.format(g, v)
	}
	if s.cfg.Force == ForceNoProgress {
		return prev
	}
	v, ok := lenientParse(prev)
	if !ok {
		// Not JSON last time: a model told so mostly starts over.
		if g.r.Float64() < s.cfg.FixRate {
			return s.format(g, g.value(root, "", 0))
		}
		return prev
	}
	paths := feedbackPaths(feedback)
	if len(paths) == 0 {
		// Feedback names no field: try again from scratch, or repeat.
		if g.r.Float64() < s.cfg.FixRate {
			return s.format(g, g.value(root, "", 0))
		}
		return s.format(g, v)
	}
	for _, p := range paths {
		if g.r.Float64() < s.cfg.FixRate {
			v = fixPath(g, root, v, p)
		}
	}
	return s.format(g, v)
}
