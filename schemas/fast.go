package schemas

import (
	"math"
	"math/big"
	"strconv"
	"unicode/utf8"

	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/go-json-experiment/json/jsontext"
)

// The fast path: most documents a worker validates are valid, and for them
// the general validator's cost (decoding the whole document into maps and
// json.Numbers, comparing every bound as a big.Rat) buys nothing but a nil.
// A fast node is a schema compiled once more, from the general validator's
// own compiled form, into a checker that walks the document's bytes in one
// pass without decoding it.
//
// The contract is one-sided: accept(doc) == true implies the general
// validator finds no error and Validate would return no diagnostic (the
// differential tests and FuzzFastPath hold it to that). false only means "not
// shown valid here": the document may be invalid, or use something the fast
// path does not decide (a keyword it does not implement, an escaped key, a
// number it cannot compare exactly, a oneOf whose other branches are not
// plainly invalid). Validate then runs the general validator, which
// produces the diagnostics. Nothing the fast path does can change a
// verdict, only skip work when the verdict is "valid".

// fastMaxDepth bounds nesting (of the document and of $ref chains at one
// value); deeper than that, the fast path gives up.
const fastMaxDepth = 512

// stringFormats are the formats whose checks (in the general validator)
// ignore values that are not strings.
var stringFormats = map[string]bool{
	"json-pointer": true, "relative-json-pointer": true, "uuid": true, "duration": true,
	"period": true, "ipv4": true, "ipv6": true, "hostname": true, "email": true, "date": true,
	"time": true, "date-time": true, "uri": true, "iri": true, "uri-reference": true,
	"iri-reference": true, "uri-template": true, "semver": true,
}

// JSON value types as a bit set.
const (
	tNull uint8 = 1 << iota
	tBool
	tInteger
	tNumber // every number; tInteger is the subset with no fractional part
	tString
	tArray
	tObject
)

var typeBits = map[string]uint8{
	"null": tNull, "boolean": tBool, "integer": tInteger, "number": tNumber | tInteger,
	"string": tString, "array": tArray, "object": tObject,
}

// fastNode is one compiled subschema. A nil *fastNode accepts any value.
type fastNode struct {
	opaque bool // uses a keyword the fast path does not decide: never accepts
	never  bool // the false schema
	hasOwn bool // has rules besides the applicators ($ref, allOf, anyOf, oneOf, not, if)

	types uint8 // allowed types; 0 = any

	hasEnum bool // enum or const: the value must be one of these
	enumStr []string
	enumLit uint8 // tNull, and tBool for true / false in enumTrue/enumFalse
	enumT   bool
	enumF   bool
	// enumOther: the enum holds a number, array or object (compared by
	// the general validator only)
	enumOther bool

	format *jsonschema.Format

	ref   *fastNode
	allOf []*fastNode
	anyOf []*fastNode
	// oneOf, not and if/then/else need a branch shown invalid, which
	// rejects (fastreject.go) does for the common cases
	oneOf  []*fastNode
	hasNot bool
	not    *fastNode
	hasIf  bool
	ifN    *fastNode
	thenN  *fastNode
	elseN  *fastNode

	// objects
	fields     map[string]fastField // properties and required names
	nRequired  int
	addlFalse  bool
	addl       *fastNode // when !addlFalse; nil = any
	minProps   int
	maxProps   int // -1 = none
	hasObjRule bool

	// arrays
	prefix     []*fastNode
	items      *fastNode // after prefix; nil = any
	itemsFalse bool      // no items after prefix
	minItems   int
	maxItems   int // -1 = none
	unique     bool
	hasArrRule bool

	// strings
	minLen     int
	maxLen     int // -1 = none
	pattern    jsonschema.Regexp
	hasStrRule bool

	// numbers: bounds as the nearest float64 of the exact bound; a value
	// whose float equals a bound's float is not decided here (see num)
	bounds []fastBound
}

// fastBound is one of minimum, exclusiveMinimum (above) or maximum,
// exclusiveMaximum (below).
// fastField is what an object's node knows of one property name.
type fastField struct {
	node     *fastNode // when declared in properties
	declared bool
	bit      int // its bit among the required names, or -1
}

type fastBound struct {
	f         float64
	above     bool // the value must be above (minimum) or below (maximum)
	exclusive bool
	exact     bool // f is the bound exactly
}

// compileFast builds the fast checker of a compiled schema.
func compileFast(sch *jsonschema.Schema) *fastNode {
	return (&fastCompiler{memo: map[*jsonschema.Schema]*fastNode{}}).node(sch)
}

type fastCompiler struct {
	memo map[*jsonschema.Schema]*fastNode
}

func (c *fastCompiler) node(s *jsonschema.Schema) *fastNode {
	if s == nil {
		return nil
	}
	if n, ok := c.memo[s]; ok {
		return n
	}
	n := &fastNode{maxProps: -1, maxItems: -1, maxLen: -1}
	c.memo[s] = n // before the children: $ref cycles end here
	if !supported(s) {
		n.opaque = true
		return n
	}
	if s.Bool != nil {
		n.never = !*s.Bool
		return n
	}
	if s.Types != nil {
		for _, t := range s.Types.ToStrings() {
			n.types |= typeBits[t]
		}
	}
	if s.Enum != nil {
		n.hasEnum = true
		for _, v := range s.Enum.Values {
			n.addEnum(v)
		}
	}
	if s.Const != nil {
		if n.hasEnum {
			n.opaque = true // both: rare, not worth intersecting
			return n
		}
		n.hasEnum = true
		n.addEnum(*s.Const)
	}
	if s.Format != nil {
		if s.Format.Name == "regex" || !stringFormats[s.Format.Name] {
			n.opaque = true
			return n
		}
		n.format = s.Format
	}
	n.ref = c.node(s.Ref)
	for _, x := range s.AllOf {
		n.allOf = append(n.allOf, c.node(x))
	}
	for _, x := range s.AnyOf {
		n.anyOf = append(n.anyOf, c.node(x))
	}
	for _, x := range s.OneOf {
		n.oneOf = append(n.oneOf, c.node(x))
	}
	if s.Not != nil {
		n.hasNot, n.not = true, c.node(s.Not)
	}
	if s.If != nil {
		n.hasIf, n.ifN, n.thenN, n.elseN = true, c.node(s.If), c.node(s.Then), c.node(s.Else)
	}

	if len(s.Properties) > 0 || len(s.Required) > 0 {
		n.fields = make(map[string]fastField, len(s.Properties)+len(s.Required))
		for k, x := range s.Properties {
			n.fields[k] = fastField{node: c.node(x), declared: true, bit: -1}
		}
		for _, k := range s.Required {
			f, ok := n.fields[k]
			if !ok {
				f.bit = -1
			}
			if f.bit < 0 {
				f.bit = n.nRequired
				n.nRequired++
			}
			n.fields[k] = f
		}
		if n.nRequired > 64 {
			n.opaque = true
			return n
		}
		n.hasObjRule = true
	}
	switch a := s.AdditionalProperties.(type) {
	case bool:
		n.addlFalse = !a
		n.hasObjRule = n.hasObjRule || !a
	case *jsonschema.Schema:
		n.addl = c.node(a)
		n.hasObjRule = true
	}
	if s.MinProperties != nil {
		n.minProps, n.hasObjRule = *s.MinProperties, true
	}
	if s.MaxProperties != nil {
		n.maxProps, n.hasObjRule = *s.MaxProperties, true
	}

	switch it := s.Items.(type) { // drafts before 2020-12
	case *jsonschema.Schema:
		n.items = c.node(it)
		n.hasArrRule = true
	case []*jsonschema.Schema:
		for _, x := range it {
			n.prefix = append(n.prefix, c.node(x))
		}
		switch a := s.AdditionalItems.(type) {
		case bool:
			n.itemsFalse = !a
		case *jsonschema.Schema:
			n.items = c.node(a)
		}
		n.hasArrRule = true
	}
	if len(s.PrefixItems) > 0 {
		for _, x := range s.PrefixItems {
			n.prefix = append(n.prefix, c.node(x))
		}
		n.hasArrRule = true
	}
	if s.Items2020 != nil {
		n.items = c.node(s.Items2020)
		if s.Items2020.Bool != nil && !*s.Items2020.Bool {
			n.itemsFalse, n.items = true, nil
		}
		n.hasArrRule = true
	}
	if s.MinItems != nil {
		n.minItems, n.hasArrRule = *s.MinItems, true
	}
	if s.MaxItems != nil {
		n.maxItems, n.hasArrRule = *s.MaxItems, true
	}
	if s.UniqueItems {
		n.unique, n.hasArrRule = true, true
	}

	if s.MinLength != nil {
		n.minLen, n.hasStrRule = *s.MinLength, true
	}
	if s.MaxLength != nil {
		n.maxLen, n.hasStrRule = *s.MaxLength, true
	}
	if s.Pattern != nil {
		n.pattern, n.hasStrRule = s.Pattern, true
	}

	for _, b := range []struct {
		r                *big.Rat
		above, exclusive bool
	}{{s.Minimum, true, false}, {s.ExclusiveMinimum, true, true}, {s.Maximum, false, false}, {s.ExclusiveMaximum, false, true}} {
		if b.r != nil {
			f, exact := b.r.Float64()
			n.bounds = append(n.bounds, fastBound{f: f, above: b.above, exclusive: b.exclusive, exact: exact})
		}
	}
	n.hasOwn = n.types != 0 || n.hasEnum || n.format != nil || n.hasObjRule || n.hasArrRule ||
		n.hasStrRule || len(n.bounds) > 0
	return n
}

// addEnum records one allowed value; values the fast path cannot compare
// (numbers, arrays, objects) leave it to the general validator.
func (n *fastNode) addEnum(v any) {
	switch x := v.(type) {
	case string:
		n.enumStr = append(n.enumStr, x)
	case nil:
		n.enumLit |= tNull
	case bool:
		if x {
			n.enumT = true
		} else {
			n.enumF = true
		}
	default:
		n.enumOther = true
	}
}

// supported reports whether every assertion of s is one the fast path
// implements (annotations do not matter).
func supported(s *jsonschema.Schema) bool {
	return s.RecursiveRef == nil && s.DynamicRef == nil &&
		s.PropertyNames == nil && len(s.PatternProperties) == 0 && len(s.Dependencies) == 0 &&
		len(s.DependentRequired) == 0 && len(s.DependentSchemas) == 0 && s.UnevaluatedProperties == nil &&
		s.Contains == nil && s.MinContains == nil && s.MaxContains == nil && s.UnevaluatedItems == nil &&
		s.ContentEncoding == nil && s.ContentMediaType == nil && s.ContentSchema == nil &&
		s.MultipleOf == nil && len(s.Extensions) == 0
}

// accept reports whether doc is one JSON value that n accepts (see the
// contract above).
func (n *fastNode) accept(doc []byte) bool {
	sc := scanner{doc: doc, budget: 16*len(doc) + 1024}
	sc.ws()
	if !sc.value(n, 0) {
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
func (sc *scanner) value(n *fastNode, depth int) bool {
	sc.budget--
	if depth > fastMaxDepth || sc.pos >= len(sc.doc) || sc.budget < 0 {
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
			var branch *fastNode
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
func (sc *scanner) again(start int, n *fastNode, depth int, end *int) bool {
	sc.pos = start
	ok := sc.value(n, depth)
	if ok {
		*end = sc.pos
	}
	sc.pos = start
	return ok
}

func (n *fastNode) allows(t uint8) bool { return n.types == 0 || n.types&t != 0 }

func (sc *scanner) literal(lit string) bool {
	if len(sc.doc)-sc.pos < len(lit) || string(sc.doc[sc.pos:sc.pos+len(lit)]) != lit {
		return false
	}
	sc.pos += len(lit)
	return true
}

// skip checks the syntax of one value, with the general validator's limit
// on exponents (Validate reports numbers beyond maxExponent).
func (sc *scanner) skip(depth int) bool {
	if depth > fastMaxDepth || sc.pos >= len(sc.doc) {
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
func (sc *scanner) object(n *fastNode, depth int) bool {
	var seen uint64
	count := 0
	var keys [][]byte // for minProperties: a repeated key counts once when decoded
	ok := sc.members(func(key []byte, esc bool) bool {
		var child *fastNode
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

func (n *fastNode) objectEnd(seen uint64, count int) bool {
	if n.nRequired > 0 && seen != (uint64(1)<<n.nRequired)-1 {
		return false
	}
	return count >= n.minProps && (n.maxProps < 0 || count <= n.maxProps)
}

// array checks an array; n == nil checks its syntax only.
func (sc *scanner) array(n *fastNode, depth int) bool {
	var strs [][]byte // the items' decoded text, for uniqueItems
	count, ok := sc.elements(func(i int) bool {
		var child *fastNode
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

func (n *fastNode) arrayEnd(count int) bool {
	return count >= n.minItems && (n.maxItems < 0 || count <= n.maxItems)
}

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
func (sc *scanner) str(n *fastNode) bool {
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

// numInfo is what number scanning learns about a number's text.
type numInfo struct {
	start, end int
	integral   bool // no fraction digit other than 0, no exponent
	fraction   bool // a fraction digit other than 0
	exponent   bool
	digits     int // digits before the point
}

// number moves past a JSON number, refusing exponents beyond maxExponent.
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
			if exp > maxExponent {
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
func (sc *scanner) num(n *fastNode) bool {
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
