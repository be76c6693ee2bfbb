// Package sanitize turns raw model text into JSON bytes, repairing what models
// really emit and refusing what cannot be repaired honestly.
//
// It owns one call, [Clean], which the heal loop makes on every model output:
//
//	res, err := sanitize.Clean(raw)
//	switch {
//	case errors.Is(err, sanitize.ErrTruncated): // ended inside a value: not healable by retry
//	case errors.Is(err, sanitize.ErrNoJSON):    // refusal, apology, prose, empty fence
//	case errors.Is(err, sanitize.ErrUnrepairable): // JSON-like, but repairing would be a guess
//	case err == nil:
//		// res.JSON is valid JSON; res.Stages names the repairs, for the trace
//	}
//
// Errors are *[SyntaxError] values carrying the byte offset and the reason.
//
// # Fast path
//
// Valid JSON is checked once with encoding/json.Valid and returned as a
// sub-slice of the input, trimmed of surrounding whitespace: no copy, no
// allocation, no stages. The one exception is a JSON string whose content is
// itself a JSON object or array ("{\"a\":1}"): it is decoded and recorded as
// [StageDoubleEncoded].
//
// # Repair
//
// Anything else goes through a single left-to-right pass that finds the value
// (after <think> blocks, inside the first code fence that holds JSON, or among
// prose) and rewrites it as strict JSON, recording each kind of repair once
// under the Stage* names (see [Stages]): BOM and zero-width characters,
// fences, prose, comments, trailing and missing commas, missing colons, single
// and typographic quotes, unquoted keys and values, Python and JavaScript
// literals, control characters and invalid escapes in strings, unescaped
// inner quotes, string concatenation, wrappers such as ObjectId("x"),
// double-encoded JSON. The work is linear in the input: look-ahead is bounded
// by what is consumed next, and nesting is limited to encoding/json's 10000.
//
// # Policy
//
// The content of a string is never changed except to escape it; keys keep
// their order; numbers keep their spelling (1e-7, -0 and integers beyond 2^53
// survive; only .5 gains its leading zero). Nothing is invented: input that
// ends inside a string, number, object or array is [ErrTruncated] (fenced or
// not), a key without a value, elided items (...), an incomplete number (2.)
// or a mismatched bracket is [ErrUnrepairable], and a bare scalar is only
// accepted when it is valid JSON on its own.
package sanitize
