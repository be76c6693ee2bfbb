package job

import (
	"errors"
	"fmt"

	"github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
)

// The wire format of an outcome (RESULTS and DLQ messages, stored payloads)
// is the Outcome's JSON encoding, read and written by
// github.com/go-json-experiment/json with these options.
//
// Encoding is compact, one line whatever the model or the producer wrote:
// the data and the job are copied from the model's answer and the submitted
// message as they are spelled (numbers too) but without their whitespace,
// and U+2028 and U+2029, which some line readers take for line breaks, are
// escaped. Invalid UTF-8 in a model's raw output becomes U+FFFD, as
// encoding/json writes it, instead of failing the outcome. A member the
// data or the job spells twice stays twice: it is JSON (names SHOULD be
// unique, RFC 8259), the job parser and the validator read it with the
// last one counting, as encoding/json does, and an outcome that failed to
// encode would be retried with a model call each time.
//
// Decoding takes any outcome encoding/json would have written or read: a
// member given twice counts once (the last), invalid UTF-8 reads as U+FFFD.
// Member names match exactly; a member of no field is ignored (and so never
// reaches the index).

// EncodeOptions are the options outcomes are encoded with, for writers of
// the same format (the index's payloads).
func EncodeOptions() json.Options { return encodeOpts }

// DecodeOptions are the options outcomes are decoded with, for readers of
// the same format.
func DecodeOptions() json.Options { return decodeOpts }

// The options joined once (JoinOptions allocates); never changed.
var (
	encodeOpts = json.JoinOptions(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true), jsontext.EscapeForJS(true))
	decodeOpts = json.JoinOptions(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
)

// EncodeOutcome encodes o as the workers publish it: one compact JSON
// object. It fails on what JSON cannot hold: a temperature that is NaN or
// infinite, a time outside years 0-9999, data or a job that is not JSON.
func EncodeOutcome(o *Outcome) ([]byte, error) {
	b, err := json.Marshal(o, EncodeOptions())
	if err != nil {
		return nil, fmt.Errorf("encoding the outcome of job %s: %w", o.JobID, err)
	}
	return b, nil
}

// DecodeOutcome decodes one RESULTS or DLQ message and checks that it can be
// indexed. Its errors wrap ErrInvalidOutcome. The Outcome owns its bytes:
// data may be reused afterwards.
func DecodeOutcome(data []byte) (Outcome, error) {
	var o Outcome
	if err := json.Unmarshal(data, &o, DecodeOptions()); err != nil {
		return Outcome{}, fmt.Errorf("%w: decoding: %v", ErrInvalidOutcome, err)
	}
	if err := o.Check(); err != nil {
		return Outcome{}, err
	}
	return o, nil
}

// ErrInvalidOutcome is wrapped by the errors of DecodeOutcome and
// Outcome.Check for an outcome that cannot be indexed (no job id, unknown
// status). A sink should dead-end such a message (term it) rather than
// retry it.
var ErrInvalidOutcome = errors.New("invalid outcome")

// Check reports whether o can be indexed: it has a job id, a status of
// StatusSucceeded or StatusDeadLettered and a run >= 0. Its errors wrap
// ErrInvalidOutcome.
func (o *Outcome) Check() error {
	switch {
	case o.JobID == "":
		return fmt.Errorf("%w: no job_id", ErrInvalidOutcome)
	case o.Status != StatusSucceeded && o.Status != StatusDeadLettered:
		return fmt.Errorf("%w: job %s: status %q is neither %q nor %q", ErrInvalidOutcome, o.JobID, o.Status, StatusSucceeded, StatusDeadLettered)
	case o.Run < 0:
		return fmt.Errorf("%w: job %s: negative run %d", ErrInvalidOutcome, o.JobID, o.Run)
	}
	return nil
}
