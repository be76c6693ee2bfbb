// Package llm holds the model providers behind heal.Model: an
// OpenAI-compatible chat-completions client, an Anthropic Messages client,
// the built-in simulated model, and a circuit breaker that wraps any of
// them. It decides nothing about whether output is valid; it gets an answer
// or says, with a *heal.Error, why it could not.
//
// # Choosing a provider
//
// Parse reads the --model spec ("openai:gpt-4o-mini", "anthropic:claude-sonnet-4-5",
// "sim"); the caller then builds the matching model:
//
//	provider, name, err := llm.Parse(spec)
//	switch provider {
//	case llm.ProviderOpenAI:
//		m, err = llm.NewOpenAI(llm.Config{BaseURL: url, APIKey: os.Getenv("OPENAI_API_KEY"), KeyEnv: "OPENAI_API_KEY", Model: name})
//	case llm.ProviderAnthropic:
//		m, err = llm.NewAnthropic(llm.Config{APIKey: os.Getenv("ANTHROPIC_API_KEY"), KeyEnv: "ANTHROPIC_API_KEY", Model: name})
//	case llm.ProviderSim:
//		m, err = llm.NewSim(llm.DefaultSimConfig())
//	}
//	guarded := llm.NewBreaker(m, llm.BreakerConfig{Logger: logger, OnState: gauge})
//
// # Failures
//
// The HTTP clients classify every failure. Timeouts, connection errors,
// 408, 409, 429 and 5xx (Anthropic's 529 included) are transport failures:
// retried here, on Config.TransportRetries (default 3), with exponential
// backoff and full jitter, honouring Retry-After (seconds or an HTTP date)
// and retry-after-ms; Response.TransportRetries counts them, and none of
// them is a heal attempt. When the budget is spent the error is
// *heal.Error{Kind: heal.KindTransport}. 401 and 403 are KindAuth (never
// retried; the error names Config.KeyEnv); 400, 404, 422 and other 4xx are
// KindRequest with the provider's own message. A cancelled ctx returns at
// once with ctx's error wrapped. Finish reasons are normalised: length,
// max_tokens and MAX_TOKENS become heal.FinishLength (truncation).
//
// The API key is never logged and never part of an error: a provider
// message that echoes it is redacted.
//
// JSON goes through github.com/go-json-experiment/json (the json v2
// implementation) in its encoding/json mode: the same bytes as
// encoding/json, about a third of the CPU a call.
//
// # The simulated model
//
// Sim is a simulator for demos, rehearsal and load tests: no network, no
// key. It generates a valid instance of the request's schema with
// realistic-looking values, deterministic from the seed, the job id and the
// attempt, then injects the faults real models make at configurable rates
// (code fences, prose around the JSON, trailing commas, numbers written as
// "12,50", missing required fields, enum values in the wrong case). On a
// heal turn it rereads its previous answer and fixes each path named in the
// feedback ("- /items/2/price: expected ..., got ...") with probability
// FixRate. It never satisfies `pattern`: it writes a plain word there, so
// a schema with a strict pattern shows up in the dead letters. Force
// produces one failure class on demand (truncated, grammar, transport,
// auth, request_error, no_progress).
//
// # The breaker
//
// A Breaker per provider opens after BreakerConfig.Threshold consecutive
// transport failures (each one a call that failed after its own retries):
// calls fail at once and Wait, the worker's fetch gate, blocks. After the
// cool-down one call goes through; success closes the breaker, a transport
// failure opens it again. OnState reports every change, for a metric.
package llm
