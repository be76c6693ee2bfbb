package eval

import (
	"math/big"
	"strconv"
)

// appendNumber appends the canonical form of the JSON number s to b: "0"
// for zero (any sign), else an optional "-", the significant digits (no
// leading or trailing zeros) and "e" with the exponent of the last digit:
// 30, 30.0, 3e1 and 0.3e2 are all "3e1". Equal numbers, and only they,
// share a form. It takes time linear in len(s) (big.Rat.SetString builds
// 10^N for an exponent N: 1e1000000 took half a second), the exponent is
// read exactly however long it is, and ok is false when s is not a JSON
// number.
func appendNumber(b []byte, s string) (_ []byte, ok bool) {
	i := 0
	neg := i < len(s) && s[i] == '-'
	if neg {
		i++
	}
	intStart := i
	for i < len(s) && isDigit(s[i]) {
		i++
	}
	intEnd := i
	if intEnd == intStart || (s[intStart] == '0' && intEnd-intStart > 1) {
		return b, false
	}
	fracStart, fracEnd := i, i
	if i < len(s) && s[i] == '.' {
		i++
		fracStart = i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		fracEnd = i
		if fracEnd == fracStart {
			return b, false
		}
	}
	expNeg := false
	expStart, expEnd := i, i
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			expNeg = s[i] == '-'
			i++
		}
		expStart = i
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		expEnd = i
		if expEnd == expStart {
			return b, false
		}
	}
	if i != len(s) {
		return b, false
	}
	// the digits are s[intStart:intEnd] then s[fracStart:fracEnd]; find the
	// first and last non-zero ones
	digit := func(k int) byte { // k-th digit of the concatenation
		if n := intEnd - intStart; k < n {
			return s[intStart+k]
		} else {
			return s[fracStart+k-n]
		}
	}
	n := intEnd - intStart + fracEnd - fracStart
	first := 0
	for first < n && digit(first) == '0' {
		first++
	}
	if first == n {
		return append(b, '0'), true
	}
	last := n - 1
	for digit(last) == '0' {
		last--
	}
	if neg {
		b = append(b, '-')
	}
	for k := first; k <= last; k++ {
		b = append(b, digit(k))
	}
	b = append(b, 'e')
	// the exponent of the last significant digit: exp - (fraction digits)
	// + (trailing zeros dropped)
	shift := int64(n-1-last) - int64(fracEnd-fracStart)
	es := s[expStart:expEnd]
	for len(es) > 1 && es[0] == '0' {
		es = es[1:]
	}
	if len(es) <= 18 { // fits an int64 with room for shift
		e, _ := strconv.ParseInt(es, 10, 64)
		if expNeg {
			e = -e
		}
		return strconv.AppendInt(b, e+shift, 10), true
	}
	var e big.Int
	e.SetString(es, 10)
	if expNeg {
		e.Neg(&e)
	}
	e.Add(&e, big.NewInt(shift))
	return e.Append(b, 10), true
}

func isDigit(c byte) bool { return '0' <= c && c <= '9' }
