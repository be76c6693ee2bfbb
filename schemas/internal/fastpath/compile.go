package fastpath

import (
	"math/big"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// maxDepth bounds nesting (of the document and of $ref chains at one
// value); deeper than that, the fast path gives up.
const maxDepth = 512

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

// node is one compiled subschema. A nil *node accepts any value.
type node struct {
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

	ref   *node
	allOf []*node
	anyOf []*node
	// oneOf, not and if/then/else need a branch shown invalid, which
	// rejects (reject.go) does for the common cases
	oneOf  []*node
	hasNot bool
	not    *node
	hasIf  bool
	ifN    *node
	thenN  *node
	elseN  *node

	// objects
	fields     map[string]field // properties and required names
	nRequired  int
	addlFalse  bool
	addl       *node // when !addlFalse; nil = any
	minProps   int
	maxProps   int // -1 = none
	hasObjRule bool

	// arrays
	prefix     []*node
	items      *node // after prefix; nil = any
	itemsFalse bool  // no items after prefix
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
	bounds []bound
}

// field is what an object's node knows of one property name.
type field struct {
	node     *node // when declared in properties
	declared bool
	bit      int // its bit among the required names, or -1
}

// bound is one of minimum, exclusiveMinimum (above) or maximum,
// exclusiveMaximum (below).
type bound struct {
	f         float64
	above     bool // the value must be above (minimum) or below (maximum)
	exclusive bool
	exact     bool // f is the bound exactly
}

// Checker is the fast path of one compiled schema. It is immutable and
// safe for concurrent use by many goroutines.
type Checker struct {
	root *node
}

// Compile builds the fast checker of a schema the general validator
// compiled. It returns nil when the root uses a keyword the fast path does
// not decide (such a checker would never accept).
func Compile(sch *jsonschema.Schema) *Checker {
	root := (&compiler{memo: map[*jsonschema.Schema]*node{}}).compile(sch)
	if root == nil || root.opaque {
		return nil
	}
	return &Checker{root: root}
}

type compiler struct {
	memo map[*jsonschema.Schema]*node
}

func (c *compiler) compile(s *jsonschema.Schema) *node {
	if s == nil {
		return nil
	}
	if n, ok := c.memo[s]; ok {
		return n
	}
	n := &node{maxProps: -1, maxItems: -1, maxLen: -1}
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
	n.ref = c.compile(s.Ref)
	for _, x := range s.AllOf {
		n.allOf = append(n.allOf, c.compile(x))
	}
	for _, x := range s.AnyOf {
		n.anyOf = append(n.anyOf, c.compile(x))
	}
	for _, x := range s.OneOf {
		n.oneOf = append(n.oneOf, c.compile(x))
	}
	if s.Not != nil {
		n.hasNot, n.not = true, c.compile(s.Not)
	}
	if s.If != nil {
		n.hasIf, n.ifN, n.thenN, n.elseN = true, c.compile(s.If), c.compile(s.Then), c.compile(s.Else)
	}

	if len(s.Properties) > 0 || len(s.Required) > 0 {
		n.fields = make(map[string]field, len(s.Properties)+len(s.Required))
		for k, x := range s.Properties {
			n.fields[k] = field{node: c.compile(x), declared: true, bit: -1}
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
		n.addl = c.compile(a)
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
		n.items = c.compile(it)
		n.hasArrRule = true
	case []*jsonschema.Schema:
		for _, x := range it {
			n.prefix = append(n.prefix, c.compile(x))
		}
		switch a := s.AdditionalItems.(type) {
		case bool:
			n.itemsFalse = !a
		case *jsonschema.Schema:
			n.items = c.compile(a)
		}
		n.hasArrRule = true
	}
	if len(s.PrefixItems) > 0 {
		for _, x := range s.PrefixItems {
			n.prefix = append(n.prefix, c.compile(x))
		}
		n.hasArrRule = true
	}
	if s.Items2020 != nil {
		n.items = c.compile(s.Items2020)
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
			n.bounds = append(n.bounds, bound{f: f, above: b.above, exclusive: b.exclusive, exact: exact})
		}
	}
	n.hasOwn = n.types != 0 || n.hasEnum || n.format != nil || n.hasObjRule || n.hasArrRule ||
		n.hasStrRule || len(n.bounds) > 0
	return n
}

// addEnum records one allowed value; values the fast path cannot compare
// (numbers, arrays, objects) leave it to the general validator.
func (n *node) addEnum(v any) {
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
