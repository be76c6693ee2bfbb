package index

import (
	"bytes"
	"strings"

	"github.com/go-json-experiment/json/jsontext"

	"github.com/llmpipeline/pipeline/job"
)

// memberCutter cuts a top-level member out of JSON objects, reusing its
// decoder from one object to the next.
type memberCutter struct {
	r   bytes.Reader
	dec *jsontext.Decoder
}

// without returns the JSON object msg, a message job.EncodeOutcome wrote,
// without its top-level member name (msg itself when it has none), reading
// msg with jsontext's decoder for the member's bounds; ok is false when
// msg does not start as a JSON object. The other members keep their
// bytes, so it is what job.EncodeOutcome writes for the same outcome without
// that member.
func (c *memberCutter) without(msg []byte, name string) (string, bool) {
	c.r.Reset(msg)
	if c.dec == nil {
		c.dec = jsontext.NewDecoder(&c.r, job.DecodeOptions())
	} else {
		c.dec.Reset(&c.r, job.DecodeOptions())
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
