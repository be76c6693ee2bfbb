package model

import (
	"errors"
	"fmt"
)

// ErrorKind says what kind of failure a model error is; the heal loop maps
// each kind to a failure class.
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
