package sanitize

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
