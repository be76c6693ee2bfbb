package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
	"github.com/llmpipeline/pipeline/llm/strict"
	"github.com/llmpipeline/pipeline/model"
)

// The chat-completions request is written by encoding/json; the response is
// read by the json v2 implementation (github.com/go-json-experiment/json)
// with the options that make it read as encoding/json does
// (case-insensitive field names, duplicate names and invalid UTF-8
// accepted), in half the time (BenchmarkOpenAICodec). For writing the
// request, v2 in that mode measured no faster than encoding/json.

// OpenAI speaks the OpenAI chat-completions protocol over HTTP: the public
// API or any compatible server (vLLM, Ollama, llama.cpp, LiteLLM). Safe for
// concurrent use.
type OpenAI struct {
	cfg Config
	c   caller
	url string
	own bool // the HTTP client is ours (Close releases its connections)

	// What the model does not take, known from its name and the base URL
	// (knownParams) or learned from a 400 once for the client's life, and
	// shared with the fleet through a ParamMemory (ShareParams): any
	// temperature but its default (OpenAI's reasoning models, gpt-5 and
	// the o-series, run at 1 only), and max_tokens for
	// max_completion_tokens.
	defaultTemperature atomic.Bool
	completionTokens   atomic.Bool
	params             paramShare

	// strict holds the strict form of each schema sent with json_schema;
	// warned, the schemas already logged as having none.
	strict *strict.Cache
	warned sync.Map
}

var _ model.Model = (*OpenAI)(nil)

// NewOpenAI returns an OpenAI-compatible client. Config's zero fields take
// their defaults; a broken Config is an error wrapping ErrConfig.
func NewOpenAI(cfg Config) (*OpenAI, error) {
	own := cfg.HTTPClient == nil
	cfg = cfg.withDefaults(ProviderOpenAI)
	if err := cfg.validate(ProviderOpenAI); err != nil {
		return nil, err
	}
	o := &OpenAI{cfg: cfg, url: cfg.endpoint("/chat/completions"), own: own, strict: strict.NewCache(strict.OpenAI)}
	o.c = openAICaller(cfg)
	o.knownParams()
	return o, nil
}

// openAICaller is the HTTP caller of the OpenAI-compatible endpoints, the
// chat completions and the batch API alike.
func openAICaller(cfg Config) caller {
	return caller{
		provider: ProviderOpenAI,
		cfg:      cfg,
		header: func(h http.Header) {
			if cfg.APIKey != "" {
				h.Set("Authorization", "Bearer "+cfg.APIKey)
			}
		},
		errMessage: openAIErrorMessage,
		errParam:   openAIRefusedParam,
	}
}

// Provider returns "openai".
func (o *OpenAI) Provider() string { return ProviderOpenAI }

// Close releases the idle connections of the client's own HTTP client (not
// of one passed in Config). Safe to call twice.
func (o *OpenAI) Close() error {
	if o.own {
		o.cfg.HTTPClient.CloseIdleConnections()
	}
	return nil
}

type openAIRequest struct {
	Model               string            `json:"model"`
	Messages            []model.Message   `json:"messages"`
	Temperature         *float64          `json:"temperature,omitempty"`
	MaxTokens           int               `json:"max_tokens,omitempty"`
	MaxCompletionTokens int               `json:"max_completion_tokens,omitempty"`
	Format              *openAIFormat     `json:"response_format,omitempty"`
	Tools               []openAITool      `json:"tools,omitempty"`
	ToolChoice          *openAIToolChoice `json:"tool_choice,omitempty"`
}

// openAIToolTurns is a request whose conversation holds tool calls: the
// messages take the tool-call shape (openAIMessage), every other member is
// the embedded request's (encoding/json lets the shallower messages win).
type openAIToolTurns struct {
	*openAIRequest
	Messages []openAIMessage `json:"messages"`
}

type openAIFormat struct {
	Type       string            `json:"type"`
	JSONSchema *openAIJSONSchema `json:"json_schema,omitempty"`
}

type openAIJSONSchema struct {
	Name   string          `json:"name"`
	Schema json.RawMessage `json:"schema"`
	Strict bool            `json:"strict"`
}

// openAITool is one entry of tools: a function whose parameters are the
// job's schema.
type openAITool struct {
	Type     string         `json:"type"` // "function"
	Function openAIFunction `json:"function"`
}

type openAIFunction struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

// openAIToolChoice forces the call: {"type":"function","function":{"name":...}}.
type openAIToolChoice struct {
	Type     string `json:"type"`
	Function struct {
		Name string `json:"name"`
	} `json:"function"`
}

// openAIMessage is a turn in the tool-call shape: an assistant turn with
// tool_calls and a null content, or a "tool" turn answering one.
type openAIMessage struct {
	Role       string           `json:"role"`
	Content    *string          `json:"content"`
	ToolCalls  []openAIToolCall `json:"tool_calls,omitempty"`
	ToolCallID string           `json:"tool_call_id,omitempty"`
}

type openAIToolCall struct {
	ID       string `json:"id"`
	Type     string `json:"type"` // "function"
	Function struct {
		Name      string `json:"name"`
		Arguments string `json:"arguments"` // JSON text
	} `json:"function"`
}

type openAIResponse struct {
	Choices []openAIChoice `json:"choices"`
	Usage   struct {
		PromptTokens        int `json:"prompt_tokens"`
		CompletionTokens    int `json:"completion_tokens"`
		PromptTokensDetails struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
		CompletionTokensDetails struct {
			ReasoningTokens int `json:"reasoning_tokens"`
		} `json:"completion_tokens_details"`
	} `json:"usage"`
	Error *openAIErrorBody `json:"error"`
}

type openAIChoice struct {
	Message struct {
		Content   openAIContent    `json:"content"`
		Refusal   *string          `json:"refusal"`
		ToolCalls []openAIToolCall `json:"tool_calls"`
	} `json:"message"`
	FinishReason *string `json:"finish_reason"`
}

// openAIContent is an answer's content: a string, null, or an array of
// parts, as Mistral's reasoning models and some compatible servers send it
// ([{"type":"thinking","thinking":[...]},{"type":"text","text":"..."}]):
// then the answer is its text parts, joined, and the reasoning is not.
type openAIContent string

// UnmarshalJSON reads a content as encoding/json sees it (the test's
// reference parse); UnmarshalJSONFrom is the same for json v2.
func (c *openAIContent) UnmarshalJSON(b []byte) error {
	if b := bytes.TrimLeft(b, " \t\r\n"); len(b) > 0 && b[0] == '[' {
		var parts []openAIContentPart
		if err := json.Unmarshal(b, &parts); err != nil {
			return err
		}
		*c = joinText(parts)
		return nil
	}
	var s *string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	if s != nil {
		*c = openAIContent(*s)
	}
	return nil
}

func (c *openAIContent) UnmarshalJSONFrom(dec *jsontext.Decoder) error {
	switch dec.PeekKind() {
	case '[':
		var parts []openAIContentPart
		if err := jsonv2.UnmarshalDecode(dec, &parts); err != nil {
			return err
		}
		*c = joinText(parts)
		return nil
	case 'n':
		_, err := dec.ReadToken()
		return err
	case '"':
		tok, err := dec.ReadToken()
		if err != nil {
			return err
		}
		*c = openAIContent(tok.String())
		return nil
	}
	var s string
	if err := jsonv2.UnmarshalDecode(dec, &s); err != nil {
		return err
	}
	*c = openAIContent(s)
	return nil
}

// openAIContentPart is one part of an array content.
type openAIContentPart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

func joinText(parts []openAIContentPart) openAIContent {
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return openAIContent(b.String())
}

type openAIErrorBody struct {
	Message string `json:"message"`
}

// Complete sends one chat completion, with the heal loop's temperature and
// max_tokens: every OpenAI-compatible server (vLLM, Ollama, llama.cpp) and
// OpenAI's non-reasoning models take them. A model that refuses either
// with a 400 naming it (OpenAI's reasoning models take only their default
// temperature, 1, and want max_completion_tokens) gets the call again
// without it, and every later call of the client is sent so: no job is
// dead-lettered for it, and the response's Temperature says the answer
// came at the default.
//
// In tool mode (FormatTool, with a schema in the request) it sends one
// function whose parameters are the schema, forced by tool_choice, and no
// response_format; the function is not strict, so any schema is accepted
// (the heal loop validates the arguments). A heal turn after an answer that
// came as a tool call is sent as the assistant's tool call followed by a
// "tool" message with the diagnostics, as the API requires.
//
// In json_schema mode the schema sent is the strict form of the job's
// (package llm/strict): every object closed, every property required, optional
// ones nullable, the keywords strict mode refuses moved into
// descriptions; the answer's nulls for optional properties are dropped
// before it is returned, so the heal loop judges it against the job's own
// schema. A schema without a strict form is sent as it is, strict false.
func (o *OpenAI) Complete(ctx context.Context, req model.Request) (model.Response, error) {
	o.recall(ctx, false)
	for {
		body, data, limit, back, err := o.request(req)
		if err != nil {
			return model.Response{}, err
		}
		resp, err := o.c.post(ctx, o.url, data, limit, parseOpenAIResponse)
		if err != nil && o.learn(ctx, err, body) {
			continue // each pass drops a parameter: two at most
		}
		if err != nil && o.strictRefused(err, body, req) {
			continue // once: the schema now goes not strict
		}
		if err == nil && body.Temperature == nil {
			one := 1.0
			resp.Temperature = &one
		}
		if err == nil && back != nil && resp.ToolCallID == "" {
			resp.Content = back.Answer(resp.Content)
		}
		return resp, err
	}
}

// learn reads err for a 400 refusing a parameter the client can do
// without (model.Error.Param): from now on no request holds it. It reports
// whether body held it, so that the call is worth sending again. (A batch
// reads its answers through a client of its own: that client learns from
// the refusal it reads, and the batch's later lines are written without
// the parameter.)
func (o *OpenAI) learn(ctx context.Context, err error, body *openAIRequest) bool {
	var he *model.Error
	if !errors.As(err, &he) {
		return false
	}
	var flag *atomic.Bool
	var held bool
	switch he.Param {
	case "temperature":
		flag, held = &o.defaultTemperature, body.Temperature != nil
	case "max_tokens":
		flag, held = &o.completionTokens, body.MaxTokens != 0
	default:
		return false
	}
	if !flag.Swap(true) {
		o.cfg.Logger.Warn("the model does not take this parameter: sent without it from now on",
			slog.String("provider", ProviderOpenAI), slog.String("model", o.cfg.Model),
			slog.String("param", he.Param), slog.String("error", he.Message))
		o.remember(ctx, he.Param)
	}
	return held
}

// request builds the body of a call for req, as the client now sends it,
// and returns it encoded with its completion limit (0: none) and, in
// json_schema mode, the way back from an answer to the strict schema sent
// (nil: none needed).
func (o *OpenAI) request(req model.Request) (*openAIRequest, wire, int, *strict.Restore, error) {
	body := &openAIRequest{
		Model:     o.cfg.Model,
		Messages:  req.Messages,
		MaxTokens: req.MaxTokens,
	}
	if !o.defaultTemperature.Load() {
		t := req.Temperature
		body.Temperature = &t
	}
	if body.MaxTokens == 0 {
		body.MaxTokens = o.cfg.MaxTokens
	}
	limit := body.MaxTokens
	if o.completionTokens.Load() {
		body.MaxCompletionTokens, body.MaxTokens = body.MaxTokens, 0
	}
	tool := false
	var back *strict.Restore
	switch o.cfg.ResponseFormat {
	case FormatJSONObject:
		body.Format = &openAIFormat{Type: "json_object"}
	case FormatJSONSchema:
		if len(req.Schema) == 0 {
			body.Format = &openAIFormat{Type: "json_object"}
			break
		}
		ss := o.strict.Of(req.Schema)
		if !ss.Strict {
			if _, seen := o.warned.LoadOrStore(string(req.Schema), true); !seen {
				o.cfg.Logger.Warn("the schema has no strict form: sent with strict false",
					slog.String("provider", ProviderOpenAI), slog.String("schema", req.SchemaID), slog.String("reason", ss.Why))
			}
		}
		back = ss.Back
		body.Format = &openAIFormat{Type: "json_schema", JSONSchema: &openAIJSONSchema{Name: toolName(req.SchemaID), Schema: ss.JSON, Strict: ss.Strict}}
	case FormatTool:
		if len(req.Schema) == 0 {
			body.Format = &openAIFormat{Type: "json_object"}
			break
		}
		tool = true
		name := toolName(req.SchemaID)
		body.Tools = []openAITool{{Type: "function", Function: openAIFunction{Name: name, Description: toolDescription, Parameters: req.Schema}}}
		body.ToolChoice = &openAIToolChoice{Type: "function"}
		body.ToolChoice.Function.Name = name
	}
	var data []byte
	var err error
	marks := newFileMarks()
	switch {
	case hasFiles(req.Messages):
		name := ""
		if tool {
			name = body.ToolChoice.Function.Name
		}
		data, err = json.Marshal(openAIFileTurns{openAIRequest: body, Messages: openAIFileMessages(req.Messages, tool, name, marks)})
	case tool && hasToolTurns(req.Messages):
		data, err = json.Marshal(openAIToolTurns{openAIRequest: body, Messages: openAIToolMessages(req.Messages, body.ToolChoice.Function.Name)})
	default:
		data, err = encodeOpenAIRequest(body)
	}
	var w wire
	if err == nil {
		w, err = marks.splice(data)
	}
	if err != nil {
		return nil, wire{}, 0, nil, &model.Error{Kind: model.KindRequest, Provider: ProviderOpenAI, Message: "encoding the request: " + err.Error()}
	}
	return body, w, limit, back, nil
}

// strictRefused reads err for a 400 refusing the strict schema body held
// (a limit of strict mode the transform cannot see: too many properties
// or enum values, nesting too deep, a pattern it cannot compile): from now
// on the client sends that schema as it is, strict false, and says so
// once. It reports whether the call is worth sending again.
func (o *OpenAI) strictRefused(err error, body *openAIRequest, req model.Request) bool {
	var he *model.Error
	if !errors.As(err, &he) || he.StatusCode != http.StatusBadRequest || !strings.Contains(he.Message, "Invalid schema for response_format") {
		return false
	}
	if body.Format == nil || body.Format.JSONSchema == nil || !body.Format.JSONSchema.Strict {
		return false
	}
	o.strict.Refused(req.Schema, "the provider refused its strict form: "+he.Message)
	o.warned.Store(string(req.Schema), true)
	o.cfg.Logger.Warn("the provider refused the schema's strict form: sent with strict false from now on",
		slog.String("provider", ProviderOpenAI), slog.String("schema", req.SchemaID), slog.String("error", he.Message))
	return true
}

// openAIToolMessages writes a conversation in the tool-call shape: an
// assistant turn with a ToolCallID becomes a call of the tool named name
// with its content as the arguments, the user turn answering it a "tool"
// message for that call; other turns stay as they are.
func openAIToolMessages(msgs []model.Message, name string) []openAIMessage {
	out := make([]openAIMessage, len(msgs))
	for i := range msgs {
		m := &msgs[i]
		switch {
		case m.ToolCallID != "" && m.Role == model.RoleAssistant:
			call := openAIToolCall{ID: m.ToolCallID, Type: "function"}
			call.Function.Name, call.Function.Arguments = name, m.Content
			out[i] = openAIMessage{Role: m.Role, ToolCalls: []openAIToolCall{call}}
		case m.ToolCallID != "" && m.Role == model.RoleUser:
			out[i] = openAIMessage{Role: "tool", Content: &m.Content, ToolCallID: m.ToolCallID}
		default:
			out[i] = openAIMessage{Role: m.Role, Content: &m.Content}
		}
	}
	return out
}

// encodeOpenAIRequest writes the request body.
func encodeOpenAIRequest(body *openAIRequest) ([]byte, error) {
	return json.Marshal(body)
}

// parseOpenAIResponse reads a 2xx chat-completions body. The answer is the
// first tool call's arguments when the message holds tool calls (tool
// mode), else its content; a non-empty refusal (structured outputs) is
// reported in Response.Refusal. Members it does not know (logprobs,
// system_fingerprint, ...) are skipped.
func parseOpenAIResponse(b []byte) (model.Response, *failure) {
	var r openAIResponse
	if err := jsonv2.Unmarshal(b, &r, jsonv1.DefaultOptionsV1()); err != nil {
		return model.Response{}, &failure{kind: model.KindTransport, status: http.StatusOK, message: "unreadable response body: " + truncate(string(b), 200)}
	}
	if len(r.Choices) == 0 {
		msg := "response has no choices"
		if r.Error != nil && r.Error.Message != "" {
			msg = r.Error.Message
		}
		return model.Response{}, &failure{kind: model.KindTransport, status: http.StatusOK, message: msg}
	}
	ch := r.Choices[0]
	var out model.Response
	out.Content = string(ch.Message.Content)
	if calls := ch.Message.ToolCalls; len(calls) > 0 {
		out.Content = calls[0].Function.Arguments
		out.ToolCallID = calls[0].ID
	}
	if ch.Message.Refusal != nil {
		out.Refusal = *ch.Message.Refusal
	}
	if ch.FinishReason != nil {
		out.RawFinishReason = *ch.FinishReason
	}
	out.FinishReason = finishOf(out.RawFinishReason)
	out.Usage = model.Usage{
		PromptTokens:     r.Usage.PromptTokens,
		CompletionTokens: r.Usage.CompletionTokens,
		CachedTokens:     r.Usage.PromptTokensDetails.CachedTokens,
		ReasoningTokens:  r.Usage.CompletionTokensDetails.ReasoningTokens,
	}
	return out, nil
}

// openAIRefusedParam names the parameter a 400's body says the model does
// not take, of those the client can do without: "temperature" or
// "max_tokens" ("" for any other error). OpenAI names it in error.param
// with the code unsupported_value or unsupported_parameter; compatible
// servers may say it in the message only ("invalid temperature: only 1 is
// allowed for this model").
func openAIRefusedParam(body []byte) string {
	var e struct {
		Error struct {
			Message string `json:"message"`
			Param   string `json:"param"`
			Code    any    `json:"code"`
		} `json:"error"`
		Message string `json:"message"`
	}
	if json.Unmarshal(body, &e) != nil {
		return ""
	}
	msg := strings.ToLower(e.Error.Message + " " + e.Message)
	code, _ := e.Error.Code.(string)
	for _, p := range []string{"temperature", "max_tokens"} {
		named := e.Error.Param == p || strings.Contains(msg, p)
		refused := code == "unsupported_value" || code == "unsupported_parameter" ||
			strings.Contains(msg, "unsupported") || strings.Contains(msg, "not supported") ||
			strings.Contains(msg, "only 1 is allowed") || strings.Contains(msg, "only the default")
		if named && refused {
			return p
		}
	}
	return ""
}

// openAIErrorMessage reads {"error":{"message":...}} (or a bare string
// error, as some compatible servers send), else the start of the body.
func openAIErrorMessage(body []byte) string {
	var e struct {
		Error json.RawMessage `json:"error"`
	}
	if json.Unmarshal(body, &e) == nil && len(e.Error) > 0 {
		var obj struct {
			Message string `json:"message"`
			Type    string `json:"type"`
			Code    any    `json:"code"`
		}
		if json.Unmarshal(e.Error, &obj) == nil && obj.Message != "" {
			return truncate(obj.Message, 500)
		}
		var s string
		if json.Unmarshal(e.Error, &s) == nil && s != "" {
			return truncate(s, 500)
		}
	}
	return truncate(string(body), 300)
}
