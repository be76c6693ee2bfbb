package llm

// Strict schemas: the subset of JSON Schema a provider's constrained
// decoding takes (OpenAI's Structured Outputs with strict true, Anthropic's
// structured outputs), made from the job's schema, and the way back from
// an answer to that subset to one the job's schema judges.
//
// OpenAI (response_format json_schema, strict true) wants every object
// closed (additionalProperties false) and every property listed in
// required; it takes type, enum, const, anyOf, $ref with $defs or
// definitions, description and title everywhere, pattern and format
// (date-time, time, date, duration, email, hostname, ipv4, ipv6, uuid) on
// strings, multipleOf, minimum, maximum, exclusiveMinimum and
// exclusiveMaximum on numbers, minItems and maxItems on arrays, and
// refuses the rest with a 400. So the schema sent closes every object,
// lists every property as required and makes an optional one nullable
// (type [T, "null"], or anyOf with {"type":"null"}), turns oneOf into
// anyOf and a one-entry allOf into its entry, drops $schema, $id and
// $comment, and writes every other keyword it cannot take into the
// description of the schema that held it ({"minLength":3}), where the
// model still reads it. An answer's null for a property that was optional
// (and did not take null itself) is dropped before the answer is judged;
// the judge is always the job's own schema.
//
// Anthropic (output_config.format json_schema) wants every object closed
// and keeps required as it is; it takes type, enum, anyOf, allOf, $ref
// with $defs, description, title, format (the list above and uri) and
// minItems of 0 or 1; the rest goes into the description likewise.
//
// A schema that has no strict form (a schema without a type, enum, const,
// anyOf or $ref; an object whose members are all additional or pattern
// properties, a map, which a closed object cannot hold; a root that is not
// an object, for OpenAI) is sent as it is, not strict.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"

	"github.com/llmpipeline/pipeline/heal"
)

// dialect is one provider's strict subset.
type dialect struct {
	// keep are the keywords sent as they are (besides the structural
	// ones the transform writes itself).
	keep map[string]bool
	// formats are the string formats the provider takes.
	formats map[string]bool
	// allRequired: every property goes into required, optional ones
	// nullable (OpenAI).
	allRequired bool
	// rootObject: the root must be an object schema (OpenAI).
	rootObject bool
	// minItems takes a minItems value, or leaves it to the description.
	minItems func(n float64) bool
	// allOf: allOf is taken (Anthropic); else only a one-entry allOf is
	// unwrapped.
	allOf bool
}

func set(words ...string) map[string]bool {
	m := make(map[string]bool, len(words))
	for _, w := range words {
		m[w] = true
	}
	return m
}

var (
	openAIStrict = &dialect{
		keep: set("description", "title", "enum", "const", "pattern",
			"multipleOf", "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum",
			"minItems", "maxItems"),
		formats:     set("date-time", "time", "date", "duration", "email", "hostname", "ipv4", "ipv6", "uuid"),
		allRequired: true,
		rootObject:  true,
	}
	anthropicStrict = &dialect{
		keep:     set("description", "title", "enum", "minItems"),
		formats:  set("date-time", "time", "date", "duration", "email", "hostname", "uri", "ipv4", "ipv6", "uuid"),
		minItems: func(n float64) bool { return n == 0 || n == 1 },
		allOf:    true,
	}
)

// dropped are annotations of no use to the model: not sent at all.
var dropped = set("$schema", "$id", "$comment")

// structural are the keywords the transform writes itself.
var structural = set("type", "properties", "required", "additionalProperties", "items",
	"anyOf", "oneOf", "allOf", "$ref", "$defs", "definitions", "format")

// errNotStrict: the schema has no strict form; it is sent as it is.
var errNotStrict = errors.New("no strict form")

// strictSchema is a schema in a dialect, with the way back for its
// answers (nil when there is nothing to map back).
type strictSchema struct {
	schema json.RawMessage
	strict bool // false: schema is the job's own, sent not strict
	why    string
	back   *restore
}

// strictCache keeps the strict form of each schema text a client saw.
type strictCache struct {
	d *dialect
	m sync.Map // string(schema) -> *strictSchema
}

// of returns the strict form of schema (computed once per schema text).
func (c *strictCache) of(schema json.RawMessage) *strictSchema {
	if v, ok := c.m.Load(string(schema)); ok {
		return v.(*strictSchema)
	}
	s := c.d.transform(schema)
	v, _ := c.m.LoadOrStore(string(schema), s)
	return v.(*strictSchema)
}

// transform makes the strict form of schema; on a schema without one it
// returns the schema itself, not strict, with the reason.
func (d *dialect) transform(schema json.RawMessage) *strictSchema {
	root, err := decodeOrdered(schema)
	if err != nil {
		return &strictSchema{schema: schema, why: "unreadable schema: " + err.Error()}
	}
	t := &transformer{d: d, defs: map[string]*restore{}}
	ro, ok := root.(*object)
	if !ok {
		return &strictSchema{schema: schema, why: "the schema is not an object"}
	}
	if t, typed := ro.Vals["type"]; d.rootObject && t != "object" && (typed || ro.Vals["properties"] == nil) {
		return &strictSchema{schema: schema, why: "the root is not an object schema"}
	}
	t.root = &restore{}
	t.defs["#"] = t.root
	out, back, err := t.node(ro, "", t.root)
	if err != nil {
		return &strictSchema{schema: schema, why: err.Error()}
	}
	b, err := json.Marshal(out)
	if err != nil {
		return &strictSchema{schema: schema, why: "encoding the strict schema: " + err.Error()}
	}
	s := &strictSchema{schema: b, strict: true}
	if back != nil && back.live(map[*restore]bool{}) {
		s.back = back
	}
	return s
}

type transformer struct {
	d    *dialect
	root *restore
	defs map[string]*restore // "#/$defs/x" -> its way back (filled as defs are made)
}

// node makes the strict form of one schema at path; slot, when not nil, is
// the restore to fill (a $defs entry's, referred to before it is made).
func (t *transformer) node(s *object, path string, slot *restore) (any, *restore, error) {
	out := newObject()
	back := slot
	if back == nil {
		back = &restore{}
	}
	var extra *object // keywords moved into the description
	move := func(k string, v any) {
		if extra == nil {
			extra = newObject()
		}
		extra.Set(k, v)
	}
	for _, defsKey := range []string{"$defs", "definitions"} {
		defs, ok := s.Vals[defsKey].(*object)
		if !ok {
			continue
		}
		// Every entry's restore exists before any is made, so refs
		// between them (and recursive ones) resolve.
		for _, name := range defs.Keys {
			if _, ok := t.defs["#/"+defsKey+"/"+name]; !ok {
				t.defs["#/"+defsKey+"/"+name] = &restore{}
			}
		}
		nd := newObject()
		for _, name := range defs.Keys {
			ds, ok := defs.Vals[name].(*object)
			if !ok {
				return nil, nil, fmt.Errorf("%s/%s/%s: %w (a schema that is not an object)", path, defsKey, name, errNotStrict)
			}
			v, _, err := t.node(ds, path+"/"+defsKey+"/"+name, t.defs["#/"+defsKey+"/"+name])
			if err != nil {
				return nil, nil, err
			}
			nd.Set(name, v)
		}
		out.Set(defsKey, nd)
	}
	if ref, ok := s.Vals["$ref"].(string); ok {
		// A reference stands alone (its siblings are not taken beside it).
		out.Set("$ref", ref)
		back.ref = ref
		back.defs = t.defs
		return out, back, nil
	}
	if v, ok := s.Vals["allOf"].([]any); ok && !t.d.allOf {
		if len(v) == 1 {
			if one, ok := v[0].(*object); ok {
				merged := s.Clone()
				merged.Del("allOf")
				for _, k := range one.Keys {
					if _, has := merged.Vals[k]; !has {
						merged.Set(k, one.Vals[k])
					}
				}
				return t.node(merged, path, slot)
			}
		}
	}
	typed := false
	for _, k := range s.Keys {
		v := s.Vals[k]
		switch {
		case dropped[k]:
		case k == "$defs" || k == "definitions":
		case k == "type":
			out.Set("type", v)
			typed = true
		case k == "anyOf" || k == "oneOf" || (k == "allOf" && t.d.allOf):
			list, ok := v.([]any)
			if !ok {
				move(k, v)
				continue
			}
			word := k
			if k == "oneOf" {
				word = "anyOf" // anyOf takes every answer oneOf takes; the judge keeps oneOf
			}
			var branches []any
			var objs []*restore
			for i, b := range list {
				bs, ok := b.(*object)
				if !ok {
					return nil, nil, fmt.Errorf("%s/%s/%d: %w (a schema that is not an object)", path, k, i, errNotStrict)
				}
				nb, rb, err := t.node(bs, fmt.Sprintf("%s/%s/%d", path, k, i), nil)
				if err != nil {
					return nil, nil, err
				}
				branches = append(branches, nb)
				if isObjectSchema(bs) || bs.Vals["$ref"] != nil {
					objs = append(objs, rb)
				}
			}
			if prev, ok := out.Vals[word].([]any); ok {
				branches = append(prev, branches...)
			}
			out.Set(word, branches)
			if len(objs) == 1 && word == "anyOf" {
				back.branch = objs[0] // the one object a union can be
			}
			typed = true
		case k == "enum" || k == "const":
			if t.d.keep[k] {
				out.Set(k, v)
				typed = true
			} else {
				move(k, v)
			}
		case k == "format":
			if f, ok := v.(string); ok && t.d.formats[f] {
				out.Set(k, v)
			} else {
				move(k, v)
			}
		case k == "minItems" && t.d.minItems != nil:
			if n, ok := number(v); ok && t.d.minItems(n) {
				out.Set(k, v)
			} else {
				move(k, v)
			}
		case structural[k]:
			// properties, required, additionalProperties, items: below
		case t.d.keep[k]:
			out.Set(k, v)
		default:
			move(k, v)
		}
	}
	if !typed && s.Vals["properties"] != nil {
		out.Set("type", "object")
		typed = true
	}
	if !typed {
		return nil, nil, fmt.Errorf("%s: %w (a schema without a type, enum, const, anyOf or $ref)", orRoot(path), errNotStrict)
	}
	if isObjectSchema(s) {
		props, _ := s.Vals["properties"].(*object)
		if props == nil || len(props.Keys) == 0 {
			if ap := s.Vals["additionalProperties"]; (ap != nil && ap != false) || s.Vals["patternProperties"] != nil {
				return nil, nil, fmt.Errorf("%s: %w (an object of additional or pattern properties only)", orRoot(path), errNotStrict)
			}
		}
		required := map[string]bool{}
		if rl, ok := s.Vals["required"].([]any); ok {
			for _, r := range rl {
				if name, ok := r.(string); ok {
					required[name] = true
				}
			}
		}
		np := newObject()
		var req []any
		if props != nil {
			for _, name := range props.Keys {
				ps, ok := props.Vals[name].(*object)
				if !ok {
					return nil, nil, fmt.Errorf("%s/properties/%s: %w (a schema that is not an object)", path, name, errNotStrict)
				}
				v, rb, err := t.node(ps, path+"/properties/"+name, nil)
				if err != nil {
					return nil, nil, err
				}
				if rb != nil {
					back.child(name, rb)
				}
				switch {
				case required[name]:
					req = append(req, name)
				case t.d.allRequired:
					req = append(req, name)
					if !acceptsNull(ps) {
						v = nullable(v.(*object))
						back.drop(name)
					}
				}
				np.Set(name, v)
			}
		}
		out.Set("properties", np)
		if req == nil {
			req = []any{}
		}
		if t.d.allRequired || len(req) > 0 {
			out.Set("required", req)
		}
		out.Set("additionalProperties", false)
	}
	if items, ok := s.Vals["items"].(*object); ok {
		v, rb, err := t.node(items, path+"/items", nil)
		if err != nil {
			return nil, nil, err
		}
		out.Set("items", v)
		back.items = rb
	} else if items, ok := s.Vals["items"]; ok {
		move("items", items) // a tuple (draft 7 items array) or a boolean
	}
	if extra != nil {
		b, _ := json.Marshal(extra)
		desc, _ := out.Vals["description"].(string)
		if desc != "" {
			desc += "\n\n"
		}
		out.Set("description", desc+string(b))
	}
	return out, back, nil
}

func orRoot(path string) string {
	if path == "" {
		return "the root"
	}
	return path
}

func number(v any) (float64, bool) {
	n, ok := v.(json.Number)
	if !ok {
		return 0, false
	}
	f, err := n.Float64()
	return f, err == nil
}

// isObjectSchema: type object (alone or in a list), or properties.
func isObjectSchema(s *object) bool {
	if s.Vals["properties"] != nil {
		return true
	}
	return hasType(s, "object")
}

func hasType(s *object, want string) bool {
	switch t := s.Vals["type"].(type) {
	case string:
		return t == want
	case []any:
		for _, x := range t {
			if x == want {
				return true
			}
		}
	}
	return false
}

// acceptsNull: the schema itself takes null (its type, enum, const or a
// branch of its union says so).
func acceptsNull(s *object) bool {
	if hasType(s, "null") {
		return true
	}
	if e, ok := s.Vals["enum"].([]any); ok {
		for _, x := range e {
			if x == nil {
				return true
			}
		}
	}
	if c, ok := s.Vals["const"]; ok && c == nil {
		return true
	}
	for _, k := range []string{"anyOf", "oneOf"} {
		if l, ok := s.Vals[k].([]any); ok {
			for _, b := range l {
				if bo, ok := b.(*object); ok && acceptsNull(bo) {
					return true
				}
			}
		}
	}
	return false
}

// nullable makes a strict schema take null too: "null" joins a single
// type (type [T, "null"]) or a type list; any other schema (an enum, a
// const, a union, a reference) becomes a union with {"type":"null"}.
func nullable(s *object) *object {
	_, enum := s.Vals["enum"]
	_, cst := s.Vals["const"]
	if !enum && !cst {
		switch t := s.Vals["type"].(type) {
		case string:
			n := s.Clone()
			n.Set("type", []any{t, "null"})
			return n
		case []any:
			n := s.Clone()
			n.Set("type", append(append([]any(nil), t...), "null"))
			return n
		}
		if l, ok := s.Vals["anyOf"].([]any); ok && s.Vals["type"] == nil {
			n := s.Clone()
			n.Set("anyOf", append(append([]any(nil), l...), &object{Keys: []string{"type"}, Vals: map[string]any{"type": "null"}}))
			return n
		}
	}
	u := newObject()
	inner := s
	if d, ok := s.Vals["description"]; ok {
		inner = s.Clone()
		inner.Del("description")
		u.Set("description", d)
	}
	u.Set("anyOf", []any{inner, &object{Keys: []string{"type"}, Vals: map[string]any{"type": "null"}}})
	return u
}

// restore is the way back from an answer to a strict schema: the
// properties of an object whose null is dropped, and the ways back of its
// members, items, references and the object branch of a union.
type restore struct {
	nulls  map[string]bool
	props  map[string]*restore
	items  *restore
	branch *restore
	ref    string
	defs   map[string]*restore
}

func (r *restore) drop(name string) {
	if r.nulls == nil {
		r.nulls = map[string]bool{}
	}
	r.nulls[name] = true
}

func (r *restore) child(name string, c *restore) {
	if r.props == nil {
		r.props = map[string]*restore{}
	}
	r.props[name] = c
}

// resolved follows a reference.
func (r *restore) resolved() *restore {
	for i := 0; r != nil && r.ref != "" && i < 32; i++ {
		r = r.defs[r.ref]
	}
	return r
}

// live reports whether anything below r drops a null.
func (r *restore) live(seen map[*restore]bool) bool {
	r = r.resolved()
	if r == nil || seen[r] {
		return false
	}
	seen[r] = true
	if len(r.nulls) > 0 {
		return true
	}
	for _, c := range r.props {
		if c.live(seen) {
			return true
		}
	}
	return r.items.live(seen) || r.branch.live(seen)
}

// answer maps an answer to the strict schema back: the nulls of optional
// properties are dropped. An answer that is not JSON, or holds no such
// null, is returned as it is.
func (r *restore) answer(content string) string {
	if r == nil {
		return content
	}
	doc, err := decodeOrdered([]byte(content))
	if err != nil {
		return content
	}
	if !r.apply(doc, 0) {
		return content
	}
	var b bytes.Buffer
	if err := writeJSON(&b, doc); err != nil {
		return content
	}
	return b.String()
}

// apply drops the nulls below doc; it reports whether it dropped any.
func (r *restore) apply(doc any, depth int) bool {
	r = r.resolved()
	if r == nil || depth > 64 {
		return false
	}
	changed := false
	switch v := doc.(type) {
	case *object:
		if r.branch != nil && r.nulls == nil && r.props == nil {
			return r.branch.apply(doc, depth+1)
		}
		for _, k := range append([]string(nil), v.Keys...) {
			if r.nulls[k] && v.Vals[k] == nil {
				v.Del(k)
				changed = true
				continue
			}
			if c := r.props[k]; c != nil && c.apply(v.Vals[k], depth+1) {
				changed = true
			}
		}
	case []any:
		if r.items == nil {
			return false
		}
		for _, x := range v {
			if r.items.apply(x, depth+1) {
				changed = true
			}
		}
	}
	return changed
}

// StrictAnswers returns m with its answers mapped back from the strict
// form of the request's schema in provider's dialect (the nulls of
// optional properties dropped), for answers that reach the heal loop
// other than through the provider's own Complete: a batch's recorded
// answers, replayed. The providers' Complete maps its own answers already;
// mapping one twice changes nothing. For a provider whose strict form
// keeps optional properties optional (Anthropic), m itself.
func StrictAnswers(m model.Model, provider string) model.Model {
	if provider != ProviderOpenAI {
		return m
	}
	return &strictAnswers{m: m, c: &strictCache{d: openAIStrict}}
}

type strictAnswers struct {
	m model.Model
	c *strictCache
}

// Complete implements model.Model.
func (s *strictAnswers) Complete(ctx context.Context, req model.Request) (model.Response, error) {
	resp, err := s.m.Complete(ctx, req)
	if err == nil && len(req.Schema) > 0 && resp.ToolCallID == "" {
		if ss := s.c.of(req.Schema); ss.back != nil {
			resp.Content = ss.back.answer(resp.Content)
		}
	}
	return resp, err
}

// Provider is the wrapped model's provider name ("" when it has none).
func (s *strictAnswers) Provider() string {
	if p, ok := s.m.(interface{ Provider() string }); ok {
		return p.Provider()
	}
	return ""
}
