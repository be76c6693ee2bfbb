package llm

import (
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"strings"
	"sync"

	"github.com/llmpipeline/pipeline/llm/strict"
	"github.com/llmpipeline/pipeline/model"
)

// Anthropic speaks the Anthropic Messages API. Safe for concurrent use.
type Anthropic struct {
	cfg Config
	c   caller
	url string
	own bool

	// strict holds the strict form of each schema sent with json_schema;
	// warned, the schemas already logged as having none.
	strict *strict.Cache
	warned sync.Map
}

var _ model.Model = (*Anthropic)(nil)

// NewAnthropic returns a Messages API client. The key is required (an
// error naming Config.KeyEnv otherwise); other zero fields take defaults.
func NewAnthropic(cfg Config) (*Anthropic, error) {
	own := cfg.HTTPClient == nil
	cfg = cfg.withDefaults(ProviderAnthropic)
	if err := cfg.validate(ProviderAnthropic); err != nil {
		return nil, err
	}
	a := &Anthropic{cfg: cfg, url: cfg.endpoint("/v1/messages"), own: own, strict: strict.NewCache(strict.Anthropic)}
	a.c = anthropicCaller(cfg)
	return a, nil
}

// anthropicCaller is the HTTP caller of the Anthropic endpoints, Messages
// and Message Batches alike.
func anthropicCaller(cfg Config) caller {
	return caller{
		provider: ProviderAnthropic,
		cfg:      cfg,
		header: func(h http.Header) {
			h.Set("x-api-key", cfg.APIKey)
			h.Set("anthropic-version", AnthropicVersion)
		},
		errMessage: anthropicErrorMessage,
	}
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
	Model       string               `json:"model"`
	MaxTokens   int                  `json:"max_tokens"`
	System      []anthropicText      `json:"system,omitempty"`
	Messages    []anthropicMessage   `json:"messages"`
	Temperature float64              `json:"temperature"`
	Tools       []anthropicTool      `json:"tools,omitempty"`
	ToolChoice  *anthropicToolChoice `json:"tool_choice,omitempty"`
	// OutputConfig asks for structured outputs (json_schema mode):
	// {"format":{"type":"json_schema","schema":...}}.
	OutputConfig *anthropicOutputConfig `json:"output_config,omitempty"`
}

// anthropicOutputConfig is the Messages API's output_config (the SDK's
// OutputConfigParam): its format is a JSONOutputFormatParam.
type anthropicOutputConfig struct {
	Format anthropicOutputFormat `json:"format"`
}

type anthropicOutputFormat struct {
	Type   string          `json:"type"` // "json_schema"
	Schema json.RawMessage `json:"schema"`
}

// anthropicMessage is one turn. Content is a string for a turn of text
// alone, else a list of blocks (anthropicText, anthropicToolUse,
// anthropicToolResult).
type anthropicMessage struct {
	Role    string `json:"role"`
	Content any    `json:"content"`
}

type anthropicText struct {
	Type         string                 `json:"type"` // "text"
	Text         string                 `json:"text"`
	CacheControl *anthropicCacheControl `json:"cache_control,omitempty"`
}

// anthropicCacheControl marks a prompt-cache breakpoint: the request's
// prefix up to and including the marked block (tools, then system) is
// cached for five minutes.
type anthropicCacheControl struct {
	Type string `json:"type"` // "ephemeral"
}

type anthropicToolUse struct {
	Type  string          `json:"type"` // "tool_use"
	ID    string          `json:"id"`
	Name  string          `json:"name"`
	Input json.RawMessage `json:"input"`
}

type anthropicToolResult struct {
	Type      string `json:"type"` // "tool_result"
	ToolUseID string `json:"tool_use_id"`
	Content   string `json:"content"`
	IsError   bool   `json:"is_error,omitempty"`
}

type anthropicTool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema"`
}

// anthropicToolChoice forces the call: {"type":"tool","name":...}.
type anthropicToolChoice struct {
	Type string `json:"type"`
	Name string `json:"name"`
}

type anthropicResponse struct {
	Type    string `json:"type"`
	Content []struct {
		Type  string          `json:"type"`
		Text  string          `json:"text"`
		ID    string          `json:"id"`
		Name  string          `json:"name"`
		Input json.RawMessage `json:"input"`
	} `json:"content"`
	StopReason  *string               `json:"stop_reason"`
	StopDetails *anthropicStopDetails `json:"stop_details"`
	Usage       struct {
		InputTokens              int `json:"input_tokens"`
		OutputTokens             int `json:"output_tokens"`
		CacheReadInputTokens     int `json:"cache_read_input_tokens"`
		CacheCreationInputTokens int `json:"cache_creation_input_tokens"`
	} `json:"usage"`
}

// anthropicStopDetails says why a refusal stopped the answer.
type anthropicStopDetails struct {
	Category    string `json:"category"`
	Explanation string `json:"explanation"`
}

// Complete sends one Messages call. System turns become the top-level
// system prompt, one text block marked for prompt caching (cache_control
// ephemeral): it holds the rules and the schema, the same for every job of
// a schema, so calls after the first read it from the cache (the API
// caches nothing under its minimum length, 1024 tokens on most models).
// Consecutive turns of one role are joined (the API wants user and
// assistant to alternate); temperature is clamped to the API's [0, 1].
//
// In json_schema mode (FormatJSONSchema, with a schema in the request) it
// asks for structured outputs: output_config.format is the strict form of
// the schema (strict.go: every object closed, the keywords the API does
// not take moved into descriptions); the answer is the text block, judged
// against the job's own schema. A schema without a strict form is sent as
// plain text.
//
// In tool mode (FormatTool, with a schema in the request) it sends one
// tool whose input_schema is the schema, forced by tool_choice; the
// answer is the tool_use block's input. A heal turn after such an answer
// is sent as the assistant's tool_use block followed by a user turn with a
// tool_result block for it (is_error true) carrying the diagnostics.
//
// Usage: PromptTokens counts every input token (input_tokens plus cache
// reads and writes, as OpenAI's prompt_tokens does), CachedTokens the cache
// reads, CacheWriteTokens the cache writes.
func (a *Anthropic) Complete(ctx context.Context, req model.Request) (model.Response, error) {
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
	tool := a.cfg.ResponseFormat == FormatTool && len(req.Schema) > 0
	name := toolName(req.SchemaID)
	if tool {
		body.Tools = []anthropicTool{{Name: name, Description: toolDescription, InputSchema: req.Schema}}
		body.ToolChoice = &anthropicToolChoice{Type: "tool", Name: name}
	}
	if a.cfg.ResponseFormat == FormatJSONSchema && len(req.Schema) > 0 {
		ss := a.strict.Of(req.Schema)
		if ss.Strict {
			body.OutputConfig = &anthropicOutputConfig{Format: anthropicOutputFormat{Type: "json_schema", Schema: ss.JSON}}
		} else if _, seen := a.warned.LoadOrStore(string(req.Schema), true); !seen {
			a.cfg.Logger.Warn("the schema has no strict form: sent as plain text",
				slog.String("provider", ProviderAnthropic), slog.String("schema", req.SchemaID), slog.String("reason", ss.Why))
		}
	}
	var system []string
	marks := newFileMarks()
	for _, m := range req.Messages {
		if m.Role == model.RoleSystem {
			system = append(system, m.Content)
			continue
		}
		body.Messages = appendAnthropicTurn(body.Messages, m, tool, name)
		if len(m.Files) > 0 && m.Role == model.RoleUser {
			addAnthropicFiles(body.Messages, m.Files, marks)
		}
	}
	if len(system) > 0 {
		body.System = []anthropicText{{Type: "text", Text: strings.Join(system, "\n\n"), CacheControl: &anthropicCacheControl{Type: "ephemeral"}}}
	}
	for i := range body.Messages {
		// A turn of one text block goes as a plain string.
		if blocks, ok := body.Messages[i].Content.([]any); ok && len(blocks) == 1 {
			if t, ok := blocks[0].(anthropicText); ok {
				body.Messages[i].Content = t.Text
			}
		}
	}
	data, err := json.Marshal(body)
	var w wire
	if err == nil {
		w, err = marks.splice(data)
	}
	if err != nil {
		return model.Response{}, &model.Error{Kind: model.KindRequest, Provider: ProviderAnthropic, Message: "encoding the request: " + err.Error()}
	}
	return a.c.post(ctx, a.url, w, body.MaxTokens, parseAnthropicResponse)
}

// appendAnthropicTurn adds m to msgs as content blocks, joining it to the
// last turn when that has the same role. In tool mode an assistant turn
// with a ToolCallID whose content is a JSON object becomes a tool_use
// block of the tool named name, and the user turn answering it a
// tool_result block (is_error: the content is the diagnostics); any other
// turn is text.
func appendAnthropicTurn(msgs []anthropicMessage, m model.Message, tool bool, name string) []anthropicMessage {
	var block any = anthropicText{Type: "text", Text: m.Content}
	if tool && m.ToolCallID != "" {
		switch m.Role {
		case model.RoleAssistant:
			if isJSONObject(m.Content) {
				block = anthropicToolUse{Type: "tool_use", ID: m.ToolCallID, Name: name, Input: json.RawMessage(m.Content)}
			}
		case model.RoleUser:
			if n := len(msgs); n > 0 && hasToolUse(msgs[n-1], m.ToolCallID) {
				block = anthropicToolResult{Type: "tool_result", ToolUseID: m.ToolCallID, Content: m.Content, IsError: true}
			}
		}
	}
	n := len(msgs)
	if n == 0 || msgs[n-1].Role != m.Role {
		return append(msgs, anthropicMessage{Role: m.Role, Content: []any{block}})
	}
	blocks := msgs[n-1].Content.([]any)
	last, lastText := blocks[len(blocks)-1].(anthropicText)
	if t, ok := block.(anthropicText); ok && lastText {
		last.Text += "\n\n" + t.Text
		blocks[len(blocks)-1] = last
	} else {
		blocks = append(blocks, block)
	}
	msgs[n-1].Content = blocks
	return msgs
}

// hasToolUse reports whether turn m holds the tool_use block id.
func hasToolUse(m anthropicMessage, id string) bool {
	blocks, _ := m.Content.([]any)
	for _, b := range blocks {
		if u, ok := b.(anthropicToolUse); ok && u.ID == id {
			return true
		}
	}
	return false
}

// isJSONObject reports whether s is one JSON object (a tool_use input must
// be one).
func isJSONObject(s string) bool {
	t := strings.TrimSpace(s)
	return strings.HasPrefix(t, "{") && json.Valid([]byte(t))
}

// parseAnthropicResponse reads a 2xx Messages body: the first tool_use
// block's input when there is one (tool mode), else the text blocks
// joined; stop reason "refusal" as Response.Refusal; the stop reason
// normalised; usage with cache reads and writes counted as input and
// apart.
func parseAnthropicResponse(b []byte) (model.Response, *failure) {
	var r anthropicResponse
	if err := json.Unmarshal(b, &r); err != nil {
		return model.Response{}, &failure{kind: model.KindTransport, status: http.StatusOK, message: "unreadable response body: " + truncate(string(b), 200)}
	}
	if r.Type == "error" {
		return model.Response{}, &failure{kind: model.KindTransport, status: http.StatusOK, message: anthropicErrorMessage(b)}
	}
	var out model.Response
	var sb strings.Builder
	toolUse := false
	for _, c := range r.Content {
		switch {
		case c.Type == "text":
			sb.WriteString(c.Text)
		case c.Type == "tool_use" && !toolUse:
			toolUse = true
			out.Content, out.ToolCallID = string(c.Input), c.ID
		}
	}
	if !toolUse {
		out.Content = sb.String()
	}
	if r.StopReason != nil {
		out.RawFinishReason = *r.StopReason
	}
	if out.RawFinishReason == "refusal" {
		out.Refusal = anthropicRefusal(sb.String(), r.StopDetails)
	}
	out.FinishReason = finishOf(out.RawFinishReason)
	out.Usage = model.Usage{
		PromptTokens:     r.Usage.InputTokens + r.Usage.CacheReadInputTokens + r.Usage.CacheCreationInputTokens,
		CompletionTokens: r.Usage.OutputTokens,
		CachedTokens:     r.Usage.CacheReadInputTokens,
		CacheWriteTokens: r.Usage.CacheCreationInputTokens,
	}
	return out, nil
}

// anthropicRefusal words a refusal: the API's explanation when it gives
// one, and what the model wrote before it stopped.
func anthropicRefusal(text string, details *anthropicStopDetails) string {
	parts := []string{"stop_reason refusal"}
	if details != nil && details.Category != "" {
		parts[0] += " (" + details.Category + ")"
	}
	if details != nil && details.Explanation != "" {
		parts = append(parts, details.Explanation)
	}
	if t := strings.TrimSpace(text); t != "" {
		parts = append(parts, "the model wrote: "+truncate(t, 500))
	}
	return strings.Join(parts, ": ")
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
