package jsontext

import (
	"bytes"
	"math"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

const hexDigits = "0123456789abcdef"

// safeJSON and safeHTML tell the ASCII bytes AppendString copies as they
// are, without and with HTML escaping.
var safeJSON, safeHTML = func() (j, h [utf8.RuneSelf]bool) {
	for c := range utf8.RuneSelf {
		j[c] = c >= 0x20 && c != '"' && c != '\\'
		h[c] = j[c] && c != '<' && c != '>' && c != '&'
	}
	return j, h
}()

// AppendString appends s as a JSON string. With html, it escapes as
// encoding/json.Marshal does by default: <, >, & and U+2028, U+2029 as \u
// escapes as well. Without, only what JSON requires. Either way \b, \f, \n,
// \r, \t get their short escapes, other control characters \u00XX, and
// invalid UTF-8 \ufffd.
func AppendString(b []byte, s string, html bool) []byte {
	safe := &safeJSON
	if html {
		safe = &safeHTML
	}
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if safe[c] {
				i++
				continue
			}
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if html && (r == '\u2028' || r == '\u2029') {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}

// Ones and High are a byte's 0x01 and 0x80 in every byte of a word.
const (
	Ones = 0x0101010101010101
	High = 0x8080808080808080
)

// AppendFloat appends f as encoding/json writes a float64: strconv's 'f'
// format, or 'e' for magnitudes below 1e-6 or from 1e21, with a one-digit
// negative exponent not zero-padded (1e-7, not 1e-07). f must be finite
// (json.Marshal refuses NaN and infinities).
func AppendFloat(b []byte, f float64) []byte {
	abs := math.Abs(f)
	format := byte('f')
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		format = 'e'
	}
	b = strconv.AppendFloat(b, f, format, -1, 64)
	if format == 'e' {
		n := len(b)
		if n >= 4 && b[n-4] == 'e' && b[n-3] == '-' && b[n-2] == '0' {
			b[n-2] = b[n-1]
			b = b[:n-1]
		}
	}
	return b
}

// Hex4 reads the four hex digits at b[i:].
func Hex4(b []byte, i int) (rune, bool) {
	if i < 0 || i+4 > len(b) {
		return 0, false
	}
	var r rune
	for _, c := range b[i : i+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// EscapedRune reads the \u escape at b[i:] (b[i] is the backslash): one
// rune, or a surrogate pair written as two escapes. n is the bytes read (6
// or 12). A lone surrogate is returned as U+FFFD with lone set, as
// encoding/json decodes it; ok is false when the hex digits are not.
func EscapedRune(b []byte, i int) (r rune, n int, lone, ok bool) {
	if i+1 >= len(b) || b[i] != '\\' || b[i+1] != 'u' {
		return 0, 0, false, false
	}
	r, ok = Hex4(b, i+2)
	if !ok {
		return 0, 0, false, false
	}
	if !utf16.IsSurrogate(r) {
		return r, 6, false, true
	}
	if i+7 < len(b) && b[i+6] == '\\' && b[i+7] == 'u' {
		if lo, ok := Hex4(b, i+8); ok {
			if pair := utf16.DecodeRune(r, lo); pair != utf8.RuneError {
				return pair, 12, false, true
			}
		}
	}
	return utf8.RuneError, 6, true, true
}

// AppendUnescaped appends the decoded content of a JSON string (the bytes
// between its quotes) to dst, as encoding/json decodes it (a lone
// surrogate becomes U+FFFD; lone reports one). ok is false at a malformed
// escape; what was decoded up to it is returned.
func AppendUnescaped(dst, raw []byte) (out []byte, lone, ok bool) {
	for i := 0; i < len(raw); {
		c := raw[i]
		if c != '\\' {
			// The run up to the next backslash, found by IndexByte's vector
			// scan: an answer that is JSON has one every few bytes (\" and
			// \n), prose far apart.
			j := bytes.IndexByte(raw[i+1:], '\\')
			if j < 0 {
				j = len(raw)
			} else {
				j += i + 1
			}
			dst = append(dst, raw[i:j]...)
			i = j
			continue
		}
		if i+1 >= len(raw) {
			return dst, lone, false
		}
		switch raw[i+1] {
		case '"', '\\', '/':
			dst = append(dst, raw[i+1])
		case 'b':
			dst = append(dst, '\b')
		case 'f':
			dst = append(dst, '\f')
		case 'n':
			dst = append(dst, '\n')
		case 'r':
			dst = append(dst, '\r')
		case 't':
			dst = append(dst, '\t')
		case 'u':
			r, n, l, ok := EscapedRune(raw, i)
			if !ok {
				return dst, lone, false
			}
			lone = lone || l
			dst = utf8.AppendRune(dst, r)
			i += n
			continue
		default:
			return dst, lone, false
		}
		i += 2
	}
	return dst, lone, true
}
