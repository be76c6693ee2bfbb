package dlq

import (
	"bytes"
	"fmt"
	"strings"

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
func encodeOptions() json.Options { return encodeOpts }

func decodeOptions() json.Options { return decodeOpts }

// The options joined once (JoinOptions allocates); never changed.
var (
	encodeOpts = json.JoinOptions(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true), jsontext.EscapeForJS(true))
	decodeOpts = json.JoinOptions(jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
)

// EncodeOutcome encodes o as the workers publish it: one compact JSON
// object. It fails on what JSON cannot hold: a temperature that is NaN or
// infinite, a time outside years 0-9999, data or a job that is not JSON.
func EncodeOutcome(o *Outcome) ([]byte, error) {
	b, err := json.Marshal(o, encodeOptions())
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
	if err := json.Unmarshal(data, &o, decodeOptions()); err != nil {
		return Outcome{}, fmt.Errorf("%w: decoding: %v", ErrInvalidOutcome, err)
	}
	if err := check(&o); err != nil {
		return Outcome{}, err
	}
	return o, nil
}

// memberCutter cuts a top-level member out of JSON objects, reusing its
// decoder from one object to the next.
type memberCutter struct {
	r   bytes.Reader
	dec *jsontext.Decoder
}

// without returns the JSON object msg, a message EncodeOutcome wrote,
// without its top-level member name (msg itself when it has none), reading
// msg with jsontext's decoder for the member's bounds; ok is false when
// msg does not start as a JSON object. The other members keep their
// bytes, so it is what EncodeOutcome writes for the same outcome without
// that member.
func (c *memberCutter) without(msg []byte, name string) (string, bool) {
	c.r.Reset(msg)
	if c.dec == nil {
		c.dec = jsontext.NewDecoder(&c.r, decodeOptions())
	} else {
		c.dec.Reset(&c.r, decodeOptions())
	}
	dec := c.dec
	if tok, err := dec.ReadToken(); err != nil || tok.Kind() != '{' {
		return "", false
	}
	first := true
	for dec.PeekKind() == '"' {
		start := int(dec.InputOffset()) // after the previous member, before its comma
		tok, err := dec.ReadToken()
		if err != nil {
			return "", false
		}
		if tok.String() != name {
			if err := dec.SkipValue(); err != nil {
				return "", false
			}
			first = false
			continue
		}
		if err := dec.SkipValue(); err != nil {
			return "", false
		}
		end := int(dec.InputOffset())
		if first {
			// The first member: the comma to drop is the one after it.
			start = bytes.IndexByte(msg[:end], '"')
			if end < len(msg) && msg[end] == ',' {
				end++
			}
		}
		var b strings.Builder
		b.Grow(len(msg) - (end - start))
		b.Write(msg[:start])
		b.Write(msg[end:])
		return b.String(), true
	}
	return string(msg), true
}
