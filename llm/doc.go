// Package llm holds the model providers behind model.Model: an
// OpenAI-compatible chat-completions client, an Anthropic Messages client,
// and a circuit breaker that wraps any of them (the built-in simulated
// model is package llm/sim). It decides nothing about whether output is valid; it gets an answer
// or says, with a *model.Error, why it could not.
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
//		m, err = sim.New(sim.DefaultConfig()) // package llm/sim
//	}
//	guarded := llm.NewBreaker(m, llm.BreakerConfig{Logger: logger, OnState: gauge})
//
// # Failures
//
// The HTTP clients classify every failure. Timeouts, connection errors,
// 408, 409, 429 and 5xx but 501 (Anthropic's 529 included) are transport failures:
// retried here, on Config.TransportRetries (default 3), with exponential
// backoff and full jitter; Response.TransportRetries counts them, and none
// of them is a heal attempt. A wait the provider asks for (Retry-After, in
// seconds or as an HTTP date, or retry-after-ms) is kept instead of the
// backoff, however long, up to Config.MaxRetryAfter (default 10m): the
// call is held and spends no retry of the budget; a longer wait, or waits
// together longer in one call, fail it at once (transport, naming the
// wait). When the budget is spent the error is
// *model.Error{Kind: model.KindTransport}. 401 and 403 are KindAuth (never
// retried; the error names Config.KeyEnv); an account without credit (any
// 402, Anthropic's billing_error, OpenAI's 429 insufficient_quota) is
// KindNoCredit (never retried; the error says to check the billing and
// credit of the account of Config.KeyEnv); 404, 405 and 501 are KindNotFound
// (no such route or model, whatever the job: a wrong base URL or model
// name; the message names the URL called); 400, 422 and other 4xx are
// KindRequest with the provider's own message. A cancelled ctx returns at
// once with ctx's error wrapped. Finish reasons are normalised: length,
// max_tokens and MAX_TOKENS become model.FinishLength (truncation).
//
// A 400 that names a parameter the model does not take (OpenAI's
// reasoning models: any temperature but the default, and max_tokens;
// model.Error.Param) is learned by the OpenAI client: the call is sent
// again without it, and so is every later call; the answer's
// Response.Temperature says it came at the default, 1. What OpenAI
// documents is known before the first call (openaiparams.go: its own API
// gets max_completion_tokens, gpt-5 and o-series models no temperature),
// and OpenAI.ShareParams makes what is learned the fleet's (a ParamMemory:
// broker.Conn.ModelParams, a KV bucket).
//
// FormatJSONSchema sends the strict form of the job's schema (package llm/strict)
// and maps the answer back before the heal loop judges it against the
// job's own schema; StrictAnswers does the same for a batch's replayed
// answers.
//
// The API key is never logged and never part of an error: a provider
// message that echoes it is redacted.
//
// Requests are written by encoding/json. The OpenAI response is read by
// github.com/go-json-experiment/json (the json v2 implementation) in its
// encoding/json mode: what encoding/json would read, in half the time.
//
// # Response formats
//
// Config.ResponseFormat picks how the answer is asked for. FormatTool, on
// both providers, forces one tool call whose parameters are the job's
// schema (OpenAI tools and tool_choice, the answer read from
// tool_calls[0].function.arguments; Anthropic tools and tool_choice, the
// answer the tool_use block's input); Response.ToolCallID carries the
// call's id, and a heal turn marked with it (model.Message.ToolCallID) is
// sent as the call and its result (OpenAI a "tool" message, Anthropic a
// tool_result block with is_error). OpenAI also has json_object (the
// default), json_schema (strict) and none; Anthropic sends plain text
// otherwise. A refusal (OpenAI message.refusal, Anthropic stop_reason
// "refusal") is returned in Response.Refusal, not as the answer; heal
// classes it refused.
//
// Anthropic's system prompt is one text block marked for prompt caching
// (cache_control ephemeral). Usage counts every input token in
// PromptTokens, cache reads in CachedTokens, cache writes in
// CacheWriteTokens.
//
// # What is read
//
// A 2xx body may hold max_tokens x 32 bytes (a long token written with JSON
// escapes, at worst) plus 64 KiB for the envelope, and never more than
// 8 MiB; a request that sends no max_tokens (OpenAI with MaxTokens 0) is
// bounded as for 16384. The rest of a longer body is not read (the
// connection is dropped) and the call returns a truncated answer:
// FinishReason model.FinishLength, RawFinishReason "response body over N
// bytes, the bound for max_tokens M", no content, so heal classes it
// truncated and says why. Error bodies are read up to 64 KiB. At 4096 max
// tokens a call holds at most 192 KiB of body, so 64 calls in flight stay
// within a few MiB whatever the server sends.
//
// No redirect is followed: a 3xx is a KindRequest error naming the
// Location (without user info, query or fragment), so the key never goes
// to another host and another host's answer is never taken for the
// model's. A Config.HTTPClient passed in is copied for that, not changed.
//
// # The breaker
//
// A Breaker per provider opens after BreakerConfig.Threshold consecutive
// transport failures (each one a call that failed after its own retries):
// calls fail at once and Wait, the worker's fetch gate, blocks. After the
// cool-down one call goes through; success closes the breaker, a transport
// failure opens it again. OnState reports every change, for a metric.
package llm
