// Package exit is pipeline's exit codes and the error that carries one
// from the assembly (internal/app) through the CLI to the process's exit
// status. The codes are documented in the README and in `pipeline --help`.
package exit

import (
	"errors"
	"fmt"
)

// Exit codes.
const (
	OK       = 0 // success
	Negative = 1 // the command ran and the answer is no: invalid output, refusal, lint findings, rejected lines, jobs left
	Usage    = 2 // bad flag, argument or input file
	Runtime  = 3 // configuration or runtime failure: NATS, SQLite, a schema that does not compile, no such model endpoint or model
	Auth     = 4 // the model provider rejected the credentials; the worker stopped
	Budget   = 5 // run: the budget (--budget-usd, --budget-tokens) is reached; the jobs not started stay queued
	NoCredit = 6 // run: the provider account has no credit (429 insufficient_quota, 402 billing_error); the worker stopped, the jobs stay queued
)

// Error is an error with the exit code it ends the command with.
type Error struct {
	Code int
	Err  error
}

// Error is the wrapped error's message.
func (e *Error) Error() string { return e.Err.Error() }

// Unwrap is the wrapped error.
func (e *Error) Unwrap() error { return e.Err }

// Fail is a new error with code.
func Fail(code int, format string, args ...any) error {
	return &Error{Code: code, Err: fmt.Errorf(format, args...)}
}

// WithCode gives err code, unless it carries one already; nil stays nil.
func WithCode(code int, err error) error {
	if err == nil {
		return nil
	}
	var ee *Error
	if errors.As(err, &ee) {
		return err
	}
	return &Error{Code: code, Err: err}
}

// CodeOf is the code err carries, or def.
func CodeOf(err error, def int) int {
	var ee *Error
	if errors.As(err, &ee) {
		return ee.Code
	}
	return def
}
