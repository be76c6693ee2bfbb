package fastpath

// The fast path's walk over a document's bytes: values, objects and arrays
// checked against a node in one pass.

// Accept reports whether doc is one JSON value the schema accepts: true
// implies the general validator finds no error in it (see the package
// doc); false only means "not shown valid here".
func (c *Checker) Accept(doc []byte) bool {
	sc := scanner{doc: doc, budget: 16*len(doc) + 1024}
	sc.ws()
	if !sc.value(c.root, 0) {
		return false
	}
	sc.ws()
	return sc.pos == len(doc)
}

// scanner walks a document's bytes. Every method that checks a value leaves
// pos after it and returns false at the first thing it does not accept.
type scanner struct {
	doc []byte
	pos int
	buf []byte // scratch for decoding escaped strings
	// budget bounds the work: values visited, counting every applicator's
	// new look at the same value. Spent, the fast path gives up, so nested
	// allOf/$ref chains cannot make it slower than the general validator.
	budget int
}

func (sc *scanner) ws() {
	for sc.pos < len(sc.doc) {
		switch sc.doc[sc.pos] {
		case ' ', '\t', '\n', '\r':
			sc.pos++
		default:
			return
		}
	}
}

// value checks the value at pos against n (nil: syntax only).
func (sc *scanner) value(n *node, depth int) bool {
	sc.budget--
	if depth > maxDepth || sc.pos >= len(sc.doc) || sc.budget < 0 {
		return false
	}
	if n == nil {
		return sc.skip(depth)
	}
	if n.opaque || n.never {
		return false
	}
	// The applicators see the same value: each starts again from start
	// (anyOf until one branch accepts).
	if n.ref != nil || len(n.allOf) > 0 || len(n.anyOf) > 0 || len(n.oneOf) > 0 || n.hasNot || n.hasIf {
		start, end := sc.pos, -1
		if n.ref != nil && !sc.again(start, n.ref, depth+1, &end) {
			return false
		}
		for _, x := range n.allOf {
			if !sc.again(start, x, depth+1, &end) {
				return false
			}
		}
		if len(n.anyOf) > 0 {
			ok := false
			for _, x := range n.anyOf {
				if sc.again(start, x, depth+1, &end) {
					ok = true
					break
				}
			}
			if !ok {
				return false
			}
		}
		if len(n.oneOf) > 0 && !sc.oneOf(start, n.oneOf, depth+1, &end) {
			return false
		}
		if n.hasNot && !sc.rejects(start, n.not, depth+1) {
			return false
		}
		if n.hasIf {
			var branch *node
			var unused int
			switch {
			case sc.again(start, n.ifN, depth+1, &unused):
				branch = n.thenN
			case sc.rejects(start, n.ifN, depth+1):
				branch = n.elseN
			default:
				return false
			}
			if branch != nil && !sc.again(start, branch, depth+1, &end) {
				return false
			}
		}
		// A node with nothing else to check ends where an accepting
		// applicator ended; with none (not, an if without its branch) its
		// own scan below checks the value's syntax.
		if !n.hasOwn && end >= 0 {
			sc.pos = end
			return true
		}
		sc.pos = start
	}
	switch c := sc.doc[sc.pos]; {
	case c == '{':
		return n.allows(tObject) && !n.hasEnum && sc.object(n, depth)
	case c == '[':
		return n.allows(tArray) && !n.hasEnum && sc.array(n, depth)
	case c == '"':
		return n.allows(tString) && sc.str(n)
	case c == 't' || c == 'f':
		lit, t := "false", n.enumF
		if c == 't' {
			lit, t = "true", n.enumT
		}
		return n.allows(tBool) && (!n.hasEnum || t) && sc.literal(lit)
	case c == 'n':
		return n.allows(tNull) && (!n.hasEnum || n.enumLit&tNull != 0) && sc.literal("null")
	default:
		return !n.hasEnum && sc.num(n)
	}
}

// again checks the value at start against n, records where the value
// ended in *end when n accepts it, and moves pos back to start.
func (sc *scanner) again(start int, n *node, depth int, end *int) bool {
	sc.pos = start
	ok := sc.value(n, depth)
	if ok {
		*end = sc.pos
	}
	sc.pos = start
	return ok
}

func (n *node) allows(t uint8) bool { return n.types == 0 || n.types&t != 0 }

func (sc *scanner) literal(lit string) bool {
	if len(sc.doc)-sc.pos < len(lit) || string(sc.doc[sc.pos:sc.pos+len(lit)]) != lit {
		return false
	}
	sc.pos += len(lit)
	return true
}

// skip checks the syntax of one value, with the general validator's limit
// on exponents (Validate reports numbers beyond MaxExponent).
func (sc *scanner) skip(depth int) bool {
	if depth > maxDepth || sc.pos >= len(sc.doc) {
		return false
	}
	switch c := sc.doc[sc.pos]; c {
	case '{':
		return sc.object(nil, depth)
	case '[':
		return sc.array(nil, depth)
	case '"':
		_, _, _, ok := sc.strSpan()
		return ok
	case 't':
		return sc.literal("true")
	case 'f':
		return sc.literal("false")
	case 'n':
		return sc.literal("null")
	default:
		_, ok := sc.number()
		return ok
	}
}

// members walks the object at pos (its '{'): for each member it reads the
// name and the colon and calls member with the name (its raw bytes, and
// whether it has escapes), which must move pos past the value. It returns
// false at malformed JSON or as soon as member does; pos is then anywhere.
func (sc *scanner) members(member func(key []byte, esc bool) bool) bool {
	sc.pos++ // '{'
	sc.ws()
	if sc.pos < len(sc.doc) && sc.doc[sc.pos] == '}' {
		sc.pos++
		return true
	}
	for {
		if sc.pos >= len(sc.doc) || sc.doc[sc.pos] != '"' {
			return false
		}
		s, e, esc, ok := sc.strSpan()
		if !ok {
			return false
		}
		sc.ws()
		if sc.pos >= len(sc.doc) || sc.doc[sc.pos] != ':' {
			return false
		}
		sc.pos++
		sc.ws()
		if !member(sc.doc[s:e], esc) {
			return false
		}
		if more, ok := sc.next('}'); !more {
			return ok
		}
	}
}

// elements walks the array at pos (its '['), calling elem with each item's
// index; elem must move pos past the item. It returns the number of items,
// and false at malformed JSON or as soon as elem does.
func (sc *scanner) elements(elem func(i int) bool) (int, bool) {
	sc.pos++ // '['
	sc.ws()
	if sc.pos < len(sc.doc) && sc.doc[sc.pos] == ']' {
		sc.pos++
		return 0, true
	}
	for i := 0; ; i++ {
		if !elem(i) {
			return 0, false
		}
		if more, ok := sc.next(']'); !more {
			return i + 1, ok
		}
	}
}

// next moves past what follows a member or item: a comma and the space
// after it (more), or the closing bracket (ok, no more); anything else is
// not JSON (neither).
func (sc *scanner) next(closing byte) (more, ok bool) {
	sc.ws()
	if sc.pos >= len(sc.doc) {
		return false, false
	}
	switch sc.doc[sc.pos] {
	case ',':
		sc.pos++
		sc.ws()
		return true, true
	case closing:
		sc.pos++
		return false, true
	}
	return false, false
}

// object checks an object; n == nil checks its syntax only.
func (sc *scanner) object(n *node, depth int) bool {
	var seen uint64
	count := 0
	var keys [][]byte // for minProperties: a repeated key counts once when decoded
	ok := sc.members(func(key []byte, esc bool) bool {
		var child *node
		if n != nil && n.hasObjRule {
			if esc {
				return false // names compared as decoded text: not here
			}
			f, ok := n.fields[string(key)]
			if !ok {
				f.bit = -1
			}
			if f.bit >= 0 {
				seen |= 1 << f.bit
			}
			if n.minProps > 0 {
				for _, k := range keys {
					if string(k) == string(key) {
						return false
					}
				}
				keys = append(keys, key)
			}
			switch {
			case f.declared:
				child = f.node
			case n.addlFalse:
				return false
			default:
				child = n.addl
			}
		}
		count++
		return sc.value(child, depth+1)
	})
	// count may count a repeated key twice (once when decoded): still
	// sound for maxProperties; minProperties refused repeats.
	return ok && (n == nil || n.objectEnd(seen, count))
}

func (n *node) objectEnd(seen uint64, count int) bool {
	if n.nRequired > 0 && seen != (uint64(1)<<n.nRequired)-1 {
		return false
	}
	return count >= n.minProps && (n.maxProps < 0 || count <= n.maxProps)
}

// array checks an array; n == nil checks its syntax only.
func (sc *scanner) array(n *node, depth int) bool {
	var strs [][]byte // the items' decoded text, for uniqueItems
	count, ok := sc.elements(func(i int) bool {
		var child *node
		if n != nil && n.hasArrRule {
			switch {
			case i < len(n.prefix):
				child = n.prefix[i]
			case n.itemsFalse:
				return false
			default:
				child = n.items
			}
			if n.unique {
				// Only strings are compared here, as decoded text.
				if sc.pos >= len(sc.doc) || sc.doc[sc.pos] != '"' {
					return false
				}
				s, e, esc, ok := sc.peekStr()
				if !ok {
					return false
				}
				text := sc.doc[s:e]
				if esc {
					text = unescape(sc.doc[s-1 : e+1])
				}
				for _, o := range strs {
					if string(o) == string(text) {
						return false
					}
				}
				strs = append(strs, text)
			}
		}
		return sc.value(child, depth+1)
	})
	return ok && (n == nil || n.arrayEnd(count))
}

func (n *node) arrayEnd(count int) bool {
	return count >= n.minItems && (n.maxItems < 0 || count <= n.maxItems)
}
