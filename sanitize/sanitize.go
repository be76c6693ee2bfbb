package sanitize

import "errors"

// Refusals. Callers test them with errors.Is.
var (
	// ErrTruncated: the input ends inside a string, number, object or array.
	// It is never completed: completing invents data.
	ErrTruncated = errors.New("truncated JSON")
	// ErrNoJSON: there is no JSON value in the input at all.
	ErrNoJSON = errors.New("no JSON found")
)

// Result is the cleaned JSON and the stages that were needed to get it, in
// the order they ran. Stages is empty when the input was already valid JSON.
type Result struct {
	JSON   []byte
	Stages []string
}
