package heal

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// Model is what the loop calls: one chat completion. Implementations live in
// package llm. A Model retries transport failures itself (on its own budget,
// never visible to the loop as attempts) and returns an *Error for failures it
// could not get past.
type Model interface {
	Complete(ctx context.Context, req Request) (Response, error)
}

// Message is one turn of the conversation.
type Message struct {
	Role    string `json:"role"` // "system", "user" or "assistant"
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
	// or a sentence saying it refused. The loop ends the job as
	// job.ClassRefused; it is never healed or retried.
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

// ErrorKind says how the loop treats a model failure.
type ErrorKind string

const (
	// KindTransport: timeouts, connection errors, 408, 409, 429, 5xx, after
	// the model's own retries. Not the job's fault: the job is retried later.
	KindTransport ErrorKind = "transport"
	// KindAuth: 401, 403. The worker stops taking jobs.
	KindAuth ErrorKind = "auth"
	// KindRequest: 400, 422 and the like: the provider refused this
	// request (its context window exceeded, say). Dead-lettered, not retried.
	KindRequest ErrorKind = "request_error"
	// KindNotFound: 404, 405, 501: the provider has no such endpoint or model
	// (a wrong base URL or model name), whatever the job. The next model
	// of a chain takes the job; without one the worker stops taking jobs
	// and dead-letters none.
	KindNotFound ErrorKind = "not_found"
	// KindNoCredit: the provider's account has no credit left (OpenAI's
	// 429 insufficient_quota, Anthropic's 402 billing_error, any 402).
	// Every job would get the same answer: as for KindAuth the worker
	// stops taking jobs and dead-letters none.
	KindNoCredit ErrorKind = "no_credit"
)

// Error is a model failure the loop branches on. Message must never hold a
// secret.
type Error struct {
	Kind       ErrorKind
	Provider   string // "openai", "anthropic", "sim"
	StatusCode int    // HTTP status, 0 when none
	Message    string // the provider's message, or the transport error
	// Retries is how many transport retries were spent before giving up.
	Retries int
	// KeyEnv names the environment variable holding the key (for auth errors).
	KeyEnv string
	// Param is the request parameter a request_error says the model does
	// not take ("temperature", "max_tokens"), when the provider names one.
	Param string
}

func (e *Error) Error() string {
	s := fmt.Sprintf("%s: %s", e.Provider, e.Kind)
	if e.StatusCode != 0 {
		s += fmt.Sprintf(" (HTTP %d)", e.StatusCode)
	}
	if e.Message != "" {
		s += ": " + e.Message
	}
	if e.Kind == KindAuth && e.KeyEnv != "" {
		s += " (check " + e.KeyEnv + ")"
	}
	if e.Kind == KindNoCredit {
		s += " (check the billing and credit of the provider account"
		if e.KeyEnv != "" {
			s += " of the key in " + e.KeyEnv
		}
		s += ")"
	}
	return s
}

// KindOf returns the kind of a model error, or "" when err is not an *Error.
func KindOf(err error) ErrorKind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return ""
}
