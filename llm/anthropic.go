package llm

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"

	"github.com/llmpipeline/pipeline/heal"
)

// Anthropic speaks the Anthropic Messages API. Safe for concurrent use.
type Anthropic struct {
	cfg Config
	c   caller
	url string
	own bool
}

var _ heal.Model = (*Anthropic)(nil)

// NewAnthropic returns a Messages API client. The key is required (an
// error naming Config.KeyEnv otherwise); other zero fields take defaults.
func NewAnthropic(cfg Config) (*Anthropic, error) {
	own := cfg.HTTPClient == nil
	cfg = cfg.withDefaults(ProviderAnthropic)
	if err := cfg.validate(ProviderAnthropic); err != nil {
		return nil, err
	}
	a := &Anthropic{cfg: cfg, url: cfg.BaseURL + "/v1/messages", own: own}
	a.c = caller{
		provider: ProviderAnthropic,
		cfg:      cfg,
		header: func(h http.Header) {
			h.Set("x-api-key", cfg.APIKey)
			h.Set("anthropic-version", AnthropicVersion)
		},
		errMessage: anthropicErrorMessage,
	}
	return a, nil
}

// Provider returns "anthropic".
func (a *Anthropic) Provider() string { return ProviderAnthropic }

// Close releases the idle connections of the client's own HTTP client.
// Safe to call twice.
func (a *Anthropic) Close() error {
	if a.own {
		a.cfg.HTTPClient.CloseIdleConnections()
	}
	return nil
}

type anthropicRequest struct {
	Model       string         `json:"model"`
	MaxTokens   int            `json:"max_tokens"`
	System      string         `json:"system,omitempty"`
	Messages    []heal.Message `json:"messages"`
	Temperature float64        `json:"temperature"`
}

type anthropicResponse struct {
	Type    string `json:"type"`
	Content []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	} `json:"content"`
	StopReason *string `json:"stop_reason"`
	Usage      struct {
		InputTokens              int `json:"input_tokens"`
		OutputTokens             int `json:"output_tokens"`
		CacheReadInputTokens     int `json:"cache_read_input_tokens"`
		CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	} `json:"usage"`
}

// Complete sends one Messages call. System turns become the top-level
// system prompt; consecutive turns of one role are joined (the API wants
// user and assistant to alternate); temperature is clamped to the API's
// [0, 1]. Usage: PromptTokens counts every input token (input_tokens plus
// cache reads and writes, as OpenAI's prompt_tokens does), CachedTokens the
// cache reads.
func (a *Anthropic) Complete(ctx context.Context, req heal.Request) (heal.Response, error) {
	body := anthropicRequest{
		Model:       a.cfg.Model,
		MaxTokens:   req.MaxTokens,
		Temperature: min(max(req.Temperature, 0), 1),
	}
	if body.MaxTokens == 0 {
		body.MaxTokens = a.cfg.MaxTokens
	}
	if body.MaxTokens == 0 {
		body.MaxTokens = DefaultAnthropicMaxTokens
	}
	var system []string
	for _, m := range req.Messages {
		if m.Role == "system" {
			system = append(system, m.Content)
			continue
		}
		if n := len(body.Messages); n > 0 && body.Messages[n-1].Role == m.Role {
			body.Messages[n-1].Content += "\n\n" + m.Content
			continue
		}
		body.Messages = append(body.Messages, heal.Message{Role: m.Role, Content: m.Content})
	}
	body.System = strings.Join(system, "\n\n")
	data, err := json.Marshal(body)
	if err != nil {
		return heal.Response{}, &heal.Error{Kind: heal.KindRequest, Provider: ProviderAnthropic, Message: "encoding the request: " + err.Error()}
	}
	return a.c.post(ctx, a.url, data, body.MaxTokens, parseAnthropicResponse)
}

// parseAnthropicResponse reads a 2xx Messages body: the text blocks joined,
// the stop reason normalised, usage with cache reads and writes counted as
// input.
func parseAnthropicResponse(b []byte) (heal.Response, *failure) {
	var r anthropicResponse
	if err := json.Unmarshal(b, &r); err != nil {
		return heal.Response{}, &failure{kind: heal.KindTransport, status: http.StatusOK, message: "unreadable response body: " + truncate(string(b), 200)}
	}
	if r.Type == "error" {
		return heal.Response{}, &failure{kind: heal.KindTransport, status: http.StatusOK, message: anthropicErrorMessage(b)}
	}
	var out heal.Response
	var sb strings.Builder
	for _, c := range r.Content {
		if c.Type == "text" {
			sb.WriteString(c.Text)
		}
	}
	out.Content = sb.String()
	if r.StopReason != nil {
		out.RawFinishReason = *r.StopReason
	}
	out.FinishReason = normaliseFinish(out.RawFinishReason)
	out.Usage = heal.Usage{
		PromptTokens:     r.Usage.InputTokens + r.Usage.CacheReadInputTokens + r.Usage.CacheCreationInputTokens,
		CompletionTokens: r.Usage.OutputTokens,
		CachedTokens:     r.Usage.CacheReadInputTokens,
	}
	return out, nil
}

// anthropicErrorMessage reads {"type":"error","error":{"type","message"}}.
func anthropicErrorMessage(body []byte) string {
	var e struct {
		Error struct {
			Type    string `json:"type"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && e.Error.Message != "" {
		if e.Error.Type != "" {
			return truncate(e.Error.Type+": "+e.Error.Message, 500)
		}
		return truncate(e.Error.Message, 500)
	}
	return truncate(string(body), 300)
}
