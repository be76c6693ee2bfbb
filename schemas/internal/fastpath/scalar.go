package fastpath

// The fast path's strings and numbers: spans read in place, escapes decoded
// only when present, numbers compared exactly or left to the general
// validator.

import (
	"math"
	"strconv"
	"unicode/utf8"

	"github.com/go-json-experiment/json/jsontext"
)

// peekStr returns the content span of the string at pos without moving.
func (sc *scanner) peekStr() (start, end int, esc, ok bool) {
	p := sc.pos
	start, end, esc, ok = sc.strSpan()
	sc.pos = p
	return
}

// plain marks the bytes a string's content can hold as they are: ASCII,
// not a control character, quote or backslash.
var plain = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return
}()

// strSpan moves past the string at pos (which starts with '"') and returns
// its content span and whether it holds escapes. It refuses what decoding
// would turn into U+FFFD: invalid UTF-8 and lone surrogate escapes. A
// string with escapes is decoded (by jsontext.AppendUnquote, which refuses
// a malformed escape and a lone surrogate) into sc.buf, where str reads it.
func (sc *scanner) strSpan() (start, end int, esc, ok bool) {
	sc.pos++ // '"'
	start = sc.pos
	d := sc.doc
	i := sc.pos
	for {
		for i < len(d) && plain[d[i]] {
			i++
		}
		if i >= len(d) {
			return 0, 0, false, false
		}
		switch c := d[i]; {
		case c == '"':
			sc.pos = i + 1
			if esc {
				var err error
				if sc.buf, err = jsontext.AppendUnquote(sc.buf[:0], d[start-1:i+1]); err != nil {
					return 0, 0, false, false
				}
			}
			return start, i, esc, true
		case c == '\\':
			// the escaped byte is skipped (a \u's hex digits are plain);
			// AppendUnquote checks the escapes at the closing quote
			esc = true
			i += 2
		case c < 0x20:
			return 0, 0, false, false
		default:
			r, size := utf8.DecodeRune(d[i:])
			if r == utf8.RuneError && size == 1 {
				return 0, 0, false, false
			}
			i += size
		}
	}
}

// str checks the string at pos against n's string rules.
func (sc *scanner) str(n *node) bool {
	s, e, esc, ok := sc.strSpan()
	if !ok {
		return false
	}
	raw := sc.doc[s:e]
	if !n.hasStrRule && !n.hasEnum && n.format == nil {
		return true
	}
	text := raw
	if esc {
		text = sc.buf // decoded by strSpan
	}
	if n.hasEnum {
		found := false
		for _, v := range n.enumStr {
			if v == string(text) {
				found = true
				break
			}
		}
		if !found {
			return false
		}
	}
	if n.minLen > 0 || n.maxLen >= 0 {
		l := utf8.RuneCount(text)
		if l < n.minLen || (n.maxLen >= 0 && l > n.maxLen) {
			return false
		}
	}
	if n.pattern == nil && n.format == nil {
		return true
	}
	str := string(text)
	if n.pattern != nil && !n.pattern.MatchString(str) {
		return false
	}
	return n.format == nil || n.format.Validate(str) == nil
}

// unescape returns the decoded content of a string strSpan accepted (no
// malformed escape, no lone surrogate), quoted its whole text with quotes.
func unescape(quoted []byte) []byte {
	out, _ := jsontext.AppendUnquote(nil, quoted)
	return out
}

// MaxExponent bounds the decimal exponent of the numbers the fast path
// accepts. It is the general validator's bound: schemas.Validate reports a
// number beyond it (comparing it exactly would take minutes), so the fast
// path must not accept one.
const MaxExponent = 400

// numInfo is what number scanning learns about a number's text.
type numInfo struct {
	start, end int
	integral   bool // no fraction digit other than 0, no exponent
	fraction   bool // a fraction digit other than 0
	exponent   bool
	digits     int // digits before the point
}

// number moves past a JSON number, refusing exponents beyond MaxExponent.
func (sc *scanner) number() (numInfo, bool) {
	d := sc.doc
	i := sc.pos
	ni := numInfo{start: i, integral: true}
	if i < len(d) && d[i] == '-' {
		i++
	}
	switch {
	case i < len(d) && d[i] == '0':
		i++
	case i < len(d) && '1' <= d[i] && d[i] <= '9':
		for i < len(d) && '0' <= d[i] && d[i] <= '9' {
			i++
			ni.digits++
		}
	default:
		return ni, false
	}
	if i < len(d) && d[i] == '.' {
		i++
		if i >= len(d) || d[i] < '0' || d[i] > '9' {
			return ni, false
		}
		for i < len(d) && '0' <= d[i] && d[i] <= '9' {
			if d[i] != '0' {
				ni.integral, ni.fraction = false, true
			}
			i++
		}
	}
	if i < len(d) && (d[i] == 'e' || d[i] == 'E') {
		ni.integral, ni.exponent = false, true
		i++
		if i < len(d) && (d[i] == '+' || d[i] == '-') {
			i++
		}
		if i >= len(d) || d[i] < '0' || d[i] > '9' {
			return ni, false
		}
		exp := 0
		for i < len(d) && '0' <= d[i] && d[i] <= '9' {
			exp = exp*10 + int(d[i]-'0')
			if exp > MaxExponent {
				return ni, false
			}
			i++
		}
	}
	ni.end = i
	sc.pos = i
	return ni, true
}

// pow10 holds the powers of ten float64 represents exactly.
var pow10 = [...]float64{1e0, 1e1, 1e2, 1e3, 1e4, 1e5, 1e6, 1e7, 1e8, 1e9, 1e10, 1e11, 1e12, 1e13, 1e14, 1e15}

// exactFloat converts the JSON number b (as number scanned it) the way
// strconv.ParseFloat does, for the common shape only: no exponent and at
// most 15 digits in all, so the digits are an integer m below 2^53 and the
// value m / 10^k is one correctly rounded division of two exact floats.
// ok is false for any other number (ParseFloat takes it).
func exactFloat(b []byte) (f float64, ok bool) {
	neg := len(b) > 0 && b[0] == '-'
	if neg {
		b = b[1:]
	}
	var m uint64
	digits, frac := 0, -1
	for _, c := range b {
		switch {
		case '0' <= c && c <= '9':
			m = m*10 + uint64(c-'0')
			digits++
			if frac >= 0 {
				frac++
			}
		case c == '.':
			frac = 0
		default:
			return 0, false // exponent
		}
	}
	if digits == 0 || digits > 15 {
		return 0, false
	}
	f = float64(m)
	if frac > 0 {
		f /= pow10[frac]
	}
	if neg {
		f = -f
	}
	return f, true
}

// num checks the number at pos against n's type and bounds.
func (sc *scanner) num(n *node) bool {
	ni, ok := sc.number()
	if !ok {
		return false
	}
	if n.types != 0 && n.types&tNumber == 0 && !(n.types&tInteger != 0 && ni.integral) {
		return false
	}
	if len(n.bounds) == 0 {
		return true
	}
	f, ok := exactFloat(sc.doc[ni.start:ni.end])
	if !ok {
		var err error
		f, err = strconv.ParseFloat(string(sc.doc[ni.start:ni.end]), 64)
		if err != nil || math.IsInf(f, 0) {
			return false
		}
	}
	// Conversion to the nearest float64 is monotonic, so a strict order of
	// the floats is the same strict order of the exact values. Equal floats
	// say the values are equal only when both are exact: the bound (known)
	// and the number, which is when it is an integer of at most 15 digits.
	// Other equal floats are left to the exact comparison of the general
	// path.
	for _, b := range n.bounds {
		switch {
		case f == b.f:
			if b.exclusive || !b.exact || !ni.integral || ni.digits > 15 {
				return false
			}
		case b.above && f < b.f, !b.above && f > b.f:
			return false
		}
	}
	return true
}
