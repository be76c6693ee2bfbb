package sanitize

// Bare words in the repair parser: numbers kept as spelled, Python and
// JavaScript literals, and unquoted text.

import (
	"unicode/utf8"
)

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
