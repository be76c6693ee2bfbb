package sanitize

import (
	"bytes"
	"encoding/json"
	"errors"
)

// Bounds on how many places Clean tries, so that adversarial input (many
// fences, many brackets in prose) stays linear: each attempt is one pass.
const (
	maxFenceBlocks = 8
	maxCandidates  = 8
)

// Clean turns raw model text into JSON bytes.
//
// Valid JSON takes the fast path: one validation pass, no copy (the result
// aliases raw, trimmed of surrounding whitespace). Anything else goes through
// one repairing pass whose stages are recorded in Result.Stages. Clean refuses
// with an error wrapping ErrTruncated (the text ends inside a value), ErrNoJSON
// (no object or array to be found) or ErrUnrepairable (a repair would be a
// guess); test them with errors.Is. Whatever Clean returns without an error is
// valid JSON.
func Clean(raw []byte) (Result, error) {
	if json.Valid(raw) {
		v := trimASCII(raw)
		if v[0] == '"' {
			if res, ok := decodeDoubleEncoded(v); ok {
				return res, nil
			}
		}
		return Result{JSON: v}, nil
	}
	return repair(raw)
}

func trimASCII(b []byte) []byte {
	i, j := 0, len(b)
	for i < j && isASCIISpace(b[i]) {
		i++
	}
	for j > i && isASCIISpace(b[j-1]) {
		j--
	}
	return b[i:j]
}

func isASCIISpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

// decodeDoubleEncoded handles a JSON string literal whose content is itself a
// JSON object or array ("{\"a\":1}"): the inner value is cleaned and returned.
func decodeDoubleEncoded(v []byte) (Result, bool) {
	var s string
	if err := json.Unmarshal(v, &s); err != nil {
		return Result{}, false
	}
	inner := trimASCII([]byte(s))
	if len(inner) == 0 || (inner[0] != '{' && inner[0] != '[') || !json.Valid(inner) {
		// a string that merely looks like JSON stays a string
		return Result{}, false
	}
	return Result{JSON: inner, Stages: []string{StageDoubleEncoded}}, true
}

// repair is the slow path: pick the region that holds the JSON (after
// thinking blocks, inside a fence, inside prose) and rewrite it in one pass.
func repair(raw []byte) (Result, error) {
	var stages uint32
	text, base := raw, 0

	// A BOM or zero-width characters in front.
	for {
		n, zw := spaceLen(text)
		if n == 0 || !zw {
			break
		}
		stages |= sBOM
		text, base = text[n:], base+n
	}

	// Reasoning blocks: the answer follows the last closing tag. A block
	// opened and never closed means the model stopped while thinking.
	if cut, ok := afterThinking(text); ok {
		stages |= sThinking
		base += len(text) - len(cut)
		text = cut
	} else if opensThinking(text) {
		return Result{}, &SyntaxError{Offset: len(raw), Reason: "inside an unclosed thinking block", Kind: ErrTruncated}
	}

	fenced, fenceErr, ok := fromFences(text, base)
	if ok && fenceErr == nil {
		fenced.Stages = stageList(stages | fenced.mask | sFence)
		return fenced.Result, nil
	}

	// A fenced block held JSON that does not clean: that is the answer,
	// unless the text itself starts as JSON (the marker may sit in a string).
	if fenceErr != nil {
		if t := trimASCII(text); len(t) == 0 || (t[0] != '"' && t[0] != '{' && t[0] != '[') {
			return Result{}, fenceErr
		}
	}
	res, err := fromText(text, base)
	if err != nil {
		if fenceErr != nil {
			return Result{}, fenceErr
		}
		return Result{}, err
	}
	res.Stages = stageList(stages | res.mask)
	return res.Result, nil
}

type repaired struct {
	Result
	mask uint32
}

var thinkClose = [...]string{"</think>", "</thinking>", "</reasoning>", "</THINK>", "</Think>", "</Thinking>"}

func afterThinking(text []byte) ([]byte, bool) {
	if bytes.IndexByte(text, '<') < 0 {
		return nil, false
	}
	best := -1
	for _, tag := range thinkClose {
		if i := bytes.LastIndex(text, []byte(tag)); i >= 0 && i+len(tag) > best {
			best = i + len(tag)
		}
	}
	if best < 0 {
		return nil, false
	}
	return text[best:], true
}

var thinkOpen = [...]string{"<think>", "<thinking>", "<reasoning>"}

// opensThinking reports whether text starts (after whitespace) with an
// opening thinking tag, any case.
func opensThinking(text []byte) bool {
	t := trimASCII(text)
	for _, tag := range thinkOpen {
		if len(t) >= len(tag) && bytes.EqualFold(t[:len(tag)], []byte(tag)) {
			return true
		}
	}
	return false
}

// fenceAt reports the length of a fence marker (3+ backticks or tildes) at
// text[i:], or 0.
func fenceAt(text []byte, i int) int {
	if i+3 > len(text) {
		return 0
	}
	c := text[i]
	if c != '`' && c != '~' {
		return 0
	}
	n := 0
	for i+n < len(text) && text[i+n] == c {
		n++
	}
	if n < 3 {
		return 0
	}
	return n
}

func nextFence(text []byte, from int) (at, n int) {
	for i := from; i < len(text); i++ {
		if c := text[i]; c == '`' || c == '~' {
			if n := fenceAt(text, i); n > 0 {
				return i, n
			}
			for i+1 < len(text) && text[i+1] == c {
				i++
			}
		}
	}
	return -1, 0
}

// fromFences looks for the value in code fences. ok is false when fences do
// not apply: none before the first quote of the text, or no block holds JSON.
// Of several blocks the first that cleans wins; if none does, the error of
// the first block holding JSON is returned.
func fromFences(text []byte, base int) (res repaired, err error, ok bool) {
	at, n := nextFence(text, 0)
	if at < 0 {
		return res, nil, false
	}
	// A quote before the fence may mean the fence is inside a JSON string
	// ({"code": "```js ..."}); unless no bracket precedes it either.
	if q := bytes.IndexByte(text, '"'); q >= 0 && q < at && bytes.ContainsAny(text[:at], "{[") {
		return res, nil, false
	}
	var firstErr error
	for blocks := 0; at >= 0 && blocks < maxFenceBlocks; blocks++ {
		marker := text[at : at+n]
		cs := at + n
		// info string: json, JSON, python, ...
		for cs < len(text) && isWordByte(text[cs]) && text[cs] < 0x80 {
			cs++
		}
		closeAt := -1
		if i := bytes.Index(text[cs:], marker[:3]); i >= 0 {
			closeAt = cs + i
		}
		end := len(text)
		if closeAt >= 0 {
			end = closeAt
		}
		r, e := fromText(text[cs:end], base+cs)
		if e != nil && closeAt >= 0 && errors.Is(e, ErrTruncated) {
			// the closing marker may sit inside a string: read on.
			if r2, e2 := fromText(text[cs:], base+cs); e2 == nil {
				r, e = r2, nil
				closeAt = -1
			}
		}
		if e == nil {
			return r, nil, true
		}
		if firstErr == nil && !errors.Is(e, ErrNoJSON) {
			firstErr = e
		}
		if closeAt < 0 {
			break
		}
		at, n = nextFence(text, closeAt+3)
		if at >= 0 && at == closeAt {
			at, n = nextFence(text, closeAt+len(marker))
		}
		// skip the closing marker itself
		for at >= 0 && at < closeAt+3 {
			at, n = nextFence(text, at+n)
		}
	}
	if firstErr != nil {
		return res, firstErr, true
	}
	return res, nil, false
}

// fromText finds and repairs the JSON value in text: at its start, or inside
// prose around it.
func fromText(text []byte, base int) (repaired, error) {
	p := parser{in: text, base: base, words: true}
	p.skipWS()
	if p.eof() {
		return repaired{}, p.fail(ErrNoJSON, "nothing but whitespace and comments")
	}
	start := p.pos
	c := text[start]
	if c == '{' || c == '[' {
		if start+2 < len(text) && text[start+1] == '\\' && text[start+2] == '"' {
			return fromEscaped(text[start:], base+start, p.stages)
		}
		return p.value(start)
	}
	// The region may be a strict JSON value on its own (a fenced "42").
	if rest := trimASCII(text[start:]); json.Valid(rest) {
		if rest[0] == '"' {
			if r, ok := decodeDoubleEncoded(rest); ok {
				return repaired{Result: Result{JSON: r.JSON}, mask: p.stages | sDoubleEncoded}, nil
			}
		}
		return repaired{Result: Result{JSON: rest}, mask: p.stages}, nil
	}
	if c == '\\' && start+1 < len(text) && text[start+1] == '"' {
		return repaired{}, p.fail(ErrNoJSON, "escaped string, no object or array")
	}
	// Prose: try the objects and arrays in it, first to last, bare words
	// not allowed as values (they are prose); then the first one leniently.
	var firstErr error
	first := -1
	from := start
	for tries := 0; tries < maxCandidates; tries++ {
		i := indexAnyFrom(text, from, "{[")
		if i < 0 {
			break
		}
		if first < 0 {
			first = i
		}
		q := parser{in: text, base: base, words: false, stages: p.stages | sProse}
		r, err := q.value(i)
		if err == nil {
			return r, nil
		}
		if errors.Is(err, ErrTruncated) {
			return repaired{}, err
		}
		if firstErr == nil {
			firstErr = err
		}
		from = i + 1
	}
	if first < 0 {
		return repaired{}, p.fail(ErrNoJSON, "no object or array in the text")
	}
	q := parser{in: text, base: base, words: true, stages: p.stages | sProse}
	if r, err := q.value(first); err == nil || errors.Is(err, ErrTruncated) {
		return r, err
	}
	return repaired{}, firstErr
}

func indexAnyFrom(b []byte, from int, chars string) int {
	if from >= len(b) {
		return -1
	}
	i := bytes.IndexAny(b[from:], chars)
	if i < 0 {
		return -1
	}
	return from + i
}

// value parses one value at text[start] and accounts for what follows it.
func (p *parser) value(start int) (repaired, error) {
	p.pos = start
	p.out = make([]byte, 0, len(p.in)-start+16)
	if err := p.parseValue(); err != nil {
		return repaired{}, err
	}
	p.skipWS()
	if !p.eof() {
		rest := p.in[p.pos:]
		switch {
		case fenceAt(rest, 0) > 0 && len(trimASCII(rest[fenceAt(rest, 0):])) == 0:
			p.stages |= sFence
		case rest[0] == ',' && len(trimASCII(rest[1:])) == 0:
			p.stages |= sTrailingCommas
		default:
			p.stages |= sProse
		}
	}
	if !json.Valid(p.out) {
		// A bug guard: never hand back what does not parse.
		return repaired{}, p.invalid("repair produced invalid JSON")
	}
	return repaired{Result: Result{JSON: p.out}, mask: p.stages}, nil
}

// fromEscaped handles JSON whose quotes arrive backslash-escaped, as when a
// JSON string's content is pasted without its outer quotes: {\"a\": \"b\"}.
// One level of escaping is removed and the result repaired.
func fromEscaped(text []byte, base int, mask uint32) (repaired, error) {
	un := make([]byte, 0, len(text))
	for i := 0; i < len(text); i++ {
		if text[i] == '\\' && i+1 < len(text) && (text[i+1] == '"' || text[i+1] == '\\') {
			i++
		}
		un = append(un, text[i])
	}
	p := parser{in: un, base: base, words: true, stages: mask | sDoubleEncoded}
	r, err := p.value(0)
	if err != nil {
		var se *SyntaxError
		if errors.As(err, &se) {
			se.Offset = base // offsets in the unescaped copy do not map back
		}
		return repaired{}, err
	}
	return r, nil
}
