package app

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"golang.org/x/net/http/httpguts"

	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/config"
	"github.com/llmpipeline/pipeline/internal/exit"
	"github.com/llmpipeline/pipeline/llm"
	"github.com/llmpipeline/pipeline/llm/ratelimit"
	"github.com/llmpipeline/pipeline/llm/sim"
	"github.com/llmpipeline/pipeline/model"
	"github.com/llmpipeline/pipeline/worker"
)

// AckWait is the server's redelivery timer: --ack-wait when set, else
// max(30s, request-timeout/2), as its help says: a model call may take the
// whole request timeout, and heartbeats (a third of it) keep longer work
// alive.
func AckWait(set, requestTimeout time.Duration) time.Duration {
	if set > 0 {
		return set
	}
	return max(30*time.Second, requestTimeout/2)
}

// BuiltModel is the model BuildModel made: what the heal loop calls (the
// breaker around the rate limiter around the provider), its name, the
// breaker (the workers' fetch gate), and the limiter with the key its
// fleet shares (nil for the simulator without --rpm or --tpm).
type BuiltModel struct {
	Model    model.Model
	Name     string
	Breaker  *llm.Breaker
	Limiter  *ratelimit.Limiter
	LimitKey string
	Provider string
	// LLM is the provider's configuration (for its batch endpoint).
	LLM llm.Config
	// Params is the client that learns which parameters the model
	// refuses (OpenAI's), nil for the others.
	Params ParamSharer
}

// ParamSharer is a client whose knowledge of refused parameters can be
// the fleet's (llm.OpenAI, llm.OpenAIBatch).
type ParamSharer interface {
	ShareParams(ctx context.Context, mem llm.ParamMemory) error
}

// ShareParams gives the models' clients the fleet's memory of the
// parameters their models refused (a KV bucket), so that no process sends
// one that another was refused. Without it each process learns alone: a
// warning, not a failure.
func ShareParams(ctx context.Context, conn *broker.Conn, log *slog.Logger, models []BuiltModel) {
	var clients []ParamSharer
	for _, m := range models {
		if m.Params != nil {
			clients = append(clients, m.Params)
		}
	}
	if len(clients) == 0 {
		return
	}
	mem, err := conn.ModelParams(ctx)
	if err != nil {
		log.Warn("sharing the parameters models refused: each process learns its own", "err", err)
		return
	}
	for _, cl := range clients {
		if err := cl.ShareParams(ctx, mem); err != nil {
			log.Warn("reading the parameters models refused elsewhere in the fleet", "err", err)
		}
	}
}

// The fleet shares the pauses a provider asks for.
var _ ratelimit.Pauser = (*broker.Fleet)(nil)

// ShareLimit makes the limiter's budget the fleet's: this process joins
// the members of its limit key on NATS and takes its share. leave returns
// the share at once on the way out.
func ShareLimit(ctx context.Context, conn *broker.Conn, bm BuiltModel, log *slog.Logger) (leave func(), err error) {
	fleet, err := conn.JoinFleet(ctx, bm.LimitKey)
	if err != nil {
		return nil, exit.WithCode(exit.Runtime, fmt.Errorf("sharing the model's rate limit: %w", err))
	}
	bm.Limiter.ShareWith(fleet)
	RememberLimits(ctx, conn, bm, log)
	req, tok := bm.Limiter.Rates()
	log.Info("rate limit shared", "provider", bm.Provider, "members", fleet.Size(), "requests_per_second", req, "tokens_per_second", tok)
	return func() {
		lctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := fleet.Leave(lctx); err != nil {
			log.Warn("leaving the rate-limit fleet (the key expires on its own)", "err", err)
		}
	}, nil
}

// ShareLimits shares the rate limit of every model of the stack that has
// a limiter, --model's and the fallbacks' (ShareLimit: limits apply per
// model), and returns what gives the shares back.
func (s *Stack) ShareLimits(ctx context.Context, conn *broker.Conn, log *slog.Logger) (leave func(), err error) {
	var leaves []func()
	leave = func() {
		for _, l := range slices.Backward(leaves) {
			l()
		}
	}
	var limited []BuiltModel
	if s.Chain != nil {
		limited = s.Chain.Limited
	}
	if s.Model.Limiter != nil {
		limited = append([]BuiltModel{s.Model}, limited...)
	}
	for _, m := range limited {
		l, err := ShareLimit(ctx, conn, m, log)
		if err != nil {
			leave()
			return nil, err
		}
		leaves = append(leaves, l)
	}
	return leave, nil
}

// RememberLimits gives the model's limiter the fleet's memory of what the
// provider said of its limits (KV PIPELINE_PROVIDER_LIMITS): a provider
// that answered an earlier run is not probed one call at a time again,
// and what this run's answers say is kept for the next. Without it the
// limiter probes as on a new data dir: a warning, not a failure.
func RememberLimits(ctx context.Context, conn *broker.Conn, bm BuiltModel, log *slog.Logger) {
	mem, err := conn.ProviderLimits(ctx)
	if err == nil {
		err = bm.Limiter.Remember(ctx, mem, bm.LimitKey)
	}
	if err != nil {
		log.Warn("remembering the provider's limits: the first call probes them", "provider", bm.Provider, "err", err)
		return
	}
	if k, ok := bm.Limiter.Known(); ok {
		log.Info("provider limits remembered from an earlier run", "provider", bm.Provider,
			"headers", k.Headers, "requests_per_minute", k.RequestsPerMinute, "tokens_per_minute", k.TokensPerMinute)
	}
}

// Deps is what the assembly reports to besides its configuration: the
// logger, the metrics (nil: none), the run's status (nil: none) and where
// a notice for the user goes (stderr).
type Deps struct {
	Log     *slog.Logger
	Metrics *worker.Metrics
	Status  *Status
	Notice  io.Writer
}

// BuildModel makes the model of one spec (--model's or a
// --fallback-model's) with the model settings of cfg: the provider, its
// rate limiter (always for the HTTP providers, for the simulator only with
// --rpm or --tpm) and the circuit breaker around them. Keys come from the
// environment only, never from flags (flags end up in shell history and
// ps).
func BuildModel(cfg *config.Config, spec string, d Deps) (BuiltModel, error) {
	log, metrics, status := d.Log, d.Metrics, d.Status
	provider, name, err := llm.Parse(spec)
	if err != nil {
		return BuiltModel{}, exit.Fail(exit.Usage, "--model %q: %w", spec, err)
	}
	rpm, tpm := cfg.Model.RPM, cfg.Model.TPM
	if rpm < 0 || tpm < 0 {
		return BuiltModel{}, exit.Fail(exit.Usage, "--rpm and --tpm must be at least 0, got %d and %d", rpm, tpm)
	}
	if cfg.Model.MaxRetryAfter <= 0 {
		return BuiltModel{}, exit.Fail(exit.Usage, "--max-retry-after must be positive, got %s", cfg.Model.MaxRetryAfter)
	}
	if cfg.Model.RateWindow <= 0 {
		return BuiltModel{}, exit.Fail(exit.Usage, "--rate-window must be positive, got %s", cfg.Model.RateWindow)
	}
	headers, err := llmHeaders(cfg, provider)
	if err != nil {
		return BuiltModel{}, err
	}
	lc := llm.Config{
		Model:            name,
		Headers:          headers,
		Timeout:          cfg.Model.RequestTimeout,
		MaxTokens:        cfg.Model.MaxTokens,
		ResponseFormat:   cfg.Model.ResponseFormat,
		TransportRetries: cfg.Model.TransportRetries,
		MaxRetryAfter:    cfg.Model.MaxRetryAfter,
		Logger:           log,
	}
	if lc.TransportRetries == 0 {
		lc.TransportRetries = -1 // the flag's 0 means none; the config's 0 means the default
	}
	// The limiter: always for the HTTP providers (their headers drive it
	// when no flag does), for the simulator only with a flag.
	var lim *ratelimit.Limiter
	if provider != llm.ProviderSim || rpm > 0 || tpm > 0 {
		lim, err = ratelimit.New(ratelimit.Config{
			Provider:  provider,
			RPM:       rpm,
			TPM:       tpm,
			Window:    cfg.Model.RateWindow,
			MaxTokens: cfg.Model.MaxTokens,
			MaxPause:  cfg.Model.MaxRetryAfter,
			Logger:    log,
			OnWait:    func(d time.Duration) { metrics.RateLimitWaited(provider, d) },
			OnMembers: func(n int) { metrics.SetRateLimitMembers(provider, n) },
		})
		if err != nil {
			return BuiltModel{}, exit.Fail(exit.Usage, "--rpm/--tpm: %w", err)
		}
		lc.OnResponse = lim.Observe
	}
	var m model.Model
	var shared ParamSharer
	switch provider {
	case "sim":
		sc := sim.DefaultConfig()
		sc.Latency = cfg.Model.SimLatency
		sc.Seed = cfg.Model.SimSeed
		sc.FixRate = cfg.Model.SimFixRate
		scale := cfg.Model.SimFaultScale
		if scale < 0 {
			return BuiltModel{}, exit.Fail(exit.Usage, "--sim-fault-scale must be >= 0, got %g", scale)
		}
		for _, r := range []*float64{&sc.FenceRate, &sc.ProseRate, &sc.TrailingCommaRate, &sc.WrongTypeRate, &sc.MissingRequiredRate, &sc.EnumNearMissRate} {
			*r = min(1, *r*scale)
		}
		sc.Force = cfg.Model.SimForce
		if !cfg.IsSet("model") {
			fmt.Fprintln(d.Notice, "pipeline: no --model given: using the built-in simulated model (a simulator for demos, rehearsal and load tests, not a real LLM)")
		}
		s, err := sim.New(sc)
		if err != nil {
			return BuiltModel{}, exit.Fail(exit.Usage, "sim: %w", err)
		}
		m = s
		spec = "sim"
	case "openai":
		lc.KeyEnv = "OPENAI_API_KEY"
		lc.APIKey = os.Getenv(lc.KeyEnv)
		lc.BaseURL = firstNonEmpty(llmURL(cfg, provider), os.Getenv("OPENAI_BASE_URL"))
		o, err := llm.NewOpenAI(lc)
		if err != nil {
			return BuiltModel{}, exit.Fail(exit.Usage, "--model %s: %w", spec, err)
		}
		m, shared = o, o
	case "anthropic":
		lc.KeyEnv = "ANTHROPIC_API_KEY"
		lc.APIKey = os.Getenv(lc.KeyEnv)
		lc.BaseURL = firstNonEmpty(llmURL(cfg, provider), os.Getenv("ANTHROPIC_BASE_URL"))
		a, err := llm.NewAnthropic(lc)
		if err != nil {
			return BuiltModel{}, exit.Fail(exit.Usage, "--model %s: %w", spec, err)
		}
		m = a
	default:
		return BuiltModel{}, exit.Fail(exit.Usage, "--model %q: unknown provider %q (use openai:<model>, anthropic:<model> or sim)", spec, provider)
	}
	bm := BuiltModel{Name: spec, Limiter: lim, Provider: provider, LLM: lc, Params: shared}
	if lim != nil {
		bm.LimitKey = ratelimit.Key(provider, lc.BaseURL, name, lc.APIKey)
		m = lim.Wrap(m)
	}
	b := llm.NewBreaker(m, llm.BreakerConfig{
		Threshold: cfg.Model.BreakerThreshold,
		Cooldown:  cfg.Model.BreakerCooldown,
		Logger:    log,
		OnState: func(state string) {
			// Runs under the breaker's lock: log and set a gauge, nothing more.
			if state == llm.StateClosed {
				log.Warn("model circuit breaker closed: taking jobs again", "provider", provider)
			} else {
				log.Warn("model circuit breaker "+state+": not taking jobs", "provider", provider, "cooldown", cfg.Model.BreakerCooldown)
			}
			metrics.SetBreaker(provider, state)
			if spec == cfg.Model.Spec && status != nil {
				status.SetBreaker(state) // the progress line shows the primary's
			}
		},
	})
	metrics.SetBreaker(provider, llm.StateClosed)
	bm.Model, bm.Breaker = b, b
	return bm, nil
}

// llmURL is --llm-url for the provider of --model; a fallback model of
// another provider uses its own default (its *_BASE_URL variable).
func llmURL(cfg *config.Config, provider string) string {
	if p, _, err := llm.Parse(cfg.Model.Spec); err == nil && p == provider {
		return cfg.Model.URL
	}
	return ""
}

// llmHeaders is --llm-header for the provider of --model (the headers go
// where --llm-url goes; a fallback of another provider gets none). A bad
// header is a usage error naming it, never its value.
func llmHeaders(cfg *config.Config, provider string) (http.Header, error) {
	if p, _, err := llm.Parse(cfg.Model.Spec); err != nil || p != provider {
		return nil, nil
	}
	var h http.Header
	for i, raw := range cfg.Model.Headers {
		name, value, ok := strings.Cut(raw, ":")
		name, value = strings.TrimSpace(name), strings.TrimSpace(value)
		switch {
		case !ok || len(name) > 64 || !httpguts.ValidHeaderFieldName(name):
			// Never shown: without its colon the whole flag may be a value.
			return nil, exit.Fail(exit.Usage, "--llm-header #%d: want 'Name: value', a header name of letters, digits and -_.", i+1)
		case !httpguts.ValidHeaderFieldValue(value):
			return nil, exit.Fail(exit.Usage, "--llm-header %s: the value holds a line break or another control character", name)
		}
		switch http.CanonicalHeaderKey(name) {
		case "Host", "Content-Length", "Content-Type", "Transfer-Encoding", "Connection":
			return nil, exit.Fail(exit.Usage, "--llm-header %s: the client sets this header itself", http.CanonicalHeaderKey(name))
		}
		if h == nil {
			h = http.Header{}
		}
		h.Add(name, value)
	}
	return h, nil
}

func firstNonEmpty(s ...string) string {
	for _, v := range s {
		if v != "" {
			return v
		}
	}
	return ""
}

// ServeMetrics serves reg on addr (/metrics) until the returned function
// is called.
func ServeMetrics(addr string, reg *prometheus.Registry, log *slog.Logger) (func(), error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, exit.Fail(exit.Usage, "--metrics-addr %q: %w", addr, err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 5 * time.Second}
	go func() {
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server", "err", err)
		}
	}()
	log.Info("serving metrics", "addr", ln.Addr().String())
	return func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_ = srv.Shutdown(ctx) // best effort on the way out
	}, nil
}

// SetMemoryLimit applies --memory-limit unless the environment already set
// GOMEMLIMIT (the runtime has read it then).
func SetMemoryLimit(v string) error {
	if os.Getenv("GOMEMLIMIT") != "" {
		return nil
	}
	n, err := ParseBytes(v)
	if err != nil {
		return exit.Fail(exit.Usage, "--memory-limit %q: %w", v, err)
	}
	if n > 0 {
		debug.SetMemoryLimit(n)
	}
	return nil
}

// ParseBytes reads a size like 200MiB, 1GiB, 512MB or a number of bytes;
// "0" and "off" mean no limit.
func ParseBytes(v string) (int64, error) {
	v = strings.TrimSpace(v)
	if v == "" || v == "0" || strings.EqualFold(v, "off") {
		return 0, nil
	}
	units := []struct {
		suffix string
		mult   int64
	}{{"KiB", 1 << 10}, {"MiB", 1 << 20}, {"GiB", 1 << 30}, {"KB", 1e3}, {"MB", 1e6}, {"GB", 1e9}, {"B", 1}}
	mult := int64(1)
	for _, u := range units {
		if strings.HasSuffix(v, u.suffix) {
			v, mult = strings.TrimSuffix(v, u.suffix), u.mult
			break
		}
	}
	n, err := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
	if err != nil || n < 0 {
		return 0, fmt.Errorf("not a size (use e.g. 200MiB, 1GiB, or 0 for none)")
	}
	return n * mult, nil
}
