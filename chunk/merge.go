package chunk

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/big"
	"sort"
	"strings"

	"github.com/llmpipeline/pipeline/internal/jsonorder"
)

// maxDepth bounds the nesting of a chunk's answer.
const maxDepth = 200

// Part is one chunk's answer: its number (1-based, chunk order) and data.
type Part struct {
	Chunk int
	Data  json.RawMessage
}

// Conflict is a field where a later chunk gave another non-null value than
// the one kept: Values lists the kept one first, then each different one,
// with the chunk that gave it.
type Conflict struct {
	Path   string          `json:"path"`
	Values []ConflictValue `json:"values"`
}

// ConflictValue is one chunk's value in a Conflict.
type ConflictValue struct {
	Chunk int             `json:"chunk"`
	Value json.RawMessage `json:"value"`
}

// Merger merges chunks' answers by one schema. It is immutable and safe
// for concurrent use.
type Merger struct {
	root any // the schema, decoded by encoding/json
}

// NewMerger reads the schema (its text, as schemas.Schema.Raw holds it).
func NewMerger(schema []byte) (*Merger, error) {
	var root any
	if len(schema) > 0 {
		if err := json.Unmarshal(schema, &root); err != nil {
			return nil, fmt.Errorf("reading the schema for merging: %w", err)
		}
	}
	return &Merger{root: root}, nil
}

// Merge merges parts in the order given (chunk order). A part whose data is
// not JSON is an error naming its chunk. The result is compact JSON whose
// objects keep the order in which their members first appeared.
func (m *Merger) Merge(parts []Part) (json.RawMessage, []Conflict, error) {
	st := &merging{m: m, conflicts: map[string]*Conflict{}}
	var acc node
	for _, p := range parts {
		v, err := jsonorder.Decode(p.Data, maxDepth)
		if err != nil {
			return nil, nil, fmt.Errorf("chunk %d: its data is not JSON: %w", p.Chunk, err)
		}
		acc = st.merge(acc, v, p.Chunk, m.root, "")
	}
	var b bytes.Buffer
	if err := jsonorder.Write(&b, plain(acc)); err != nil {
		return nil, nil, fmt.Errorf("writing the merged data: %w", err)
	}
	out := make([]Conflict, 0, len(st.order))
	for _, path := range st.order {
		out = append(out, *st.conflicts[path])
	}
	return b.Bytes(), out, nil
}

// node is the merge's tree: every value knows which chunk it came from.
type node interface{ from() int }

type objNode struct {
	chunk int
	keys  []string
	vals  map[string]node
}

type arrNode struct {
	chunk int
	items []node
	// index maps an element's identity (its canonical JSON, or that of its
	// merge key) to the positions of the elements that have it.
	index map[string][]int
}

type leafNode struct {
	chunk int
	v     any // string, json.Number, bool or nil
}

func (n *objNode) from() int  { return n.chunk }
func (n *arrNode) from() int  { return n.chunk }
func (n *leafNode) from() int { return n.chunk }

type merging struct {
	m         *Merger
	conflicts map[string]*Conflict
	order     []string
}

// merge merges v (from chunk c, described by schema sch, at path) into acc.
func (st *merging) merge(acc node, v any, c int, sch any, path string) node {
	if v == nil {
		if acc == nil {
			return &leafNode{chunk: c}
		}
		return acc
	}
	if acc == nil || isNull(acc) {
		return st.wrap(v, c, sch)
	}
	switch a := acc.(type) {
	case *objNode:
		if o, ok := v.(*jsonorder.Object); ok {
			for _, k := range o.Keys {
				sub := st.m.property(sch, k)
				old, had := a.vals[k]
				merged := st.merge(old, o.Vals[k], c, sub, path+"/"+escape(k))
				if !had {
					a.keys = append(a.keys, k)
				}
				a.vals[k] = merged
			}
			return a
		}
	case *arrNode:
		if l, ok := v.([]any); ok {
			keys := st.m.mergeKey(sch)
			items := st.m.items(sch)
			for _, e := range l {
				id := identity(e, keys)
				if at, dup := a.fromOther(id, c); dup {
					if len(keys) > 0 {
						a.items[at] = st.merge(a.items[at], e, c, items, fmt.Sprintf("%s/%d", path, at))
					}
					continue
				}
				a.index[id] = append(a.index[id], len(a.items))
				a.items = append(a.items, st.wrap(e, c, items))
			}
			return a
		}
	case *leafNode:
		if _, scalar := v.(*jsonorder.Object); !scalar {
			if _, list := v.([]any); !list && equalScalar(a.v, v) {
				return a
			}
		}
	}
	st.conflict(path, acc, v, c)
	return acc
}

// fromOther reports the first element with identity id taken from a chunk
// other than c.
func (a *arrNode) fromOther(id string, c int) (int, bool) {
	for _, at := range a.index[id] {
		if a.items[at].from() != c {
			return at, true
		}
	}
	return 0, false
}

func (st *merging) conflict(path string, kept node, v any, c int) {
	cf, ok := st.conflicts[path]
	if !ok {
		cf = &Conflict{Path: path, Values: []ConflictValue{{Chunk: kept.from(), Value: encode(plain(kept))}}}
		st.conflicts[path] = cf
		st.order = append(st.order, path)
	}
	cf.Values = append(cf.Values, ConflictValue{Chunk: c, Value: encode(v)})
}

// wrap turns a decoded value of chunk c into the merge's tree.
func (st *merging) wrap(v any, c int, sch any) node {
	switch v := v.(type) {
	case *jsonorder.Object:
		n := &objNode{chunk: c, keys: append([]string(nil), v.Keys...), vals: make(map[string]node, len(v.Keys))}
		for _, k := range v.Keys {
			n.vals[k] = st.wrap(v.Vals[k], c, st.m.property(sch, k))
		}
		return n
	case []any:
		keys := st.m.mergeKey(sch)
		items := st.m.items(sch)
		n := &arrNode{chunk: c, items: make([]node, 0, len(v)), index: make(map[string][]int, len(v))}
		for _, e := range v {
			id := identity(e, keys)
			n.index[id] = append(n.index[id], len(n.items))
			n.items = append(n.items, st.wrap(e, c, items))
		}
		return n
	}
	return &leafNode{chunk: c, v: v}
}

func isNull(n node) bool {
	l, ok := n.(*leafNode)
	return ok && l.v == nil
}

// plain turns the merge's tree back into jsonorder's values.
func plain(n node) any {
	switch n := n.(type) {
	case *objNode:
		o := jsonorder.NewObject()
		for _, k := range n.keys {
			o.Set(k, plain(n.vals[k]))
		}
		return o
	case *arrNode:
		l := make([]any, len(n.items))
		for i, e := range n.items {
			l[i] = plain(e)
		}
		return l
	case *leafNode:
		return n.v
	}
	return nil
}

func encode(v any) json.RawMessage {
	var b bytes.Buffer
	if err := jsonorder.Write(&b, v); err != nil {
		return json.RawMessage(`null`)
	}
	return b.Bytes()
}

// identity is what makes two array elements one: the canonical JSON of
// the element, or, when keys are given and the element is an object that
// has every one of them non-null, the canonical JSON of those.
func identity(e any, keys []string) string {
	var b strings.Builder
	if o, ok := e.(*jsonorder.Object); ok && len(keys) > 0 {
		complete := true
		for _, k := range keys {
			if v, ok := o.Vals[k]; !ok || v == nil {
				complete = false
				break
			}
		}
		if complete {
			b.WriteString("k")
			for _, k := range keys {
				canonical(&b, o.Vals[k])
				b.WriteByte(',')
			}
			return b.String()
		}
	}
	b.WriteString("v")
	canonical(&b, e)
	return b.String()
}

// canonical writes v so that two equal JSON values write the same: object
// members sorted by name, numbers by their exact value.
func canonical(b *strings.Builder, v any) {
	switch v := v.(type) {
	case *jsonorder.Object:
		keys := append([]string(nil), v.Keys...)
		sort.Strings(keys)
		b.WriteByte('{')
		for _, k := range keys {
			b.Write(encode(k))
			b.WriteByte(':')
			canonical(b, v.Vals[k])
			b.WriteByte(',')
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for _, e := range v {
			canonical(b, e)
			b.WriteByte(',')
		}
		b.WriteByte(']')
	case json.Number:
		b.WriteString(numberKey(v))
	default:
		b.Write(encode(v))
	}
}

// numberKey is a number's exact value as text: 1, 1.0 and 1e0 are one.
func numberKey(n json.Number) string {
	r, ok := new(big.Rat).SetString(string(n))
	if !ok {
		return string(n)
	}
	return r.RatString()
}

func equalScalar(a, b any) bool {
	an, aok := a.(json.Number)
	bn, bok := b.(json.Number)
	if aok && bok {
		return numberKey(an) == numberKey(bn)
	}
	return a == b
}

// escape writes a JSON Pointer token.
func escape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
