package ingest

import (
	"unicode/utf8"
	"unsafe"

	"github.com/llmpipeline/pipeline/internal/jsontext"
)

// parseJobFast decodes the common shape of a job in one pass: an object
// whose keys are exactly id, schema, input and instructions (no escapes),
// each with a string value, and nothing after it but whitespace. Anything
// else (metadata, unknown or differently cased keys, null or non-string
// values, invalid UTF-8, control characters, malformed JSON) returns
// ok = false and the caller decodes with encoding/json, which has the last
// word on what a job means. FuzzParseJobFast holds the two to the same
// result.
func parseJobFast(data []byte) (j Job, ok bool) {
	i := skipSpace(data, 0)
	if i >= len(data) || data[i] != '{' {
		return Job{}, false
	}
	i = skipSpace(data, i+1)
	if i < len(data) && data[i] == '}' {
		return Job{}, skipSpace(data, i+1) == len(data)
	}
	for {
		// key
		if i >= len(data) || data[i] != '"' {
			return Job{}, false
		}
		end := i + 1
		for end < len(data) && data[end] != '"' && data[end] != '\\' && data[end] >= 0x20 && data[end] < utf8.RuneSelf {
			end++
		}
		if end >= len(data) || data[end] != '"' {
			return Job{}, false
		}
		var field *string
		switch string(data[i+1 : end]) {
		case "id":
			field = &j.ID
		case "schema":
			field = &j.Schema
		case "input":
			field = &j.Input
		case "instructions":
			field = &j.Instructions
		default:
			return Job{}, false
		}
		i = skipSpace(data, end+1)
		if i >= len(data) || data[i] != ':' {
			return Job{}, false
		}
		i = skipSpace(data, i+1)
		s, next, ok := parseString(data, i)
		if !ok {
			return Job{}, false
		}
		*field = s
		i = skipSpace(data, next)
		if i >= len(data) {
			return Job{}, false
		}
		switch data[i] {
		case ',':
			i = skipSpace(data, i+1)
		case '}':
			return j, skipSpace(data, i+1) == len(data)
		default:
			return Job{}, false
		}
	}
}

func skipSpace(data []byte, i int) int {
	for i < len(data) {
		switch data[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// parseString decodes the JSON string starting at data[i] (its opening
// quote) and returns the index after its closing quote. Strings with
// control characters or invalid UTF-8 are not ok (encoding/json rejects
// the first and replaces the second; the caller falls back to it).
func parseString(data []byte, i int) (string, int, bool) {
	if i >= len(data) || data[i] != '"' {
		return "", 0, false
	}
	start := i + 1
	ascii := true
	k := start
	for k < len(data) {
		c := data[k]
		switch {
		case c == '"':
			if !ascii && !utf8.Valid(data[start:k]) {
				return "", 0, false
			}
			return string(data[start:k]), k + 1, true
		case c == '\\':
			return unescapeString(data, start, k)
		case c < 0x20:
			return "", 0, false
		case c >= utf8.RuneSelf:
			ascii = false
		}
		k++
	}
	return "", 0, false
}

// unescapeString decodes a string with escapes: data[start:k] needs none,
// data[k] is the first backslash. A lone surrogate is U+FFFD, as
// encoding/json has it.
func unescapeString(data []byte, start, k int) (string, int, bool) {
	end := k
	for end < len(data) && data[end] != '"' {
		switch {
		case data[end] < 0x20:
			return "", 0, false
		case data[end] == '\\':
			end++ // the escaped byte; AppendUnescaped checks it
		}
		end++
	}
	if end >= len(data) {
		return "", 0, false
	}
	out, _, ok := jsontext.AppendUnescaped(make([]byte, 0, end-start), data[start:end])
	if !ok || !utf8.Valid(out) {
		return "", 0, false
	}
	// out is never written again: the string shares it.
	return unsafe.String(unsafe.SliceData(out), len(out)), end + 1, true
}
