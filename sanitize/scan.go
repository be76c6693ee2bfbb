package sanitize

// The repair parser's lexical helpers: white space (ASCII and Unicode),
// comments, quote kinds and delimiters.

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

// quote kinds
const (
	qNone = iota
	qDouble
	qSingle
	qSmartDouble // “ ” „ ＂
	qSmartSingle // ‘ ’
	qBacktick    // ` ´
)
