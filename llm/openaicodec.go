package llm

import (
	"bytes"
	"encoding/binary"
	"math"
	"math/bits"
	"slices"
	"strconv"
	"sync/atomic"
	"unicode/utf8"
	"unsafe"

	"github.com/llmpipeline/pipeline/heal"
	"github.com/llmpipeline/pipeline/internal/jsontext"
)

// The chat-completions request and response are encoded and decoded by
// hand: with encoding/json they cost about 13 and 20 µs a call under load
// (a CPU profile of 1024 concurrent jobs), mostly reflection and its
// scanner's per-byte work over the prompt and the answer. The hand versions
// write and read exactly what encoding/json would, and give up (ok = false)
// wherever they could not be sure of that; the caller then uses
// encoding/json. FuzzOpenAIRequestEncode and FuzzOpenAIResponseDecode hold
// them to it.

// scanDepth is the deepest nesting the hand scanner follows; deeper text
// goes to encoding/json (which allows 10000).
const scanDepth = 100

// appendOpenAIRequest appends body as json.Marshal writes it (a system turn
// from systemTurns when it was written before). ok is false for what
// json.Marshal must decide: a NaN or infinite temperature, a schema that is
// not valid JSON or nests deeper than scanDepth.
func appendOpenAIRequest(dst []byte, body *openAIRequest) ([]byte, bool) {
	t := body.Temperature
	if math.IsNaN(t) || math.IsInf(t, 0) {
		return dst, false
	}
	// One allocation for the usual request: escapes (the quotes of a
	// schema in the system turn, say) take the slack.
	n := 128 + len(body.Model)
	for _, m := range body.Messages {
		n += 24 + len(m.Role) + len(m.Content)
	}
	if f := body.Format; f != nil && f.JSONSchema != nil {
		n += 64 + len(f.JSONSchema.Name) + len(f.JSONSchema.Schema)
	}
	b := slices.Grow(dst, n+n/8)

	b = append(b, `{"model":`...)
	b = jsontext.AppendString(b, body.Model, true)
	b = append(b, `,"messages":`...)
	if body.Messages == nil {
		b = append(b, "null"...)
	} else {
		b = append(b, '[')
		for i, m := range body.Messages {
			if i > 0 {
				b = append(b, ',')
			}
			b = append(b, `{"role":`...)
			b = jsontext.AppendString(b, m.Role, true)
			b = append(b, `,"content":`...)
			if m.Role == heal.RoleSystem {
				b = appendSystemTurn(b, m.Content)
			} else {
				b = jsontext.AppendString(b, m.Content, true)
			}
			b = append(b, '}')
		}
		b = append(b, ']')
	}
	b = append(b, `,"temperature":`...)
	b = jsontext.AppendFloat(b, t)
	if body.MaxTokens != 0 {
		b = append(b, `,"max_tokens":`...)
		b = strconv.AppendInt(b, int64(body.MaxTokens), 10)
	}
	if f := body.Format; f != nil {
		b = append(b, `,"response_format":{"type":`...)
		b = jsontext.AppendString(b, f.Type, true)
		if s := f.JSONSchema; s != nil {
			b = append(b, `,"json_schema":{"name":`...)
			b = jsontext.AppendString(b, s.Name, true)
			b = append(b, `,"schema":`...)
			if s.Schema == nil {
				b = append(b, "null"...) // json.RawMessage's MarshalJSON
			} else {
				var ok bool
				if b, ok = appendCompact(b, s.Schema); !ok {
					return dst, false
				}
			}
			b = append(b, `,"strict":`...)
			b = strconv.AppendBool(b, s.Strict)
			b = append(b, '}')
		}
		b = append(b, '}')
	}
	return append(b, '}'), true
}

// systemTurns holds system turns as jsontext.AppendString writes them. The heal
// loop sends the same system turn (the rules and the schema, built once per
// schema) in every request for a schema, and it is most of the request: a
// copy is cheaper than escaping it again. The slot is chosen by length; a
// hit needs the same text, which for the loop's turn is the same string
// (the comparison stops at the pointer).
var systemTurns [16]atomic.Pointer[escapedTurn]

type escapedTurn struct {
	s       string
	escaped []byte
}

// appendSystemTurn is jsontext.AppendString(b, s, true), from systemTurns
// when it can.
func appendSystemTurn(b []byte, s string) []byte {
	slot := &systemTurns[len(s)%len(systemTurns)]
	if e := slot.Load(); e != nil && e.s == s {
		return append(b, e.escaped...)
	}
	n := len(b)
	b = jsontext.AppendString(b, s, true)
	slot.Store(&escapedTurn{s: s, escaped: slices.Clone(b[n:])})
	return b
}

// appendCompact appends raw as json.Marshal writes a json.RawMessage: the
// value without insignificant whitespace, <, >, & and U+2028, U+2029
// escaped (HTML-safe), other bytes as they are (invalid UTF-8 too). ok is
// false when raw is not one valid JSON value (json.Marshal fails) or nests
// deeper than scanDepth.
func appendCompact(dst, raw []byte) ([]byte, bool) {
	lo := skipSpace(raw, 0)
	hi, ok := skipValue(raw, lo, 0)
	if !ok || skipSpace(raw, hi) != len(raw) {
		return dst, false
	}
	b := dst
	start, inString := lo, false
	for i := lo; i < hi; i++ {
		switch c := raw[i]; {
		case c == '<' || c == '>' || c == '&':
			b = append(b, raw[start:i]...)
			b = append(b, '\\', 'u', '0', '0', hexDigit[c>>4], hexDigit[c&0xF])
			start = i + 1
		case c == 0xE2 && i+2 < hi && raw[i+1] == 0x80 && raw[i+2]&^1 == 0xA8:
			b = append(b, raw[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigit[raw[i+2]&0xF])
			i += 2
			start = i + 1
		case inString:
			switch c {
			case '\\':
				i++ // the escaped byte, ASCII and never a quote that ends the string
			case '"':
				inString = false
			}
		case c == '"':
			inString = true
		case isSpace(c):
			b = append(b, raw[start:i]...)
			start = i + 1
		}
	}
	return append(b, raw[start:hi]...), true
}

const hexDigit = "0123456789abcdef"

// Response keys, lower case, by level of openAIResponse. A member whose
// name equals one of them but for case would fill the field (encoding/json
// matches names case-insensitively), so the fast path gives up on it.
var (
	responseKeys = []string{"choices", "usage", "error"}
	choiceKeys   = []string{"message", "finish_reason"}
	messageKeys  = []string{"content", "refusal"}
	usageKeys    = []string{"prompt_tokens", "completion_tokens", "prompt_tokens_details", "completion_tokens_details"}
	cachedKeys   = []string{"cached_tokens"}
	reasonKeys   = []string{"reasoning_tokens"}
	errorKeys    = []string{"message"}
)

// decodeOpenAIResponse decodes a chat-completions body as
// json.Unmarshal(b, &r) does, in one pass over a document it checks in
// full. It gives up (ok = false) on anything where it could differ: invalid
// JSON, a value of the wrong type anywhere in the fields (json.Unmarshal
// fails), a non-integer or out-of-range token count, a member name with
// escapes or non-ASCII bytes, one matching a field only case-insensitively,
// a field given twice, invalid UTF-8 in a string it decodes, nesting deeper
// than scanDepth. Members that are not fields are checked and skipped.
func decodeOpenAIResponse(b []byte) (r openAIResponse, ok bool) {
	i := skipSpace(b, 0)
	if i >= len(b) || b[i] != '{' {
		return openAIResponse{}, false
	}
	var seen uint8
	i, ok = object(b, i, 0, func(key []byte, i int) (int, bool) {
		switch field(key, responseKeys, &seen) {
		case 0:
			return decodeChoices(b, i, &r.Choices)
		case 1:
			return decodeUsage(b, i, &r)
		case 2:
			if end, ok := null(b, i); ok {
				return end, true
			}
			r.Error = new(openAIErrorBody)
			var seen uint8
			return object(b, i, 1, func(key []byte, i int) (int, bool) {
				switch field(key, errorKeys, &seen) {
				case 0:
					return decodeString(b, i, &r.Error.Message)
				case -1:
					return skipValue(b, i, 2)
				}
				return 0, false
			})
		case -1:
			return skipValue(b, i, 1)
		}
		return 0, false
	})
	if !ok || skipSpace(b, i) != len(b) {
		return openAIResponse{}, false
	}
	return r, true
}

// decodeChoices decodes the choices array (or null) at b[i].
func decodeChoices(b []byte, i int, cs *[]openAIChoice) (int, bool) {
	if end, ok := null(b, i); ok {
		return end, true
	}
	*cs = []openAIChoice{} // an empty array is an empty slice, not nil
	return array(b, i, 1, func(i int) (int, bool) {
		*cs = append(*cs, openAIChoice{})
		return decodeChoice(b, i, &(*cs)[len(*cs)-1])
	})
}

// decodeChoice decodes one element of choices (an object or null) at b[i].
func decodeChoice(b []byte, i int, ch *openAIChoice) (int, bool) {
	if end, ok := null(b, i); ok {
		return end, true
	}
	var seen uint8
	return object(b, i, 2, func(key []byte, i int) (int, bool) {
		switch field(key, choiceKeys, &seen) {
		case 0:
			if end, ok := null(b, i); ok {
				return end, true
			}
			var seen uint8
			return object(b, i, 3, func(key []byte, i int) (int, bool) {
				switch field(key, messageKeys, &seen) {
				case 0:
					return decodeStringPtr(b, i, &ch.Message.Content)
				case 1:
					return decodeStringPtr(b, i, &ch.Message.Refusal)
				case -1:
					return skipValue(b, i, 4)
				}
				return 0, false
			})
		case 1:
			return decodeStringPtr(b, i, &ch.FinishReason)
		case -1:
			return skipValue(b, i, 3)
		}
		return 0, false
	})
}

// decodeUsage decodes the usage object (or null) at b[i].
func decodeUsage(b []byte, i int, r *openAIResponse) (int, bool) {
	if end, ok := null(b, i); ok {
		return end, true
	}
	u := &r.Usage
	var seen uint8
	return object(b, i, 1, func(key []byte, i int) (int, bool) {
		switch field(key, usageKeys, &seen) {
		case 0:
			return decodeInt(b, i, &u.PromptTokens)
		case 1:
			return decodeInt(b, i, &u.CompletionTokens)
		case 2:
			return decodeDetails(b, i, cachedKeys, &u.PromptTokensDetails.CachedTokens)
		case 3:
			return decodeDetails(b, i, reasonKeys, &u.CompletionTokensDetails.ReasoningTokens)
		case -1:
			return skipValue(b, i, 2)
		}
		return 0, false
	})
}

// decodeDetails decodes a token-details object (or null) at b[i] whose one
// field, keys[0], is an int.
func decodeDetails(b []byte, i int, keys []string, n *int) (int, bool) {
	if end, ok := null(b, i); ok {
		return end, true
	}
	var seen uint8
	return object(b, i, 2, func(key []byte, i int) (int, bool) {
		switch field(key, keys, &seen) {
		case 0:
			return decodeInt(b, i, n)
		case -1:
			return skipValue(b, i, 3)
		}
		return 0, false
	})
}

// field tells which of keys (lower case) a member name is: its index, -1
// for none, -2 (give up) for one seen before, one matching only
// case-insensitively, or a name with escapes or non-ASCII bytes (which
// could unescape or fold to one: "\u0063ontent", "choiceſ").
func field(key []byte, keys []string, seen *uint8) int {
	for _, c := range key {
		if c == '\\' || c >= utf8.RuneSelf {
			return -2
		}
	}
	for n, k := range keys {
		if string(key) == k {
			if *seen&(1<<n) != 0 {
				return -2
			}
			*seen |= 1 << n
			return n
		}
	}
	for _, k := range keys {
		if len(key) == len(k) && foldEqual(key, k) {
			return -2
		}
	}
	return -1
}

// foldEqual reports whether ASCII key equals the lower-case k but for ASCII
// case, as encoding/json folds names.
func foldEqual(key []byte, k string) bool {
	for i, c := range key {
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != k[i] {
			return false
		}
	}
	return true
}

// object walks the object at b[i], calling member with each name (as it is
// written, between the quotes) and the index of its value; member returns
// the index after the value. It returns the index after the object.
func object(b []byte, i, depth int, member func(key []byte, i int) (int, bool)) (int, bool) {
	if i >= len(b) || b[i] != '{' || depth >= scanDepth {
		return 0, false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == '}' {
		return i + 1, true
	}
	for {
		end, ok := stringEnd(b, i)
		if !ok {
			return 0, false
		}
		key := b[i+1 : end-1]
		i = skipSpace(b, end)
		if i >= len(b) || b[i] != ':' {
			return 0, false
		}
		if i, ok = member(key, skipSpace(b, i+1)); !ok {
			return 0, false
		}
		var done bool
		if i, done, ok = after(b, i, '}'); done || !ok {
			return i, ok
		}
	}
}

// array walks the array at b[i], calling elem with the index of each
// element; elem returns the index after it. It returns the index after
// the array.
func array(b []byte, i, depth int, elem func(i int) (int, bool)) (int, bool) {
	if i >= len(b) || b[i] != '[' || depth >= scanDepth {
		return 0, false
	}
	i = skipSpace(b, i+1)
	if i < len(b) && b[i] == ']' {
		return i + 1, true
	}
	for {
		var ok, done bool
		if i, ok = elem(i); !ok {
			return 0, false
		}
		if i, done, ok = after(b, i, ']'); done || !ok {
			return i, ok
		}
	}
}

// after reads what follows a member or element at b[i]: the closing
// bracket (done, the index after it) or a comma (the index of the next
// one).
func after(b []byte, i int, closing byte) (next int, done, ok bool) {
	i = skipSpace(b, i)
	switch {
	case i >= len(b):
		return 0, false, false
	case b[i] == closing:
		return i + 1, true, true
	case b[i] == ',':
		return skipSpace(b, i+1), false, true
	}
	return 0, false, false
}

// null reports whether b[i:] is the literal null, and the index after it.
func null(b []byte, i int) (int, bool) {
	if i+4 <= len(b) && string(b[i:i+4]) == "null" {
		return i + 4, true
	}
	return 0, false
}

// decodeStringPtr decodes a string or null at b[i] into a *string field (nil
// for null).
func decodeStringPtr(b []byte, i int, p **string) (int, bool) {
	if end, ok := null(b, i); ok {
		return end, true
	}
	s := new(string)
	end, ok := decodeString(b, i, s)
	if ok {
		*p = s
	}
	return end, ok
}

// decodeString decodes a string or null at b[i] into a string field (left
// alone for null). Invalid UTF-8 gives up: encoding/json replaces it.
func decodeString(b []byte, i int, s *string) (int, bool) {
	if end, ok := null(b, i); ok {
		return end, true
	}
	end, ok := stringEnd(b, i)
	if !ok {
		return 0, false
	}
	raw := b[i+1 : end-1]
	switch {
	case !utf8.Valid(raw):
		return 0, false
	case bytes.IndexByte(raw, '\\') < 0:
		*s = string(raw)
	default:
		out, _, _ := jsontext.AppendUnescaped(make([]byte, 0, len(raw)), raw)
		// out is never written again: the string shares it.
		*s = unsafe.String(unsafe.SliceData(out), len(out))
	}
	return end, true
}

// decodeInt decodes an integer or null at b[i] into an int field (left
// alone for null). A fraction, an exponent or a value out of range gives
// up: encoding/json fails on them.
func decodeInt(b []byte, i int, n *int) (int, bool) {
	if end, ok := null(b, i); ok {
		return end, true
	}
	end, ok := numberEnd(b, i)
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseInt(unsafe.String(&b[i], end-i), 10, strconv.IntSize)
	if err != nil {
		return 0, false
	}
	*n = int(v)
	return end, true
}

// skipValue checks the JSON value at b[i] and returns the index after it.
func skipValue(b []byte, i, depth int) (int, bool) {
	if i >= len(b) {
		return 0, false
	}
	switch b[i] {
	case '"':
		return stringEnd(b, i)
	case '{':
		return object(b, i, depth, func(_ []byte, i int) (int, bool) { return skipValue(b, i, depth+1) })
	case '[':
		return array(b, i, depth, func(i int) (int, bool) { return skipValue(b, i, depth+1) })
	case 't':
		return literal(b, i, "true")
	case 'f':
		return literal(b, i, "false")
	case 'n':
		return literal(b, i, "null")
	}
	return numberEnd(b, i)
}

func literal(b []byte, i int, lit string) (int, bool) {
	if i+len(lit) <= len(b) && string(b[i:i+len(lit)]) == lit {
		return i + len(lit), true
	}
	return 0, false
}

// stringEnd checks the string at b[i] (its opening quote) and returns the
// index after its closing quote. Control characters and malformed escapes
// are invalid JSON; invalid UTF-8 is not (encoding/json accepts and
// replaces it). It skips eight bytes at a time where none is a quote, a
// backslash or a control character.
func stringEnd(b []byte, i int) (int, bool) {
	if i >= len(b) || b[i] != '"' {
		return 0, false
	}
	j := i + 1
	for {
		for j+8 <= len(b) {
			w := binary.LittleEndian.Uint64(b[j:])
			q, bs := w^'"'*jsontext.Ones, w^'\\'*jsontext.Ones
			if m := ((w-0x20*jsontext.Ones)&^w | (q-jsontext.Ones)&^q | (bs-jsontext.Ones)&^bs) & jsontext.High; m != 0 {
				j += bits.TrailingZeros64(m) / 8
				break
			}
			j += 8
		}
		if j >= len(b) {
			return 0, false
		}
		switch c := b[j]; {
		case c == '"':
			return j + 1, true
		case c == '\\':
			if j+1 >= len(b) {
				return 0, false
			}
			switch b[j+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				j += 2
			case 'u':
				if _, ok := jsontext.Hex4(b, j+2); !ok {
					return 0, false
				}
				j += 6
			default:
				return 0, false
			}
		case c < 0x20:
			return 0, false
		default:
			j++
		}
	}
}

// numberEnd checks the JSON number at b[i] and returns the index after it
// (what follows is for the caller to check).
func numberEnd(b []byte, i int) (int, bool) {
	if i < len(b) && b[i] == '-' {
		i++
	}
	switch {
	case i < len(b) && b[i] == '0':
		i++
	case i < len(b) && '1' <= b[i] && b[i] <= '9':
		i = digits(b, i)
	default:
		return 0, false
	}
	if i < len(b) && b[i] == '.' {
		if i+1 >= len(b) || !isDigit(b[i+1]) {
			return 0, false
		}
		i = digits(b, i+1)
	}
	if i < len(b) && (b[i] == 'e' || b[i] == 'E') {
		i++
		if i < len(b) && (b[i] == '+' || b[i] == '-') {
			i++
		}
		if i >= len(b) || !isDigit(b[i]) {
			return 0, false
		}
		i = digits(b, i)
	}
	return i, true
}

func digits(b []byte, i int) int {
	for i < len(b) && isDigit(b[i]) {
		i++
	}
	return i
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func skipSpace(b []byte, i int) int {
	for i < len(b) && isSpace(b[i]) {
		i++
	}
	return i
}
