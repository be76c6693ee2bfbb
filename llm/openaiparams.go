package llm

// Parameters a model does not take: known up front from the model name and
// the base URL where OpenAI documents it, learned from a 400 otherwise, and
// remembered for the fleet in a ParamMemory, so that no process (and no
// batch) sends again a parameter one of them was refused.

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"log/slog"
	"net/url"
	"strings"
	"sync/atomic"
	"time"
)

// ParamMemory remembers, for every process of a fleet, the request
// parameters a model refused with a 400 ("temperature", "max_tokens").
// broker.Conn.ModelParams answers from a NATS KV bucket.
type ParamMemory interface {
	// Refused lists the parameters recorded as refused under key.
	Refused(ctx context.Context, key string) ([]string, error)
	// Refuse records that the model under key refused param.
	Refuse(ctx context.Context, key, param string) error
}

// ParamKey is the key of a model at a base URL in a ParamMemory: a hash
// (letters and digits), the same for every process pointed at the same
// server and model whatever its key; a refusal is the model's, not the
// account's.
func ParamKey(provider, baseURL, model string) string {
	h := sha256.Sum256([]byte(provider + "\x00" + strings.TrimRight(baseURL, "/") + "\x00" + model))
	return hex.EncodeToString(h[:16])
}

// paramsRecall is how often a client reads its ParamMemory again for what
// the rest of the fleet learned (a batch reads it before each batch).
const paramsRecall = 30 * time.Second

// paramShare is a client's ParamMemory with its key.
type paramShare struct {
	p        atomic.Pointer[sharedParams]
	recalled atomic.Int64 // unix nanoseconds of the last read
}

type sharedParams struct {
	mem ParamMemory
	key string
}

// officialOpenAI reports whether baseURL is OpenAI's own API.
func officialOpenAI(baseURL string) bool {
	u, err := url.Parse(baseURL)
	return err == nil && strings.EqualFold(u.Hostname(), "api.openai.com")
}

// refusesTemperature reports whether OpenAI documents that model takes
// only its default temperature: its reasoning models, the o-series (o1,
// o3, o4 and their -mini, -pro, dated versions) and gpt-5 (all but the
// gpt-5-chat models). The model name may carry a router's prefix
// ("openai/gpt-5").
func refusesTemperature(model string) bool {
	m := strings.ToLower(strings.TrimSpace(model))
	if i := strings.LastIndexByte(m, '/'); i >= 0 {
		m = m[i+1:]
	}
	if strings.HasPrefix(m, "gpt-5") {
		return !strings.HasPrefix(m, "gpt-5-chat")
	}
	for _, p := range []string{"o1", "o3", "o4"} {
		if m == p || strings.HasPrefix(m, p+"-") {
			return true
		}
	}
	return false
}

// knownParams sets what is known before the first call. OpenAI's own API
// gets max_completion_tokens (the spec marks max_tokens deprecated; every
// model there takes the new name); compatible servers keep max_tokens
// (not all of them know the new name) until one refuses it. A model that
// takes only its default temperature is sent none, on every server: a
// request without temperature is one any server takes.
func (o *OpenAI) knownParams() {
	if officialOpenAI(o.cfg.BaseURL) {
		o.completionTokens.Store(true)
	}
	if refusesTemperature(o.cfg.Model) {
		o.defaultTemperature.Store(true)
		o.cfg.Logger.Info("the model takes only its default temperature: sent without one",
			slog.String("provider", ProviderOpenAI), slog.String("model", o.cfg.Model))
	}
}

// ShareParams makes the client's knowledge of refused parameters the
// fleet's: what mem holds is read now (so the first calls are sent
// right), what the client learns from a 400 is written there, and what
// the others learned is read again every 30 s. An error reading mem is
// returned (the client keeps its own knowledge); later ones are logged.
func (o *OpenAI) ShareParams(ctx context.Context, mem ParamMemory) error {
	o.params.p.Store(&sharedParams{mem: mem, key: ParamKey(ProviderOpenAI, o.cfg.BaseURL, o.cfg.Model)})
	return o.recall(ctx, true)
}

// recall reads the memory when it was last read paramsRecall ago (one
// caller does it, the others go on), or at once when force is set.
func (o *OpenAI) recall(ctx context.Context, force bool) error {
	s := o.params.p.Load()
	if s == nil {
		return nil
	}
	now := time.Now().UnixNano()
	last := o.params.recalled.Load()
	if !force && (now-last < int64(paramsRecall) || !o.params.recalled.CompareAndSwap(last, now)) {
		return nil
	}
	o.params.recalled.Store(now)
	params, err := s.mem.Refused(ctx, s.key)
	if err != nil {
		o.cfg.Logger.Warn("reading the parameters the model refused elsewhere in the fleet",
			slog.String("provider", ProviderOpenAI), slog.String("model", o.cfg.Model), slog.String("error", err.Error()))
		return err
	}
	for _, p := range params {
		var flag *atomic.Bool
		switch p {
		case "temperature":
			flag = &o.defaultTemperature
		case "max_tokens":
			flag = &o.completionTokens
		default:
			continue
		}
		if !flag.Swap(true) {
			o.cfg.Logger.Info("the model refused this parameter elsewhere in the fleet: sent without it",
				slog.String("provider", ProviderOpenAI), slog.String("model", o.cfg.Model), slog.String("param", p))
		}
	}
	return nil
}

// remember writes a refusal the client learned to the fleet's memory.
func (o *OpenAI) remember(ctx context.Context, param string) {
	s := o.params.p.Load()
	if s == nil {
		return
	}
	if err := s.mem.Refuse(context.WithoutCancel(ctx), s.key, param); err != nil {
		o.cfg.Logger.Warn("recording a refused parameter for the fleet (this process keeps it)",
			slog.String("provider", ProviderOpenAI), slog.String("model", o.cfg.Model),
			slog.String("param", param), slog.String("error", err.Error()))
	}
}
