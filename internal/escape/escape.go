// Package escape makes text from outside (a model's answer, a stored
// outcome, a provider's status word) safe to print on a terminal: control
// characters are written as Go escapes (ESC as \x1b, BEL as \a, CR as \r,
// a C1 control as \u009b, a bidi override as \u202e, a byte that is not
// UTF-8 as \xff), so a model cannot retitle the window, clear the screen,
// overwrite the line the operator reads or reorder what it shows.
// Everything else, backslashes included, is left as it is, so ordinary text
// reads as before.
//
//	fmt.Fprintf(w, "%s\t%s\n", escape.Line(id), escape.Line(reason))
//	w.Write([]byte(escape.Text(rawOutput))) // keeps its line breaks and tabs
//
// JSON output needs none of this: encoding/json escapes control characters.
package escape

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// Line escapes every control character of s, line breaks and tabs
// included: for a table cell or a one-line field.
func Line(s string) string { return quote(s, false) }

// Text escapes the control characters of s but its line breaks (\n) and
// tabs: for a block of text shown as it was written (a model's raw output,
// a job's input).
func Text(s string) string { return quote(s, true) }

// unsafe reports whether r must be escaped.
func unsafe(r rune, keepLines bool) bool {
	switch {
	case keepLines && (r == '\n' || r == '\t'):
		return false
	case r == utf8.RuneError:
		return true // only when it stands for a byte that is not UTF-8, see quote
	}
	return unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) ||
		r == '\u2028' || r == '\u2029' // line and paragraph separators
}

func quote(s string, keepLines bool) string {
	first := -1
	for i, r := range s {
		if unsafe(r, keepLines) && (r != utf8.RuneError || isBadByte(s[i:])) {
			first = i
			break
		}
	}
	if first < 0 {
		return s
	}
	var b strings.Builder
	b.Grow(len(s) + 8)
	b.WriteString(s[:first])
	for i := first; i < len(s); {
		r, w := utf8.DecodeRuneInString(s[i:])
		switch {
		case r == utf8.RuneError && w == 1:
			b.WriteString(`\x`)
			b.WriteString(strconv.FormatUint(uint64(s[i])>>4, 16))
			b.WriteString(strconv.FormatUint(uint64(s[i])&0xf, 16))
		case unsafe(r, keepLines) && r != utf8.RuneError:
			q := strconv.QuoteRune(r) // '\x1b', '\a', '\u202e'
			b.WriteString(q[1 : len(q)-1])
		default:
			b.WriteString(s[i : i+w])
		}
		i += w
	}
	return b.String()
}

// isBadByte reports whether s starts with a byte that is not UTF-8 (and not
// a U+FFFD written out, which is text like any other).
func isBadByte(s string) bool {
	_, w := utf8.DecodeRuneInString(s)
	return w == 1
}
