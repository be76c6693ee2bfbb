package fastpath

import (
	"strconv"
	"unicode/utf8"
)

// oneOf, not and if/then/else pass or fail on a branch being invalid, which
// the accepting walk cannot say (its false means "not shown valid"). rejects
// is the other half of the fast path, with the mirror contract:
// rejects(n) == true implies the general validator finds n invalid for the
// value. It decides only what is plain from the value itself (a wrong type,
// a value outside an enum or const, a missing required property, a
// property whose value is rejected, a bound or length broken, an item
// rejected, too many or too few items or properties) and says false, "not
// shown invalid", for everything else. That is enough for the unions
// models are asked for: a discriminator property with a const per branch,
// or branches of different types.

// oneOf holds when exactly one branch accepts the value and every other
// branch is shown invalid. end is set as for again.
func (sc *scanner) oneOf(start int, branches []*node, depth int, end *int) bool {
	accepted := -1
	for i, b := range branches {
		if sc.rejects(start, b, depth) {
			continue
		}
		if accepted >= 0 || !sc.again(start, b, depth, end) {
			return false // a second candidate, or one neither shown valid nor invalid
		}
		accepted = i
	}
	return accepted >= 0
}

// rejects reports whether n is shown not to hold for the value at start; it
// leaves pos where it found it.
func (sc *scanner) rejects(start int, n *node, depth int) bool {
	pos := sc.pos
	defer func() { sc.pos = pos }()
	return sc.rejectsAt(start, n, depth)
}

func (sc *scanner) rejectsAt(start int, n *node, depth int) bool {
	sc.budget--
	if n == nil || n.opaque || depth > maxDepth || sc.budget < 0 || start >= len(sc.doc) {
		return false
	}
	if n.never {
		return true
	}
	// Any failing allOf member or $ref fails the node; so does an anyOf
	// whose every branch fails.
	if n.ref != nil && sc.rejectsAt(start, n.ref, depth+1) {
		return true
	}
	for _, x := range n.allOf {
		if sc.rejectsAt(start, x, depth+1) {
			return true
		}
	}
	if len(n.anyOf) > 0 {
		all := true
		for _, x := range n.anyOf {
			if !sc.rejectsAt(start, x, depth+1) {
				all = false
				break
			}
		}
		if all {
			return true
		}
	}
	sc.pos = start
	switch c := sc.doc[start]; {
	case c == '{':
		return (!n.allows(tObject) || (n.hasEnum && !n.enumOther)) || sc.rejectsObject(n, depth)
	case c == '[':
		return (!n.allows(tArray) || (n.hasEnum && !n.enumOther)) || sc.rejectsArray(n, depth)
	case c == '"':
		return sc.rejectsString(n)
	case c == 't':
		return !n.allows(tBool) || (n.hasEnum && !n.enumT)
	case c == 'f':
		return !n.allows(tBool) || (n.hasEnum && !n.enumF)
	case c == 'n':
		return !n.allows(tNull) || (n.hasEnum && n.enumLit&tNull == 0)
	default:
		return sc.rejectsNumber(n)
	}
}

func (sc *scanner) rejectsString(n *node) bool {
	if !n.allows(tString) {
		return true
	}
	if !n.hasEnum && !n.hasStrRule && n.format == nil {
		return false
	}
	s, e, esc, ok := sc.strSpan()
	if !ok {
		return false // decoding would change it (U+FFFD): not decided here
	}
	text := sc.doc[s:e]
	if esc {
		text = unescape(sc.doc[s-1 : e+1])
	}
	if n.hasEnum && !contains(n.enumStr, string(text)) {
		return true
	}
	if n.minLen > 0 || n.maxLen >= 0 {
		if l := utf8.RuneCount(text); l < n.minLen || (n.maxLen >= 0 && l > n.maxLen) {
			return true
		}
	}
	if n.pattern != nil && !n.pattern.MatchString(string(text)) {
		return true
	}
	return n.format != nil && n.format.Validate(string(text)) != nil
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

func (sc *scanner) rejectsNumber(n *node) bool {
	ni, ok := sc.number()
	if !ok {
		return false
	}
	if n.hasEnum && !n.enumOther {
		return true
	}
	if n.types != 0 && n.types&tNumber == 0 {
		// Only integers allowed: shown wrong when there is a fraction
		// and no exponent (1.5; 1.5e1 is an integer).
		if n.types&tInteger == 0 || (ni.fraction && !ni.exponent) {
			return true
		}
	}
	if len(n.bounds) == 0 {
		return false
	}
	f, err := strconv.ParseFloat(string(sc.doc[ni.start:ni.end]), 64)
	if err != nil {
		return false
	}
	for _, b := range n.bounds {
		switch {
		case b.above && f < b.f, !b.above && f > b.f:
			return true
		case f == b.f && b.exclusive && b.exact && ni.integral && ni.digits <= 15:
			return true // equal to an exclusive bound, both exact
		}
	}
	return false
}

// rejectsObject: a property shown invalid, an unknown property where none
// is allowed, a required one missing, too few or too many properties. An
// object with an escaped or repeated name is not decided here; nor is one
// that is not JSON to its end.
func (sc *scanner) rejectsObject(n *node, depth int) bool {
	if !n.hasObjRule {
		return false
	}
	var keys [][]byte
	var seen uint64
	shown := false
	ok := sc.members(func(key []byte, esc bool) bool {
		if esc {
			return false
		}
		for _, k := range keys {
			if string(k) == string(key) {
				return false // the decoded map keeps the last: not decided here
			}
		}
		keys = append(keys, key)
		f, known := n.fields[string(key)]
		if known && f.bit >= 0 {
			seen |= 1 << f.bit
		}
		if !shown {
			at := sc.pos
			switch {
			case known && f.declared:
				shown = sc.rejectsAt(at, f.node, depth+1)
			case n.addlFalse:
				shown = true
			case n.addl != nil:
				shown = sc.rejectsAt(at, n.addl, depth+1)
			}
			sc.pos = at
		}
		return sc.skip(depth + 1)
	})
	return ok && (shown || n.objectBroken(seen, len(keys)))
}

// objectBroken: a required property missing, or a property count out of
// bounds (count without repeated names).
func (n *node) objectBroken(seen uint64, count int) bool {
	return (n.nRequired > 0 && seen != (uint64(1)<<n.nRequired)-1) ||
		count < n.minProps || (n.maxProps >= 0 && count > n.maxProps)
}

// rejectsArray: an item shown invalid, an item where none is allowed, too
// few or too many items. uniqueItems is not decided here.
func (sc *scanner) rejectsArray(n *node, depth int) bool {
	if !n.hasArrRule {
		return false
	}
	shown := false
	count, ok := sc.elements(func(i int) bool {
		if !shown {
			at := sc.pos
			switch {
			case i < len(n.prefix):
				shown = sc.rejectsAt(at, n.prefix[i], depth+1)
			case n.itemsFalse:
				shown = true
			default:
				shown = sc.rejectsAt(at, n.items, depth+1)
			}
			sc.pos = at
		}
		return sc.skip(depth + 1)
	})
	return ok && (shown || count < n.minItems || (n.maxItems >= 0 && count > n.maxItems))
}
