package sanitize

// Strings in the repair parser: quoted in any of the styles models use,
// escaped as JSON requires, and concatenated ("a" + "b").

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
