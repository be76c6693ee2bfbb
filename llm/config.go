package llm

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Providers understood by Parse.
const (
	ProviderOpenAI    = "openai"
	ProviderAnthropic = "anthropic"
	ProviderSim       = "sim"
)

// Response formats. OpenAI: all four. Anthropic: FormatTool,
// FormatJSONSchema (structured outputs, output_config.format), or plain
// text for any other value (the Messages API has no response_format).
const (
	FormatJSONObject = "json_object" // {"type":"json_object"}: any JSON object (the default)
	FormatJSONSchema = "json_schema" // the strict form of the job's schema (package llm/strict)
	FormatNone       = "none"        // no response_format sent
	// FormatTool asks for the answer through a forced tool call whose
	// parameters are the job's schema (OpenAI tools and tool_choice,
	// Anthropic tools and tool_choice); the call's arguments are the
	// answer. Without a schema in the request, the plain mode is used.
	FormatTool = "tool"
)

// Defaults applied by the constructors to zero Config fields.
const (
	DefaultOpenAIURL        = "https://api.openai.com/v1"
	DefaultAnthropicURL     = "https://api.anthropic.com"
	DefaultTimeout          = 60 * time.Second
	DefaultTransportRetries = 3
	DefaultBackoffBase      = 500 * time.Millisecond
	DefaultBackoffMax       = 30 * time.Second
	DefaultMaxRetryAfter    = 10 * time.Minute
	// DefaultAnthropicMaxTokens is sent when neither the request nor the
	// Config sets max tokens: the Messages API requires the field.
	DefaultAnthropicMaxTokens = 4096
	// AnthropicVersion is the anthropic-version header sent with every call.
	AnthropicVersion = "2023-06-01"
)

// ErrSpec is returned (wrapped) by Parse for a model spec it cannot read.
var ErrSpec = errors.New("invalid model spec")

// ErrConfig is returned (wrapped) by the constructors for a broken Config.
var ErrConfig = errors.New("invalid model config")

// Config configures an HTTP provider (OpenAI-compatible or Anthropic). The
// zero value of every field means its default.
type Config struct {
	// BaseURL: OpenAI default https://api.openai.com/v1 (the client POSTs
	// {BaseURL}/chat/completions); Anthropic https://api.anthropic.com (the
	// client POSTs {BaseURL}/v1/messages). A query it has is kept on every
	// endpoint's URL (an Azure OpenAI deployment's ?api-version=...).
	BaseURL string
	// APIKey is sent as a bearer token (OpenAI) or x-api-key (Anthropic). It
	// is never logged and never part of an error: provider messages that echo
	// it are redacted. Optional for OpenAI-compatible local servers.
	APIKey string
	// KeyEnv names the environment variable the key came from, for auth
	// errors. Defaults: OPENAI_API_KEY, ANTHROPIC_API_KEY.
	KeyEnv string
	// Headers are sent with every request to BaseURL's host, after the
	// provider's own (so one of the same name replaces it): a gateway's
	// key (Portkey, Helicone, Cloudflare AI Gateway), Azure OpenAI's
	// api-key, OpenRouter's attribution. Values of 6 bytes or more are
	// treated as secrets: redacted, as the key is, from every message.
	Headers http.Header
	// Model is the model name sent to the provider. Required.
	Model string
	// Timeout bounds one HTTP request, body included (default 60s). A
	// request that times out is a transport failure and is retried.
	Timeout time.Duration
	// MaxTokens is used when model.Request.MaxTokens is 0. OpenAI: 0 sends
	// no limit. Anthropic: 0 sends 4096 (the API requires a value).
	MaxTokens int
	// ResponseFormat: OpenAI "json_object" (default), "json_schema" (sends
	// the strict form of model.Request.Schema with strict true; falls back
	// to json_object when the request has no schema), "tool" (FormatTool)
	// or "none". Anthropic "tool", "json_schema" (structured outputs with
	// the strict form of the schema), or plain text for "", "json_object"
	// and "none".
	ResponseFormat string
	// TransportRetries is the retry budget for transport failures (timeouts,
	// connection errors, 408, 409, 429, 5xx) of one Complete call: default
	// 3, -1 means none.
	TransportRetries int
	// BackoffBase and BackoffMax shape the delay between transport retries:
	// exponential (base * 2^n) with full jitter, capped by BackoffMax
	// (defaults 500ms and 30s).
	BackoffBase time.Duration
	BackoffMax  time.Duration
	// MaxRetryAfter is the longest the call waits for the provider
	// (default 10m). A wait the provider asks for (Retry-After, in seconds
	// or as an HTTP date, or retry-after-ms) replaces the backoff and is
	// kept whatever its length up to MaxRetryAfter, the call held meanwhile;
	// such waits spend no transport retry, but together they may not pass
	// MaxRetryAfter in one call. A wait longer than that (or past that
	// total) ends the call at once as a transport failure naming the wait.
	MaxRetryAfter time.Duration
	// HTTPClient, when nil, is a tuned client of the provider's own:
	// keep-alive with up to 1024 idle connections per host so a worker with
	// 1024 calls in flight reuses its sockets. Close releases its idle
	// connections. Either way the provider follows no redirect: a 3xx is a
	// request error naming the Location (a given client is copied for that,
	// not changed).
	HTTPClient *http.Client
	// Logger receives retry and failure lines (never the key, never
	// payloads). Nil discards.
	Logger *slog.Logger
	// OnResponse, when set, is called with the status and headers of
	// every HTTP response the provider gets, retries and errors included,
	// before its body is read: a rate limiter reads the provider's
	// rate-limit headers there. It must not keep h or block.
	OnResponse func(status int, h http.Header)
}

func (c Config) withDefaults(provider string) Config {
	switch provider {
	case ProviderOpenAI:
		if c.BaseURL == "" {
			c.BaseURL = DefaultOpenAIURL
		}
		if c.KeyEnv == "" {
			c.KeyEnv = "OPENAI_API_KEY"
		}
		if c.ResponseFormat == "" {
			c.ResponseFormat = FormatJSONObject
		}
	case ProviderAnthropic:
		if c.BaseURL == "" {
			c.BaseURL = DefaultAnthropicURL
		}
		if c.KeyEnv == "" {
			c.KeyEnv = "ANTHROPIC_API_KEY"
		}
	}
	c.BaseURL = strings.TrimRight(c.BaseURL, "/")
	if c.Timeout == 0 {
		c.Timeout = DefaultTimeout
	}
	switch {
	case c.TransportRetries == 0:
		c.TransportRetries = DefaultTransportRetries
	case c.TransportRetries < 0:
		c.TransportRetries = 0
	}
	if c.BackoffBase == 0 {
		c.BackoffBase = DefaultBackoffBase
	}
	if c.BackoffMax == 0 {
		c.BackoffMax = DefaultBackoffMax
	}
	if c.MaxRetryAfter == 0 {
		c.MaxRetryAfter = DefaultMaxRetryAfter
	}
	if c.HTTPClient == nil {
		c.HTTPClient = newHTTPClient()
	} else {
		// A copy, so the caller's client keeps its own redirect policy.
		hc := *c.HTTPClient
		c.HTTPClient = &hc
	}
	c.HTTPClient.CheckRedirect = noRedirect
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	return c
}

func (c Config) validate(provider string) error {
	u, err := url.Parse(c.BaseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%w: %s base URL %q: want an absolute http(s) URL", ErrConfig, provider, redactURL(c.BaseURL))
	}
	if strings.TrimSpace(c.Model) == "" {
		return fmt.Errorf("%w: %s: no model name", ErrConfig, provider)
	}
	if c.Timeout < 0 || c.BackoffBase < 0 || c.BackoffMax < 0 || c.MaxRetryAfter < 0 {
		return fmt.Errorf("%w: %s: negative timeout or backoff", ErrConfig, provider)
	}
	if c.MaxTokens < 0 {
		return fmt.Errorf("%w: %s: negative max tokens %d", ErrConfig, provider, c.MaxTokens)
	}
	if provider == ProviderOpenAI {
		switch c.ResponseFormat {
		case FormatJSONObject, FormatJSONSchema, FormatTool, FormatNone:
		default:
			return fmt.Errorf("%w: openai response format %q: want json_object, json_schema, tool or none", ErrConfig, c.ResponseFormat)
		}
	}
	if provider == ProviderAnthropic {
		switch c.ResponseFormat {
		case "", FormatJSONObject, FormatJSONSchema, FormatTool, FormatNone:
		default:
			return fmt.Errorf("%w: anthropic response format %q: want tool, json_schema, or json_object for plain text", ErrConfig, c.ResponseFormat)
		}
	}
	if provider == ProviderAnthropic && c.APIKey == "" {
		return fmt.Errorf("%w: anthropic: no API key (set %s)", ErrConfig, c.KeyEnv)
	}
	return nil
}

// endpoint is the URL of path (which may hold a query of its own) under
// BaseURL, with BaseURL's query kept.
func (c Config) endpoint(path string) string {
	base, query, _ := strings.Cut(c.BaseURL, "?")
	base = strings.TrimRight(base, "/")
	path, pq, _ := strings.Cut(path, "?")
	switch {
	case query == "":
		query = pq
	case pq != "":
		query += "&" + pq
	}
	if query == "" {
		return base + path
	}
	return base + path + "?" + query
}

// redactURL drops user info from a URL before it is shown.
func redactURL(s string) string {
	u, err := url.Parse(s)
	if err != nil {
		return "(unparsable)"
	}
	return u.Redacted()
}

// newHTTPClient is the default client: keep-alive, a deep idle pool per host
// so many concurrent calls reuse sockets, no client-wide timeout (each
// request carries its own deadline).
func newHTTPClient() *http.Client {
	return &http.Client{Transport: &http.Transport{
		Proxy:                 http.ProxyFromEnvironment,
		DialContext:           (&net.Dialer{Timeout: 10 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
		ForceAttemptHTTP2:     true,
		MaxIdleConns:          0, // no global limit
		MaxIdleConnsPerHost:   1024,
		IdleConnTimeout:       90 * time.Second,
		TLSHandshakeTimeout:   10 * time.Second,
		ExpectContinueTimeout: time.Second,
	}}
}

// Parse reads a model spec: "openai:<model>", "anthropic:<model>" or "sim".
// The model name is everything after the first colon, so names that hold
// colons ("openai:llama3.1:8b" for Ollama) survive.
func Parse(spec string) (provider, model string, err error) {
	s := strings.TrimSpace(spec)
	p, m, hasColon := strings.Cut(s, ":")
	p = strings.ToLower(strings.TrimSpace(p))
	m = strings.TrimSpace(m)
	switch p {
	case ProviderSim:
		if hasColon && m != "" {
			return "", "", fmt.Errorf("%w %q: sim takes no model name", ErrSpec, spec)
		}
		return ProviderSim, "", nil
	case ProviderOpenAI, ProviderAnthropic:
		if m == "" {
			return "", "", fmt.Errorf("%w %q: want %s:<model name>", ErrSpec, spec, p)
		}
		return p, m, nil
	case "":
		return "", "", fmt.Errorf("%w: empty (want openai:<model>, anthropic:<model> or sim)", ErrSpec)
	default:
		return "", "", fmt.Errorf("%w %q: unknown provider %q (want openai, anthropic or sim)", ErrSpec, spec, p)
	}
}
