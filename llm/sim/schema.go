package sim

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"regexp"
	"strconv"
	"strings"
)

// snode is a JSON Schema node compiled for generation. Only what the
// simulator needs is kept; unknown keywords are ignored.
type snode struct {
	isFalse  bool     // the schema `false`: nothing is valid
	types    []string // allowed non-null types, in schema order; empty: infer
	nullable bool

	props    []sprop
	required []string
	reqSet   map[string]bool
	noExtra  bool // additionalProperties: false

	items    *snode
	prefix   []*snode
	minItems int
	maxItems int // -1: none
	unique   bool

	enum     []*val
	constVal *val

	min, max         float64
	hasMin, hasMax   bool
	exclMin, exclMax bool
	multipleOf       float64

	minLen int
	maxLen int // -1: none
	format string

	pattern string
	patRe   *regexp.Regexp // nil when the pattern is not RE2

	// alts are applied on top of this node: $ref targets, every allOf
	// branch, the first anyOf and oneOf branch. flatten merges them.
	alts      []*snode
	flattened bool
	flatting  bool
}

type sprop struct {
	name string
	n    *snode
}

// schemaDoc compiles one schema document, resolving local $refs.
type schemaDoc struct {
	root  any // the document (decodeOrdered), for pointer lookups
	refs  map[string]*snode
	nodes []*snode
}

var errSchema = errors.New("schema")

// compileSchema compiles raw JSON Schema text for the simulator.
func compileSchema(raw []byte) (*snode, error) {
	doc, err := decodeOrdered(raw)
	if err != nil {
		return nil, fmt.Errorf("%w: reading the JSON Schema: %w", errSchema, err)
	}
	d := &schemaDoc{root: doc, refs: map[string]*snode{}}
	root := d.compile(doc, 0)
	for _, n := range d.nodes {
		flatten(n)
	}
	return root, nil
}

// compile turns one decoded schema value into a node.
func (d *schemaDoc) compile(v any, depth int) *snode {
	n := &snode{maxItems: -1, maxLen: -1}
	d.nodes = append(d.nodes, n)
	if depth > 64 {
		return n
	}
	switch s := v.(type) {
	case bool:
		n.isFalse = !s
	case *omap:
		d.fill(n, s.Vals, depth)
	}
	return n
}

func (d *schemaDoc) fill(n *snode, s map[string]any, depth int) {
	switch t := s["type"].(type) {
	case string:
		n.addType(t)
	case []any:
		for _, x := range t {
			if ts, ok := x.(string); ok {
				n.addType(ts)
			}
		}
	}
	if b, ok := s["nullable"].(bool); ok && b { // OpenAPI style
		n.nullable = true
	}
	if props, ok := s["properties"].(*omap); ok {
		for _, name := range props.Keys {
			n.props = append(n.props, sprop{name: name, n: d.compile(props.Vals[name], depth+1)})
		}
	}
	if req, ok := s["required"].([]any); ok {
		for _, x := range req {
			if name, ok := x.(string); ok {
				n.addRequired(name)
			}
		}
	}
	if ap, ok := s["additionalProperties"].(bool); ok && !ap {
		n.noExtra = true
	}
	if it, ok := s["items"]; ok {
		switch x := it.(type) {
		case []any: // draft 4-7 tuple form
			for _, e := range x {
				n.prefix = append(n.prefix, d.compile(e, depth+1))
			}
		default:
			n.items = d.compile(x, depth+1)
		}
	}
	if pi, ok := s["prefixItems"].([]any); ok {
		for _, e := range pi {
			n.prefix = append(n.prefix, d.compile(e, depth+1))
		}
	}
	if f, ok := num(s["minItems"]); ok {
		n.minItems = int(min(max(f, 0), 1000))
	}
	if f, ok := num(s["maxItems"]); ok {
		n.maxItems = int(min(max(f, 0), 1000))
	}
	if b, ok := s["uniqueItems"].(bool); ok {
		n.unique = b
	}
	if e, ok := s["enum"].([]any); ok {
		for _, x := range e {
			n.enum = append(n.enum, fromAny(x))
		}
	}
	if c, ok := s["const"]; ok {
		n.constVal = fromAny(c)
	}
	if f, ok := num(s["minimum"]); ok {
		n.min, n.hasMin = f, true
	}
	if f, ok := num(s["maximum"]); ok {
		n.max, n.hasMax = f, true
	}
	switch x := s["exclusiveMinimum"].(type) {
	case bool: // draft 4
		n.exclMin = x && n.hasMin
	default:
		if f, ok := num(x); ok && (!n.hasMin || f >= n.min) {
			n.min, n.hasMin, n.exclMin = f, true, true
		}
	}
	switch x := s["exclusiveMaximum"].(type) {
	case bool:
		n.exclMax = x && n.hasMax
	default:
		if f, ok := num(x); ok && (!n.hasMax || f <= n.max) {
			n.max, n.hasMax, n.exclMax = f, true, true
		}
	}
	if f, ok := num(s["multipleOf"]); ok && f > 0 {
		n.multipleOf = f
	}
	if f, ok := num(s["minLength"]); ok {
		n.minLen = int(min(max(f, 0), 10000))
	}
	if f, ok := num(s["maxLength"]); ok {
		n.maxLen = int(min(max(f, 0), 10000))
	}
	if f, ok := s["format"].(string); ok {
		n.format = f
	}
	if p, ok := s["pattern"].(string); ok {
		n.pattern = p
		n.patRe, _ = regexp.Compile(p) // ECMA-only syntax: nil, checked by hand
	}
	if ref, ok := s["$ref"].(string); ok {
		if t := d.resolve(ref, depth); t != nil {
			n.alts = append(n.alts, t)
		}
	}
	if all, ok := s["allOf"].([]any); ok {
		for _, b := range all {
			n.alts = append(n.alts, d.compile(b, depth+1))
		}
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if bs, ok := s[k].([]any); ok && len(bs) > 0 {
			// First branch, except that a leading {"type":"null"} is
			// skipped in favour of the real one (nullable written as anyOf).
			pick := bs[0]
			if len(bs) > 1 && isNullSchema(pick) {
				pick = bs[1]
				n.nullable = true
			}
			n.alts = append(n.alts, d.compile(pick, depth+1))
		}
	}
}

func isNullSchema(v any) bool {
	m, ok := v.(*omap)
	return ok && len(m.Keys) == 1 && m.Vals["type"] == "null"
}

// resolve returns the node for a local reference ("#", "#/$defs/x",
// "#/definitions/x", any JSON pointer into the document). Remote refs are
// ignored.
func (d *schemaDoc) resolve(ref string, depth int) *snode {
	if n, ok := d.refs[ref]; ok {
		return n
	}
	if !strings.HasPrefix(ref, "#") {
		return nil
	}
	ptr := ref[1:]
	cur := d.root
	if ptr != "" {
		if !strings.HasPrefix(ptr, "/") {
			return nil // anchors are not supported
		}
		for _, seg := range strings.Split(ptr[1:], "/") {
			seg = unescapePointer(seg)
			switch c := cur.(type) {
			case *omap:
				cur = c.Vals[seg]
			case []any:
				i, err := strconv.Atoi(seg)
				if err != nil || i < 0 || i >= len(c) {
					return nil
				}
				cur = c[i]
			default:
				return nil
			}
			if cur == nil {
				return nil
			}
		}
	}
	// Register before compiling so recursive schemas terminate.
	n := &snode{maxItems: -1, maxLen: -1}
	d.refs[ref] = n
	d.nodes = append(d.nodes, n)
	switch s := cur.(type) {
	case bool:
		n.isFalse = !s
	case *omap:
		d.fill(n, s.Vals, depth+1)
	}
	return n
}

func unescapePointer(s string) string {
	if !strings.Contains(s, "~") {
		return s
	}
	return strings.ReplaceAll(strings.ReplaceAll(s, "~1", "/"), "~0", "~")
}

func (n *snode) addType(t string) {
	if t == "null" {
		n.nullable = true
		return
	}
	for _, x := range n.types {
		if x == t {
			return
		}
	}
	n.types = append(n.types, t)
}

func (n *snode) addRequired(name string) {
	if n.reqSet == nil {
		n.reqSet = map[string]bool{}
	}
	if !n.reqSet[name] {
		n.reqSet[name] = true
		n.required = append(n.required, name)
	}
}

func (n *snode) prop(name string) *snode {
	for _, p := range n.props {
		if p.name == name {
			return p.n
		}
	}
	return nil
}

// flatten merges n's alternatives into n: fields n leaves unset are taken
// from them, properties and required names are unioned. Cycles are cut.
func flatten(n *snode) {
	if n.flattened || n.flatting {
		return
	}
	n.flatting = true
	for _, a := range n.alts {
		flatten(a)
		n.merge(a)
	}
	n.flatting = false
	n.flattened = true
	n.types = inferTypes(n)
}

func (n *snode) merge(a *snode) {
	if a.isFalse {
		n.isFalse = true
	}
	if len(n.types) == 0 {
		n.types = append(n.types, a.types...)
	}
	if a.nullable && len(n.types) == 0 {
		n.nullable = true
	}
	for _, p := range a.props {
		if n.prop(p.name) == nil {
			n.props = append(n.props, p)
		}
	}
	for _, r := range a.required {
		n.addRequired(r)
	}
	n.noExtra = n.noExtra || a.noExtra
	if n.items == nil {
		n.items = a.items
	}
	if len(n.prefix) == 0 {
		n.prefix = a.prefix
	}
	n.minItems = max(n.minItems, a.minItems)
	if a.maxItems >= 0 && (n.maxItems < 0 || a.maxItems < n.maxItems) {
		n.maxItems = a.maxItems
	}
	n.unique = n.unique || a.unique
	if n.enum == nil {
		n.enum = a.enum
	}
	if n.constVal == nil {
		n.constVal = a.constVal
	}
	if a.hasMin && (!n.hasMin || a.min > n.min) {
		n.min, n.hasMin, n.exclMin = a.min, true, a.exclMin
	}
	if a.hasMax && (!n.hasMax || a.max < n.max) {
		n.max, n.hasMax, n.exclMax = a.max, true, a.exclMax
	}
	if n.multipleOf == 0 {
		n.multipleOf = a.multipleOf
	}
	n.minLen = max(n.minLen, a.minLen)
	if a.maxLen >= 0 && (n.maxLen < 0 || a.maxLen < n.maxLen) {
		n.maxLen = a.maxLen
	}
	if n.format == "" {
		n.format = a.format
	}
	if n.pattern == "" {
		n.pattern, n.patRe = a.pattern, a.patRe
	}
}

// inferTypes gives an untyped node the type its keywords imply.
func inferTypes(n *snode) []string {
	if len(n.types) > 0 || n.enum != nil || n.constVal != nil {
		return n.types
	}
	switch {
	case len(n.props) > 0 || len(n.required) > 0:
		return []string{"object"}
	case n.items != nil || len(n.prefix) > 0 || n.minItems > 0:
		return []string{"array"}
	case n.hasMin || n.hasMax || n.multipleOf > 0:
		return []string{"number"}
	case n.nullable:
		return nil // only null is allowed
	default:
		return []string{"string"}
	}
}

// num reads a json.Number.
func num(v any) (float64, bool) {
	jn, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := jn.Float64()
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return 0, false
	}
	return f, true
}
