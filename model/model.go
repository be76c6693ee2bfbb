package model

import (
	"context"
	"encoding/json"
	"io"
	"strings"
	"time"
)

// Model is one chat completion. Implementations live in package llm. A
// Model retries transport failures itself (on its own budget, never visible
// to the loop as attempts) and returns an *Error for failures it could not
// get past.
type Model interface {
	Complete(ctx context.Context, req Request) (Response, error)
}

// Func adapts a function to the Model interface.
type Func func(ctx context.Context, req Request) (Response, error)

// Complete calls f.
func (f Func) Complete(ctx context.Context, req Request) (Response, error) { return f(ctx, req) }

var _ Model = Func(nil)

// Roles of the conversation.
const (
	RoleSystem    = "system"
	RoleUser      = "user"
	RoleAssistant = "assistant"
)

// Message is one turn of the conversation.
type Message struct {
	Role    string `json:"role"` // RoleSystem, RoleUser or RoleAssistant
	Content string `json:"content"`
	// ToolCallID ties a heal turn to a tool call, for providers asked to
	// answer through a forced tool call (--response-format tool). On an
	// assistant turn it is the id of the tool call whose arguments Content
	// holds; on the user turn after it, the id of the call that turn
	// answers (its Content is the call's result: the diagnostics). Empty
	// for plain text turns. Providers translate it into their own shape
	// (OpenAI tool_calls and a tool message, Anthropic tool_use and
	// tool_result blocks); it is never sent under this name.
	ToolCallID string `json:"-"`
	// Files, on the task's user turn, are the job's images and PDFs: each
	// provider sends them in its native form (OpenAI image_url and file
	// parts, Anthropic image and document blocks) before Content. Heal
	// turns carry the task turn, files included, as it was.
	Files []File `json:"-"`
}

// Request is one model call. Messages must not be modified by the Model.
type Request struct {
	Messages    []Message
	Temperature float64
	MaxTokens   int // 0: the provider's default
	// Schema is the job's JSON Schema, for providers that can constrain
	// output to it (OpenAI json_schema response format) and for the simulator.
	Schema   json.RawMessage
	SchemaID string
	// JobID and Attempt identify the call (the simulator seeds from them).
	JobID   string
	Attempt int
}

// Finish reasons, normalised from each provider's spelling.
const (
	FinishStop   = "stop"
	FinishLength = "length" // truncated: max tokens reached
	FinishOther  = "other"
)

// Response is one model answer.
type Response struct {
	// Content is the answer's text: the message text, or the arguments of
	// the forced tool call when the provider answered through one.
	Content string
	// ToolCallID is the id of the tool call that carried Content, when the
	// answer came as one; the loop hands it back on the heal turn (see
	// Message.ToolCallID).
	ToolCallID string
	// Refusal is the model's refusal, when it declined the task (OpenAI
	// message.refusal, Anthropic stop_reason "refusal"): the text it gave,
	// or a sentence saying it refused. The heal loop ends the job as
	// refused; it is never healed or retried.
	Refusal string
	// FinishReason is normalised (FinishStop, FinishLength, FinishOther);
	// RawFinishReason is the provider's own word.
	FinishReason    string
	RawFinishReason string
	Usage           Usage
	Latency         time.Duration // of the successful call
	// TransportRetries counts the calls that failed with a transport error
	// before this one succeeded.
	TransportRetries int
	// Temperature, when set, is the temperature the answer came at instead
	// of the request's: the model takes only its default and was sent none.
	// The attempt records it.
	Temperature *float64
}

// Usage is token accounting for one attempt, as the provider reported it.
// PromptTokens counts every input token, cached ones included; CachedTokens
// is the part read from the provider's prompt cache (OpenAI
// prompt_tokens_details.cached_tokens, Anthropic cache_read_input_tokens)
// and CacheWriteTokens the part written to it (Anthropic
// cache_creation_input_tokens; OpenAI reports none), each priced apart.
type Usage struct {
	PromptTokens     int `json:"prompt_tokens"`
	CompletionTokens int `json:"completion_tokens"`
	CachedTokens     int `json:"cached_tokens,omitempty"`
	CacheWriteTokens int `json:"cache_write_tokens,omitempty"`
	ReasoningTokens  int `json:"reasoning_tokens,omitempty"`
}

// Total is prompt plus completion tokens.
func (u Usage) Total() int { return u.PromptTokens + u.CompletionTokens }

// Add returns the sum of u and v, field by field.
func (u Usage) Add(v Usage) Usage {
	return Usage{
		PromptTokens:     u.PromptTokens + v.PromptTokens,
		CompletionTokens: u.CompletionTokens + v.CompletionTokens,
		CachedTokens:     u.CachedTokens + v.CachedTokens,
		CacheWriteTokens: u.CacheWriteTokens + v.CacheWriteTokens,
		ReasoningTokens:  u.ReasoningTokens + v.ReasoningTokens,
	}
}

// File is one file (an image or a PDF) of a job as a provider sends it:
// its description, and how to read its bytes. A provider reads them once
// per call, as it writes the request (never holding them whole), and
// again for a transport retry. Width and Height (an image's) and Pages (a
// PDF's) are 0 when not known; EstimateTokens uses them.
type File struct {
	Name      string
	MediaType string
	Size      int64
	SHA256    string
	Width     int
	Height    int
	Pages     int
	// Open reads the file from its store; the reader fails on its last
	// Read when the content does not match SHA256.
	Open func(ctx context.Context) (io.ReadCloser, error)
}

// Image reports whether f is an image (else a PDF).
func (f File) Image() bool { return strings.HasPrefix(f.MediaType, "image/") }
