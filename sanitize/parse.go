package sanitize

import (
	"unicode/utf8"
)

// maxDepth matches encoding/json's nesting limit, so whatever Clean returns
// can be decoded by it.
const maxDepth = 10000

// parser is a single-pass repairing tokenizer: it reads in[pos:] once, left to
// right, and writes strict JSON to out. Look-ahead is bounded by what it then
// consumes, so the work is linear in the input. It never completes a value the
// input does not finish: reaching the end inside a value is ErrTruncated.
type parser struct {
	in     []byte
	pos    int
	out    []byte
	stages uint32
	depth  int
	base   int  // offset of in[0] in the raw input, for error offsets
	words  bool // bare words may be values (off while hunting JSON inside prose)
	inCall int  // nesting of Name( ... ) wrappers and tuples: ')' then ends a string

	unquotedKey bool // the last key read was bare
	bareWord    bool // ... and it was a plain word (letters, digits, _)
}

func (p *parser) fail(kind error, reason string) error {
	return &SyntaxError{Offset: p.base + p.pos, Reason: reason, Kind: kind}
}

func (p *parser) truncated(reason string) error { return p.fail(ErrTruncated, reason) }
func (p *parser) invalid(reason string) error   { return p.fail(ErrUnrepairable, reason) }

func (p *parser) eof() bool { return p.pos >= len(p.in) }

// spaceLen reports the byte length of a non-ASCII space or zero-width
// character at b[0], and whether it is a BOM / zero-width one.
func spaceLen(b []byte) (n int, zeroWidth bool) {
	if len(b) < 2 {
		return 0, false
	}
	switch b[0] {
	case 0xC2:
		if b[1] == 0xA0 { // U+00A0
			return 2, false
		}
	case 0xE1:
		if len(b) >= 3 && ((b[1] == 0x9A && b[2] == 0x80) || (b[1] == 0xA0 && b[2] == 0x8E)) { // U+1680, U+180E
			return 3, b[1] == 0xA0
		}
	case 0xE2:
		if len(b) < 3 {
			return 0, false
		}
		if b[1] == 0x80 {
			switch {
			case b[2] >= 0x80 && b[2] <= 0x8A: // U+2000..U+200A
				return 3, false
			case b[2] >= 0x8B && b[2] <= 0x8D: // U+200B..U+200D zero width
				return 3, true
			case b[2] == 0xA8 || b[2] == 0xA9 || b[2] == 0xAF: // U+2028, U+2029, U+202F
				return 3, false
			}
		}
		if b[1] == 0x81 && (b[2] == 0x9F || b[2] == 0xA0) { // U+205F, U+2060
			return 3, b[2] == 0xA0
		}
	case 0xE3:
		if len(b) >= 3 && b[1] == 0x80 && b[2] == 0x80 { // U+3000
			return 3, false
		}
	case 0xEF:
		if len(b) >= 3 && b[1] == 0xBB && b[2] == 0xBF { // U+FEFF
			return 3, true
		}
	}
	return 0, false
}

// skipWS skips whitespace (ASCII and Unicode spaces) and comments between
// tokens. An unterminated /* comment runs to the end of the input.
func (p *parser) skipWS() {
	for p.pos < len(p.in) {
		c := p.in[p.pos]
		switch c {
		case ' ', '\t', '\n', '\r':
			p.pos++
			continue
		case '/':
			if p.pos+1 < len(p.in) {
				switch p.in[p.pos+1] {
				case '/':
					p.stages |= sComments
					p.skipLine()
					continue
				case '*':
					p.stages |= sComments
					end := indexFrom(p.in, p.pos+2, "*/")
					if end < 0 {
						p.pos = len(p.in)
					} else {
						p.pos = end + 2
					}
					continue
				}
			}
			return
		case '#':
			p.stages |= sComments
			p.skipLine()
			continue
		}
		if c >= 0x80 {
			if n, zw := spaceLen(p.in[p.pos:]); n > 0 {
				if zw {
					p.stages |= sBOM
				} else {
					p.stages |= sUnicodeSpaces
				}
				p.pos += n
				continue
			}
		}
		return
	}
}

func (p *parser) skipLine() {
	for p.pos < len(p.in) && p.in[p.pos] != '\n' {
		p.pos++
	}
}

func indexFrom(b []byte, from int, s string) int {
	for i := from; i+len(s) <= len(b); i++ {
		if b[i] == s[0] && string(b[i:i+len(s)]) == s {
			return i
		}
	}
	return -1
}

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || isDigit(c) || c == '_' || c == '$' || c >= 0x80
}

// quote kinds
const (
	qNone = iota
	qDouble
	qSingle
	qSmartDouble // “ ” „ ＂
	qSmartSingle // ‘ ’
	qBacktick    // ` ´
)

// quoteAt reports the kind and byte length of a quote character at b[0].
func quoteAt(b []byte) (kind, n int) {
	if len(b) == 0 {
		return qNone, 0
	}
	switch b[0] {
	case '"':
		return qDouble, 1
	case '\'':
		return qSingle, 1
	case '`':
		return qBacktick, 1
	case 0xC2:
		if len(b) >= 2 && b[1] == 0xB4 { // ´
			return qBacktick, 2
		}
	case 0xE2:
		if len(b) >= 3 && b[1] == 0x80 {
			switch b[2] {
			case 0x9C, 0x9D, 0x9E: // “ ” „
				return qSmartDouble, 3
			case 0x98, 0x99: // ‘ ’
				return qSmartSingle, 3
			}
		}
	case 0xEF:
		if len(b) >= 3 && b[1] == 0xBC && b[2] == 0x82 { // ＂
			return qSmartDouble, 3
		}
	}
	return qNone, 0
}

// closes reports whether a quote of kind k ends a string opened by kind open.
func closes(open, k int) bool {
	switch open {
	case qDouble:
		return k == qDouble
	case qSingle:
		return k == qSingle
	case qSmartDouble:
		return k == qSmartDouble || k == qDouble
	case qSmartSingle:
		return k == qSmartSingle || k == qSingle
	case qBacktick:
		return k == qBacktick || k == qSingle
	}
	return false
}

func (p *parser) parseValue() error {
	p.skipWS()
	if p.eof() {
		return p.truncated("expected a value")
	}
	c := p.in[p.pos]
	switch {
	case c == '{':
		return p.parseObject()
	case c == '[':
		return p.parseArray()
	case c == '-' || c == '.' || isDigit(c):
		return p.parseNumber()
	case c == '(':
		return p.parseTuple()
	case c == '/' && p.words && p.pos+1 < len(p.in) && p.in[p.pos+1] != '/' && p.in[p.pos+1] != '*':
		return p.parseRegex()
	case c == '}' || c == ']' || c == ',' || c == ':' || c == ')':
		return p.invalid("missing value")
	}
	if k, _ := quoteAt(p.in[p.pos:]); k != qNone {
		return p.parseString(false)
	}
	return p.parseWord(false)
}

func (p *parser) push() error {
	p.depth++
	if p.depth > maxDepth {
		return p.invalid("nesting too deep")
	}
	return nil
}

func (p *parser) parseObject() error {
	if err := p.push(); err != nil {
		return err
	}
	p.pos++
	p.out = append(p.out, '{')
	members, comma := 0, false
	for {
		p.skipWS()
		if p.eof() {
			return p.truncated("inside an object")
		}
		switch p.in[p.pos] {
		case '}':
			if comma {
				p.stages |= sTrailingCommas
			}
			p.pos++
			p.out = append(p.out, '}')
			p.depth--
			return nil
		case ',':
			if members == 0 || comma {
				p.stages |= sTrailingCommas
			}
			comma = true
			p.pos++
			continue
		case ']', ')':
			return p.invalid("mismatched bracket in object")
		}
		before := len(p.out)
		if members > 0 {
			if !comma {
				p.stages |= sMissingCommas
			}
			p.out = append(p.out, ',')
		}
		comma = false
		mark := len(p.out)
		if err := p.parseKey(); err != nil {
			return err
		}
		p.skipWS()
		if members > 0 && p.unquotedKey && p.bareWord && !p.eof() && p.in[p.pos] == '"' {
			// a stray bare word before a quoted key: COMMENT "key": ...
			p.stages |= sProse
			p.out = p.out[:mark]
			if err := p.parseKey(); err != nil {
				return err
			}
			p.skipWS()
		}
		if members > 0 && p.unquotedKey && p.bareWord && !p.eof() && p.in[p.pos] == '}' {
			// a stray bare word before the closing brace: "data" AAAA }
			p.stages |= sProse
			p.out = p.out[:before]
			continue
		}
		if p.eof() {
			return p.truncated("after an object key")
		}
		switch c := p.in[p.pos]; {
		case c == ':':
			p.pos++
		case c == ',' || c == '}' || c == ']':
			return p.invalid("object key without a value")
		default:
			p.stages |= sMissingColons
		}
		p.out = append(p.out, ':')
		p.skipWS()
		if p.eof() {
			return p.truncated("expected a value")
		}
		if err := p.parseValue(); err != nil {
			return err
		}
		members++
	}
}

func (p *parser) parseArray() error {
	if err := p.push(); err != nil {
		return err
	}
	p.pos++
	p.out = append(p.out, '[')
	elems, comma := 0, false
	for {
		p.skipWS()
		if p.eof() {
			return p.truncated("inside an array")
		}
		switch p.in[p.pos] {
		case ']':
			if comma {
				p.stages |= sTrailingCommas
			}
			p.pos++
			p.out = append(p.out, ']')
			p.depth--
			return nil
		case ',':
			if elems == 0 || comma {
				p.stages |= sTrailingCommas
			}
			comma = true
			p.pos++
			continue
		case '}', ')':
			return p.invalid("mismatched bracket in array")
		case ':':
			return p.invalid("colon in array")
		}
		if elems > 0 {
			if !comma {
				p.stages |= sMissingCommas
			}
			p.out = append(p.out, ',')
		}
		comma = false
		if err := p.parseValue(); err != nil {
			return err
		}
		elems++
	}
}

// parseTuple reads a Python tuple: (1, 2) becomes [1,2], () becomes [],
// and a parenthesised single value (1) is that value.
func (p *parser) parseTuple() error {
	if err := p.push(); err != nil {
		return err
	}
	p.stages |= sLiterals
	p.pos++
	p.inCall++
	mark := len(p.out)
	p.out = append(p.out, '[')
	elems, comma, anyComma := 0, false, false
	for {
		p.skipWS()
		if p.eof() {
			return p.truncated("inside a tuple")
		}
		switch p.in[p.pos] {
		case ')':
			p.pos++
			p.inCall--
			p.depth--
			if elems == 1 && !anyComma {
				p.out[mark] = ' ' // (x) is x
				return nil
			}
			p.out = append(p.out, ']')
			return nil
		case ',':
			if elems == 0 || comma {
				return p.invalid("empty tuple element")
			}
			comma, anyComma = true, true
			p.pos++
			continue
		case '}', ']', ':':
			return p.invalid("mismatched bracket in tuple")
		}
		if elems > 0 {
			if !comma {
				return p.invalid("missing comma in tuple")
			}
			p.out = append(p.out, ',')
		}
		comma = false
		if err := p.parseValue(); err != nil {
			return err
		}
		elems++
	}
}

// parseRegex reads a JavaScript regular expression literal /.../flags as a
// string, spelling kept.
func (p *parser) parseRegex() error {
	start := p.pos
	i := p.pos + 1
	inClass := false
	for ; i < len(p.in); i++ {
		c := p.in[i]
		if c == '\\' {
			i++
			continue
		}
		if c == '\n' {
			return p.invalid("newline in a regular expression")
		}
		if c == '[' {
			inClass = true
		} else if c == ']' {
			inClass = false
		} else if c == '/' && !inClass {
			break
		}
	}
	if i >= len(p.in) {
		p.pos = i
		return p.truncated("inside a regular expression")
	}
	i++
	for i < len(p.in) && (p.in[i] >= 'a' && p.in[i] <= 'z') {
		i++
	}
	p.stages |= sUnquotedValues
	p.writeString(p.in[start:i])
	p.pos = i
	return nil
}

// parseKey reads a quoted or bare object key.
func (p *parser) parseKey() error {
	p.unquotedKey = false
	if k, _ := quoteAt(p.in[p.pos:]); k != qNone {
		return p.parseString(true)
	}
	p.unquotedKey = true
	start := p.pos
	for p.pos < len(p.in) {
		c := p.in[p.pos]
		if c == ':' || c == ',' || c == '{' || c == '}' || c == '[' || c == ']' || c == '"' || c == '\'' || c <= ' ' {
			break
		}
		if c >= 0x80 {
			if n, _ := spaceLen(p.in[p.pos:]); n > 0 {
				break
			}
			if k, _ := quoteAt(p.in[p.pos:]); k != qNone {
				break
			}
		}
		p.pos++
	}
	if p.pos == start {
		if p.eof() {
			return p.truncated("expected an object key")
		}
		return p.invalid("expected an object key")
	}
	if p.eof() {
		return p.truncated("inside an object key")
	}
	p.stages |= sUnquotedKeys
	p.bareWord = true
	for _, c := range p.in[start:p.pos] {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || isDigit(c) || c == '_') {
			p.bareWord = false
		}
	}
	p.writeString(p.in[start:p.pos])
	return nil
}

// writeString writes s as a JSON string, escaping what JSON requires.
func (p *parser) writeString(s []byte) {
	p.out = append(p.out, '"')
	for _, c := range s {
		switch {
		case c == '"' || c == '\\':
			p.out = append(p.out, '\\', c)
		case c < 0x20:
			p.out = appendControl(p.out, c)
		default:
			p.out = append(p.out, c)
		}
	}
	p.out = append(p.out, '"')
}

const hexDigits = "0123456789abcdef"

func appendControl(out []byte, c byte) []byte {
	switch c {
	case '\n':
		return append(out, '\\', 'n')
	case '\r':
		return append(out, '\\', 'r')
	case '\t':
		return append(out, '\\', 't')
	case '\b':
		return append(out, '\\', 'b')
	case '\f':
		return append(out, '\\', 'f')
	}
	return append(out, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
}

func isHex(c byte) bool {
	return isDigit(c) || c >= 'a' && c <= 'f' || c >= 'A' && c <= 'F'
}

// parseString reads a string opened by any quote kind and writes it as a
// strict JSON string. Content is kept byte for byte; only escaping changes.
func (p *parser) parseString(isKey bool) error {
	open, n := quoteAt(p.in[p.pos:])
	switch open {
	case qSingle:
		p.stages |= sSingleQuotes
	case qSmartDouble, qSmartSingle, qBacktick:
		p.stages |= sSmartQuotes
	}
	p.pos += n
	p.out = append(p.out, '"')
	for {
		// copy the plain run
		start := p.pos
		for p.pos < len(p.in) {
			c := p.in[p.pos]
			if c == '\\' || c < 0x20 || c == '"' || c == '\'' || c == '`' || c == 0xC2 || c == 0xE2 || c == 0xEF {
				break
			}
			p.pos++
		}
		p.out = append(p.out, p.in[start:p.pos]...)
		if p.eof() {
			return p.truncated("inside a string")
		}
		c := p.in[p.pos]
		if c == '\\' {
			if err := p.parseEscape(); err != nil {
				return err
			}
			continue
		}
		if c < 0x20 {
			p.stages |= sControlChars
			p.out = appendControl(p.out, c)
			p.pos++
			continue
		}
		k, qn := quoteAt(p.in[p.pos:])
		if k == qNone {
			p.out = append(p.out, c)
			p.pos++
			continue
		}
		if closes(open, k) && p.endsString(p.pos+qn, isKey) {
			p.pos += qn
			p.out = append(p.out, '"')
			if !isKey {
				return p.concat()
			}
			return nil
		}
		// a quote that is content
		if c == '"' {
			if open == qDouble {
				p.stages |= sInnerQuotes
			}
			p.out = append(p.out, '\\', '"')
		} else {
			p.out = append(p.out, p.in[p.pos:p.pos+qn]...)
		}
		p.pos += qn
	}
}

// endsString decides whether a closing-quote candidate ending at i really
// ends the string, from what follows it: a delimiter, the end of the input, or
// (after whitespace) the start of another value. Otherwise the quote is
// content that the model forgot to escape.
func (p *parser) endsString(i int, isKey bool) bool {
	ws := false
	for i < len(p.in) {
		c := p.in[i]
		if c == ' ' || c == '\t' || c == '\n' || c == '\r' {
			ws = true
			i++
			continue
		}
		if c >= 0x80 {
			if n, _ := spaceLen(p.in[i:]); n > 0 {
				ws = true
				i += n
				continue
			}
		}
		break
	}
	if i >= len(p.in) {
		return true
	}
	c := p.in[i]
	switch c {
	case '}', ']', '+', '{', '[':
		return true
	case ',':
		// "John is "good",hah", ...: text running into a quote after the
		// comma means the comma was content.
		return !p.textThenQuote(i + 1)
	case ':':
		return isKey
	case ')':
		return p.inCall > 0
	case '/':
		return i+1 < len(p.in) && (p.in[i+1] == '/' || p.in[i+1] == '*')
	case '`':
		return ws || i+2 < len(p.in) && p.in[i+1] == '`' && p.in[i+2] == '`'
	}
	if k, _ := quoteAt(p.in[i:]); k != qNone {
		return true // another string follows: a missing comma or colon
	}
	if isKey && ws {
		return true // "key" value: a missing colon
	}
	// Text follows: the quote is content if the text runs on into another
	// quote (24" screen"), a close if it runs into a closing bracket
	// ("a" b]: a bare word after the string).
	for ; i < len(p.in); i++ {
		switch p.in[i] {
		case '}', ']':
			return true
		case '"', '\'', '`', 0xC2, 0xE2, 0xEF, ',', ':', '\n', '{', '[':
			// stopping at every possible quote keeps the scans disjoint
			return false
		}
	}
	return true
}

// textThenQuote reports whether, after optional spaces, a non-empty run of
// text at in[i:] ends at a double quote that closes it.
func (p *parser) textThenQuote(i int) bool {
	for i < len(p.in) && (p.in[i] == ' ' || p.in[i] == '\t') {
		i++
	}
	start := i
	if i+1 < len(p.in) && p.in[i] == '/' && (p.in[i+1] == '*' || p.in[i+1] == '/') {
		return false // a comment, then the next member
	}
	for ; i < len(p.in); i++ {
		switch p.in[i] {
		case '"':
			// hah" ends a string; COMMENT "key" starts one
			return i > start && p.in[i-1] != ' ' && p.in[i-1] != '\t'
		case ',', ':', '{', '}', '[', ']', '\n', '\r', '\'', '`', 0xC2, 0xE2, 0xEF:
			return false
		}
	}
	return false
}

func (p *parser) parseEscape() error {
	if p.pos+1 >= len(p.in) {
		return p.truncated("inside an escape")
	}
	n := p.in[p.pos+1]
	switch n {
	case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
		p.out = append(p.out, '\\', n)
		p.pos += 2
	case 'u':
		for j := 0; j < 4; j++ {
			i := p.pos + 2 + j
			if i >= len(p.in) {
				return p.truncated("inside a \\u escape")
			}
			if !isHex(p.in[i]) {
				return p.invalid("invalid \\u escape")
			}
		}
		p.out = append(p.out, p.in[p.pos:p.pos+6]...)
		p.pos += 6
	case '\'':
		p.stages |= sEscapes
		p.out = append(p.out, '\'')
		p.pos += 2
	case '\n':
		p.stages |= sEscapes
		p.out = append(p.out, '\\', 'n')
		p.pos += 2
	default:
		// keep the backslash as content: \d in a regex, C:\path
		p.stages |= sEscapes
		p.out = append(p.out, '\\', '\\')
		p.pos++
	}
	return nil
}

// concat joins "a" + "b" after a string value was written.
func (p *parser) concat() error {
	for {
		save := p.pos
		p.skipWS()
		if p.eof() || p.in[p.pos] != '+' {
			p.pos = save
			return nil
		}
		p.pos++
		p.skipWS()
		if p.eof() {
			return p.truncated("after '+'")
		}
		if k, _ := quoteAt(p.in[p.pos:]); k == qNone {
			return p.invalid("'+' not followed by a string")
		}
		p.stages |= sConcatenation
		p.out = p.out[:len(p.out)-1] // reopen: drop the closing quote
		mark := len(p.out)
		if err := p.parseString(true); err != nil {
			return err
		}
		// drop the new opening quote
		copy(p.out[mark:], p.out[mark+1:])
		p.out = p.out[:len(p.out)-1]
	}
}

func isCommentStart(b []byte, i int) bool {
	return b[i] == '#' || b[i] == '/' && i+1 < len(b) && (b[i+1] == '/' || b[i+1] == '*')
}

func isDelim(c byte) bool {
	switch c {
	case ' ', '\t', '\n', '\r', ',', '}', ']', ')', ':':
		return true
	}
	return false
}

// parseNumber keeps a valid number's spelling; repairs only a missing leading
// zero (.5); turns a digit-bearing run that is not a number (0789, 1.2.3,
// 2024-10-18, 57eeeeb1-450b) into a string; refuses incomplete ones (2., 1e,
// -) rather than guessing.
func (p *parser) parseNumber() error {
	start := p.pos
	i := p.pos
	if i < len(p.in) && p.in[i] == '-' {
		i++
		if rest := p.in[i:]; len(rest) >= 8 && string(rest[:8]) == "Infinity" {
			p.pos = i
			return p.parseWord(true)
		}
	}
	leadingDot := false
	intStart := i
	for i < len(p.in) && isDigit(p.in[i]) {
		i++
	}
	intDigits := i - intStart
	valid := intDigits > 0 && !(intDigits > 1 && p.in[intStart] == '0')
	if i < len(p.in) && p.in[i] == '.' {
		i++
		if intDigits == 0 {
			leadingDot = true
		}
		fs := i
		for i < len(p.in) && isDigit(p.in[i]) {
			i++
		}
		if i == fs {
			valid = false
		} else if leadingDot {
			valid = true
		}
	}
	if i < len(p.in) && (p.in[i] == 'e' || p.in[i] == 'E') {
		i++
		if i < len(p.in) && (p.in[i] == '+' || p.in[i] == '-') {
			i++
		}
		es := i
		for i < len(p.in) && isDigit(p.in[i]) {
			i++
		}
		if i == es {
			valid = false
		}
	}
	if i >= len(p.in) {
		p.pos = i
		return p.truncated("inside a number")
	}
	if valid && (isDelim(p.in[i]) || isCommentStart(p.in, i) || p.in[i] == '"' || p.in[i] >= 0x80) {
		if leadingDot {
			p.stages |= sNumbers
			if p.in[start] == '-' {
				p.out = append(p.out, '-', '0')
				p.out = append(p.out, p.in[start+1:i]...)
			} else {
				p.out = append(p.out, '0')
				p.out = append(p.out, p.in[start:i]...)
			}
		} else {
			p.out = append(p.out, p.in[start:i]...)
		}
		p.pos = i
		return nil
	}
	// not a number: a bare token holding digits (0789, 2024-10-18T..., 1/3)
	// becomes a string with its spelling kept.
	continues := !isDelim(p.in[i]) && !isCommentStart(p.in, i) && p.in[i] != '"'
	leadingZero := intDigits > 1 && p.in[intStart] == '0'
	negWord := p.in[start] == '-' && start+1 < len(p.in) && isWordByte(p.in[start+1]) && !isDigit(p.in[start+1])
	if p.words && (intDigits > 0 && (continues || leadingZero) || negWord) {
		p.pos = start
		return p.parseUnquoted()
	}
	p.pos = i
	return p.invalid("malformed number")
}

var literals = map[string]string{
	"true": "true", "false": "false", "null": "null",
	"True": "true", "False": "false", "None": "null",
	"TRUE": "true", "FALSE": "false", "NULL": "null", "Null": "null", "NONE": "null",
	"NaN": "null", "Infinity": "null", "undefined": "null",
}

// parseWord reads a bare word in value position: a literal, a Name(...)
// wrapper, or (when allowed) an unquoted string value.
func (p *parser) parseWord(neg bool) error {
	start := p.pos
	i := p.pos
	for i < len(p.in) && (isWordByte(p.in[i]) && p.in[i] < 0x80) {
		i++
	}
	word := p.in[start:i]
	if i >= len(p.in) && len(word) > 0 {
		p.pos = i
		return p.truncated("inside a literal")
	}
	if len(word) > 0 && (i >= len(p.in) || !isWordByte(p.in[i])) {
		if lit, ok := literals[string(word)]; ok {
			if neg && string(word) != "Infinity" {
				return p.invalid("malformed number")
			}
			if lit != string(word) || neg {
				p.stages |= sLiterals
			}
			p.out = append(p.out, lit...)
			p.pos = i
			return nil
		}
		// Name( value ): a wrapper such as ObjectId("x") or a JSONP callback.
		j := i
		for j < len(p.in) && (p.in[j] == ' ' || p.in[j] == '\t') {
			j++
		}
		if j < len(p.in) && p.in[j] == '(' && !neg {
			if err := p.push(); err != nil {
				return err
			}
			p.stages |= sFunctionCalls
			p.pos = j + 1
			p.inCall++
			if err := p.parseValue(); err != nil {
				return err
			}
			p.inCall--
			p.skipWS()
			if p.eof() {
				return p.truncated("inside a call")
			}
			if p.in[p.pos] != ')' {
				return p.invalid("expected ')'")
			}
			p.pos++
			p.depth--
			return nil
		}
	}
	if neg {
		return p.invalid("malformed number")
	}
	if !p.words {
		return p.invalid("bare word where a value was expected")
	}
	return p.parseUnquoted()
}

// parseUnquoted reads an unquoted string value up to a delimiter (comma,
// closing bracket, newline), trims it and writes it as a string. A stray
// closing quote right after it (abc",) is dropped.
func (p *parser) parseUnquoted() error {
	start := p.pos
	braces := 0
	for p.pos < len(p.in) {
		c := p.in[p.pos]
		if c == '{' {
			braces++
		} else if c == '}' && braces > 0 {
			braces--
			p.pos++
			continue
		}
		if c == ',' && braces > 0 {
			p.pos++
			continue
		}
		if c == ',' || c == '}' || c == ']' || c == '\n' || c == '\r' || c == '"' {
			break
		}
		if c == ')' && p.inCall > 0 {
			break
		}
		if c == '/' && p.pos+1 < len(p.in) && p.in[p.pos+1] == '*' {
			break
		}
		p.pos++
	}
	if p.eof() {
		return p.truncated("inside an unquoted value")
	}
	end := p.pos
	for end > start && (p.in[end-1] == ' ' || p.in[end-1] == '\t') {
		end--
	}
	if end == start {
		return p.invalid("empty unquoted value")
	}
	if p.in[p.pos] == '"' && (p.in[p.pos-1] == ' ' || p.in[p.pos-1] == '\t') {
		// value "next": the quote opens the next token (a missing comma)
	} else if p.in[p.pos] == '"' {
		// stray closing quote: abc", or abc"}
		j := p.pos + 1
		for j < len(p.in) && (p.in[j] == ' ' || p.in[j] == '\t') {
			j++
		}
		if j < len(p.in) && (p.in[j] == ',' || p.in[j] == '}' || p.in[j] == ']' || p.in[j] == '\n') {
			p.pos++
		} else if j >= len(p.in) {
			p.pos++
		} else {
			return p.invalid("quote inside an unquoted value")
		}
	}
	p.stages |= sUnquotedValues
	v := p.in[start:end]
	if !utf8.Valid(v) {
		return p.invalid("invalid UTF-8 in an unquoted value")
	}
	p.writeString(v)
	return nil
}
