package schemas

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"
	"github.com/llmpipeline/pipeline/ground"
	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The keywords of the truth checks, run after the JSON Schema is satisfied.
const (
	// KeywordGrounded marks a string (or every string below an object or
	// array) that must occur in the job's input.
	KeywordGrounded = "x-grounded"
	// KeywordRules holds an object's CEL rules. A failing rule's
	// diagnostic keyword is "x-rules/<index>" (Rule.Keyword).
	KeywordRules = "x-rules"
)

// truthVocabURL names the vocabulary of x-grounded and x-rules.
const truthVocabURL = "https://llmpipeline.dev/vocab/truth"

// truthMeta is the metaschema of the two keywords: a schema that misspells
// their shape does not load, and says where.
const truthMeta = `{
	"properties": {
		"x-grounded": {"type": "boolean"},
		"x-rules": {"type": "array", "items": {
			"type": "object", "required": ["rule"], "additionalProperties": false,
			"properties": {"rule": {"type": "string", "minLength": 1}, "message": {"type": "string"}, "path": {"type": "string"}}
		}}
	}
}`

// truthVocab returns the vocabulary the compiler registers: it compiles
// x-grounded into a marker and x-rules into CEL programs. Neither changes
// what the JSON Schema accepts; Check runs them after.
func truthVocab() (*jsonschema.Vocabulary, error) {
	meta, err := jsonschema.UnmarshalJSON(strings.NewReader(truthMeta))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource(truthVocabURL, meta); err != nil {
		return nil, err
	}
	sch, err := c.Compile(truthVocabURL)
	if err != nil {
		return nil, err
	}
	return &jsonschema.Vocabulary{URL: truthVocabURL, Schema: sch, Compile: compileTruth}, nil
}

// truthExt is the compiled form of a schema's x-grounded and x-rules.
type truthExt struct {
	grounded bool
	rules    []*Rule
}

// Validate is the JSON Schema side of the extension: nothing. The checks
// need the job's input and a satisfied schema: Check runs them.
func (*truthExt) Validate(*jsonschema.ValidatorContext, any) {}

func compileTruth(_ *jsonschema.CompilerContext, obj map[string]any) (jsonschema.SchemaExt, error) {
	g, hasG := obj[KeywordGrounded].(bool)
	rv, hasR := obj[KeywordRules]
	if !(hasG && g) && !hasR {
		return nil, nil
	}
	ext := &truthExt{grounded: g}
	if hasR {
		rules, err := compileRules(rv)
		if err != nil {
			return nil, err
		}
		ext.rules = rules
	}
	return ext, nil
}

// truthOf returns the schema's truth extension, nil when it has none.
func truthOf(s *jsonschema.Schema) *truthExt {
	for _, e := range s.Extensions {
		if t, ok := e.(*truthExt); ok {
			return t
		}
	}
	return nil
}

// hasTruth reports whether any subschema of the compiled schema carries
// x-grounded or x-rules, and lists the rules with their locations.
func hasTruth(subs map[string]*jsonschema.Schema) (bool, []Rule) {
	found := false
	var rules []Rule
	for loc, s := range subs {
		t := truthOf(s)
		if t == nil {
			continue
		}
		found = true
		for _, r := range t.rules {
			x := *r
			x.Location = loc
			x.prg = nil
			rules = append(rules, x)
		}
	}
	sort.Slice(rules, func(i, j int) bool {
		if rules[i].Location != rules[j].Location {
			return rules[i].Location < rules[j].Location
		}
		return rules[i].Index < rules[j].Index
	})
	return found, rules
}

// Grounding says where in the input a grounded value was found: code point
// offsets, so input[start:end] in Python (or []rune(input)[Start:End] in
// Go) is the value, exactly or after normalisation (Match).
type Grounding struct {
	Path  string `json:"path"`
	Start int    `json:"start"`
	End   int    `json:"end"`
	// Match is "exact" or "normalized" (NFKC, case folded, runs of white
	// space as one space).
	Match string `json:"match"`
}

// Match values of Grounding.
const (
	MatchExact      = ground.MatchExact
	MatchNormalized = ground.MatchNormalized
)

// Input is a job's input text as grounding searches it (ground.Input):
// make one per job with NewInput and pass it to every Check of that job.
type Input = ground.Input

// NewInput wraps a job's input text for Check.
func NewInput(text string) *Input { return ground.New(text) }

// HasChecks reports whether the schema carries x-grounded or x-rules, so
// that Check has anything to do.
func (s *Schema) HasChecks() bool { return s.truth }

// Rules lists the schema's x-rules, sorted by location and index.
func (s *Schema) Rules() []Rule { return s.rules }

// Check runs the truth checks on a document that satisfies the JSON Schema
// (Validate returned no diagnostic): every x-grounded string must occur in
// the input (skipped when in is nil), every x-rules rule must hold. It
// returns at most max diagnostics (max <= 0: DefaultMaxDiagnostics), with
// the count left out, and where each grounded value was found, in document
// order. err is non-nil only when doc is not JSON. Safe for concurrent use.
func (s *Schema) Check(doc []byte, in *Input, max int) (diags []Diagnostic, omitted int, grounding []Grounding, err error) {
	return s.check(doc, in, max, false)
}

// CheckPart is Check for the answer to one part of a longer document (a
// chunk job): a rule that cannot be evaluated on it (a field the part does
// not have) is no diagnostic; the merge of the parts is held to it.
func (s *Schema) CheckPart(doc []byte, in *Input, max int) (diags []Diagnostic, omitted int, grounding []Grounding, err error) {
	return s.check(doc, in, max, true)
}

func (s *Schema) check(doc []byte, in *Input, max int, part bool) (diags []Diagnostic, omitted int, grounding []Grounding, err error) {
	if !s.truth {
		return nil, 0, nil, nil
	}
	if max <= 0 {
		max = DefaultMaxDiagnostics
	}
	root, err := decodeOrdered(doc)
	if err != nil {
		return nil, 0, nil, fmt.Errorf("%w: %v", ErrNotJSON, err)
	}
	w := truthWalk{seen: map[visit]bool{}}
	w.schema(s.compiled, root)
	c := checker{in: in, part: part}
	c.node(root, nil, false, &cursor{}, 0)
	diags = c.diags
	if len(diags) > max {
		omitted = len(diags) - max
		diags = diags[:max:max]
	}
	// In the order the values stand in the input, not in the answer.
	sort.SliceStable(c.grounding, func(i, j int) bool { return c.grounding[i].Start < c.grounding[j].Start })
	return diags, omitted, c.grounding, nil
}

// node is one value of a document, its object members in document order,
// with what the schema's truth keywords say of it.
type node struct {
	kind byte // 'n' null, 't' bool, '0' number, '"' string, '{', '['
	str  string
	num  json.Number
	keys []string
	kids []*node
	// grounded: an x-grounded schema applied here; rules: the x-rules of
	// the object schemas that applied here.
	grounded bool
	rules    []*Rule
}

// value is the node as the validator reads it (numbers as json.Number).
func (n *node) value() any {
	switch n.kind {
	case 't':
		return n.str == "true"
	case '0':
		return n.num
	case '"':
		return n.str
	case '{':
		m := make(map[string]any, len(n.keys))
		for i, k := range n.keys {
			m[k] = n.kids[i].value()
		}
		return m
	case '[':
		a := make([]any, len(n.kids))
		for i, k := range n.kids {
			a[i] = k.value()
		}
		return a
	}
	return nil
}

// celValue is the node as rules read it, built once per Check for all the
// rules of the node: CEL's JSON mapping (every number a double), as CEL
// values, so that evaluating a rule converts nothing.
func (n *node) celValue() ref.Val {
	switch n.kind {
	case 'n':
		return types.NullValue
	case 't':
		return types.Bool(n.str == "true")
	case '0':
		f, err := n.num.Float64()
		if err != nil {
			return types.String(n.num.String())
		}
		return types.Double(f)
	case '"':
		return types.String(n.str)
	case '{':
		m := make(map[ref.Val]ref.Val, len(n.keys))
		for i, k := range n.keys {
			m[types.String(k)] = n.kids[i].celValue()
		}
		return types.NewRefValMap(types.DefaultTypeAdapter, m)
	default: // '['
		a := make([]ref.Val, len(n.kids))
		for i, k := range n.kids {
			a[i] = k.celValue()
		}
		return types.NewRefValList(types.DefaultTypeAdapter, a)
	}
}

// decodeOrdered reads one JSON value keeping the order of object members
// (a repeated name keeps its first place and its last value, as the
// validator's reading does).
func decodeOrdered(doc []byte) (*node, error) {
	dec := jsontext.NewDecoder(bytes.NewReader(doc), jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	n, err := readNode(dec)
	if err != nil {
		return nil, err
	}
	if _, err := dec.ReadToken(); err != io.EOF {
		return nil, errors.New("more than one JSON value")
	}
	return n, nil
}

// MaxCheckDepth bounds how deep an answer the truth checks read: each
// anyOf, oneOf or if on the way validates the value below it again, so
// their cost grows with the square of the depth (a 2,000-level answer of
// 12 KB took 41 s). No extraction nests that deep; a deeper answer is
// refused as not JSON the checks read, and healed so.
const MaxCheckDepth = 128

func readNode(dec *jsontext.Decoder) (*node, error) {
	tok, err := dec.ReadToken()
	if err != nil {
		return nil, err
	}
	if d := dec.StackDepth(); d > MaxCheckDepth {
		return nil, fmt.Errorf("the answer nests arrays and objects deeper than %d levels (at %s)", MaxCheckDepth, dec.StackPointer())
	}
	switch k := tok.Kind(); k {
	case 'n':
		return &node{kind: 'n'}, nil
	case 't', 'f':
		return &node{kind: 't', str: strconv.FormatBool(tok.Bool())}, nil
	case '0':
		return &node{kind: '0', num: json.Number(tok.String())}, nil
	case '"':
		return &node{kind: '"', str: tok.String()}, nil
	case '{':
		n := &node{kind: '{'}
		var at map[string]int // past 16 members: where each name is
		for dec.PeekKind() != '}' {
			kt, err := dec.ReadToken()
			if err != nil {
				return nil, err
			}
			name := kt.String()
			kid, err := readNode(dec)
			if err != nil {
				return nil, err
			}
			i := -1
			if at != nil {
				if j, dup := at[name]; dup {
					i = j
				}
			} else {
				i = indexOf(n.keys, name)
			}
			if i >= 0 { // a repeated name: the last value, the first place
				n.kids[i] = kid
				continue
			}
			if at == nil && len(n.keys) == 16 {
				at = make(map[string]int, 32)
				for j, k := range n.keys {
					at[k] = j
				}
			}
			if at != nil {
				at[name] = len(n.keys)
			}
			n.keys = append(n.keys, name)
			n.kids = append(n.kids, kid)
		}
		_, err := dec.ReadToken()
		return n, err
	case '[':
		n := &node{kind: '['}
		for dec.PeekKind() != ']' {
			kid, err := readNode(dec)
			if err != nil {
				return nil, err
			}
			n.kids = append(n.kids, kid)
		}
		_, err := dec.ReadToken()
		return n, err
	default:
		return nil, fmt.Errorf("unexpected %v", tok)
	}
}

// truthWalk marks the nodes of a valid document with the truth keywords
// of the subschemas that apply to them: it follows the applicators the way
// the validator does ($ref, allOf, the branches of anyOf/oneOf and
// if/then/else the value satisfies, properties, patternProperties,
// additionalProperties, items).
type truthWalk struct {
	seen map[visit]bool
}

type visit struct {
	s *jsonschema.Schema
	n *node
}

func (w *truthWalk) schema(s *jsonschema.Schema, n *node) {
	if s == nil || w.seen[visit{s, n}] {
		return
	}
	w.seen[visit{s, n}] = true
	if t := truthOf(s); t != nil {
		if t.grounded {
			n.grounded = true
		}
		n.rules = append(n.rules, t.rules...)
	}
	w.schema(s.Ref, n)
	w.schema(s.RecursiveRef, n)
	if s.DynamicRef != nil {
		w.schema(s.DynamicRef.Ref, n)
	}
	for _, x := range s.AllOf {
		w.schema(x, n)
	}
	var v any
	value := func() any {
		if v == nil {
			v = n.value()
		}
		return v
	}
	for _, list := range [][]*jsonschema.Schema{s.AnyOf, s.OneOf} {
		for _, x := range list {
			if x.Validate(value()) == nil {
				w.schema(x, n)
			}
		}
	}
	if s.If != nil {
		if s.If.Validate(value()) == nil {
			w.schema(s.If, n)
			w.schema(s.Then, n)
		} else {
			w.schema(s.Else, n)
		}
	}
	switch n.kind {
	case '{':
		w.object(s, n)
	case '[':
		w.array(s, n)
	}
}

func (w *truthWalk) object(s *jsonschema.Schema, n *node) {
	for i, k := range n.keys {
		kid := n.kids[i]
		matched := false
		if p, ok := s.Properties[k]; ok {
			w.schema(p, kid)
			matched = true
		}
		for re, p := range s.PatternProperties {
			if re.MatchString(k) {
				w.schema(p, kid)
				matched = true
			}
		}
		if ds, ok := s.DependentSchemas[k]; ok {
			w.schema(ds, n)
		}
		if matched {
			continue
		}
		if ap, ok := s.AdditionalProperties.(*jsonschema.Schema); ok {
			w.schema(ap, kid)
		}
		w.schema(s.UnevaluatedProperties, kid)
	}
}

func (w *truthWalk) array(s *jsonschema.Schema, n *node) {
	for i, kid := range n.kids {
		switch {
		case i < len(s.PrefixItems):
			w.schema(s.PrefixItems[i], kid)
		case s.Items2020 != nil:
			w.schema(s.Items2020, kid)
		default:
			switch items := s.Items.(type) {
			case *jsonschema.Schema:
				w.schema(items, kid)
			case []*jsonschema.Schema:
				if i < len(items) {
					w.schema(items[i], kid)
				} else if ai, ok := s.AdditionalItems.(*jsonschema.Schema); ok {
					w.schema(ai, kid)
				}
			default:
				w.schema(s.UnevaluatedItems, kid)
			}
		}
	}
}

// checker runs the checks over the marked document in document order.
type checker struct {
	in *Input
	// part: rules that cannot be evaluated are left to the merge.
	part      bool
	diags     []Diagnostic
	grounding []Grounding
}

// cursor is where the previous grounded value of an object (or array) was
// found: the next one is looked for after it first.
type cursor struct{ at int }

// node checks n and what is below it. cur is the cursor of the container
// holding n; start is where a container n begins its own cursor.
func (c *checker) node(n *node, path []string, grounded bool, cur *cursor, start int) {
	grounded = grounded || n.grounded
	switch n.kind {
	case '"':
		if grounded && c.in != nil && n.str != "" {
			c.ground(n.str, pointer(path), cur)
		}
	case '{':
		own := &cursor{at: start}
		for i, k := range n.keys {
			c.node(n.kids[i], append(path, k), grounded, own, 0)
		}
	case '[':
		// An element that is an object or array starts looking after the
		// first grounded value of the element before it (document order);
		// strings of the array share the array's cursor.
		own := &cursor{at: start}
		elem := start
		for i, kid := range n.kids {
			before := len(c.grounding)
			c.node(kid, append(path, strconv.Itoa(i)), grounded, own, elem)
			if (kid.kind == '{' || kid.kind == '[') && len(c.grounding) > before {
				elem = c.grounding[before].Start
			}
		}
	}
	if len(n.rules) > 0 {
		c.rules(n, path)
	}
}

func (c *checker) ground(value, path string, cur *cursor) {
	start, end, match, ok := c.in.Find(value, cur.at)
	if !ok {
		c.diags = append(c.diags, Diagnostic{
			Path:     path,
			Keyword:  KeywordGrounded,
			Message:  clipQuote(value) + " not found in the input: quote the document exactly, or return null if it says nothing",
			Received: receivedText(value),
		})
		return
	}
	cur.at = end
	c.grounding = append(c.grounding, Grounding{Path: path, Start: start, End: end, Match: match})
}

func (c *checker) rules(n *node, path []string) {
	self := &selfActivation{self: n.celValue()}
	base := pointer(path)
	for _, r := range n.rules {
		ok, err := r.eval(self)
		if ok || err != nil && c.part {
			continue
		}
		at := base + r.Path
		d := Diagnostic{Path: at, Keyword: r.Keyword(), Message: r.message(), Expected: r.Rule}
		if err != nil {
			d.Message += " (the rule could not be evaluated: " + cut(oneLine(err.Error())) + ")"
		}
		if v := lookup(n, r.Path); v != nil {
			d.Received = receivedText(v.value())
		}
		c.diags = append(c.diags, d)
	}
}

// lookup follows a JSON Pointer from n; nil when nothing is there.
func lookup(n *node, ptr string) *node {
	if ptr == "" {
		return n
	}
	for _, seg := range strings.Split(ptr[1:], "/") {
		seg = unescapePointer(seg)
		switch n.kind {
		case '{':
			i := indexOf(n.keys, seg)
			if i < 0 {
				return nil
			}
			n = n.kids[i]
		case '[':
			i, err := strconv.Atoi(seg)
			if err != nil || i < 0 || i >= len(n.kids) {
				return nil
			}
			n = n.kids[i]
		default:
			return nil
		}
	}
	return n
}

func indexOf(keys []string, k string) int {
	for i, x := range keys {
		if x == k {
			return i
		}
	}
	return -1
}

// receivedText is a value as JSON text cut to maxReceived characters.
func receivedText(v any) string {
	r := []rune(jsonText(v))
	if len(r) > maxReceived {
		return string(r[:maxReceived]) + "..."
	}
	return string(r)
}

// clipQuote quotes a value for a message, cut to 80 characters.
func clipQuote(s string) string {
	r := []rune(s)
	if len(r) > 80 {
		s = string(r[:80]) + "..."
	}
	return strconv.Quote(s)
}
