package sanitize

import (
	"errors"
	"fmt"
)

// Refusals. Callers test them with errors.Is.
var (
	// ErrTruncated: the input ends inside a string, number, object or array.
	// It is never completed: completing invents data.
	ErrTruncated = errors.New("truncated JSON")
	// ErrNoJSON: there is no JSON value in the input at all.
	ErrNoJSON = errors.New("no JSON found")
	// ErrUnrepairable: there is JSON-like text, but repairing it would mean
	// guessing (a missing value, elided items, a broken escape, mismatched
	// brackets, nesting too deep). The heal loop treats it like any grammar
	// failure: the model gets another turn.
	ErrUnrepairable = errors.New("unrepairable JSON")
)

// Result is the cleaned JSON and the stages that were needed to get it, in
// the order they ran. Stages is empty when the input was already valid JSON.
//
// JSON may share memory with the input (always on the fast path, where the
// input is already valid JSON and JSON is a trimmed sub-slice of it): the
// caller must not modify the input while it uses JSON.
type Result struct {
	JSON   []byte
	Stages []string
}

// SyntaxError carries where and why Clean refused. It wraps one of
// ErrTruncated, ErrNoJSON or ErrUnrepairable, so callers branch with
// errors.Is and still get the offset for diagnostics.
type SyntaxError struct {
	Offset int    // byte offset in the raw input where the problem was found
	Reason string // what was wrong there, lowercase
	Kind   error  // ErrTruncated, ErrNoJSON or ErrUnrepairable
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("%v at offset %d: %s", e.Kind, e.Offset, e.Reason)
}

// Unwrap returns the sentinel kind.
func (e *SyntaxError) Unwrap() error { return e.Kind }
