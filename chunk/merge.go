package chunk

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"

	"github.com/go-json-experiment/json/jsontext"
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
// objects keep the order in which their members first appeared; scalars
// keep the spelling their chunk gave them.
func (m *Merger) Merge(parts []Part) (json.RawMessage, []Conflict, error) {
	st := &merging{m: m, conflicts: map[string]*Conflict{}}
	var acc node
	for _, p := range parts {
		v, err := st.decode(p.Data, p.Chunk)
		if err != nil {
			return nil, nil, fmt.Errorf("chunk %d: its data is not JSON: %w", p.Chunk, err)
		}
		acc = st.merge(acc, v, m.root, "")
	}
	out := make([]Conflict, 0, len(st.order))
	for _, path := range st.order {
		out = append(out, *st.conflicts[path])
	}
	if acc == nil {
		return json.RawMessage("null"), out, nil
	}
	return appendNode(nil, acc), out, nil
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
	// index maps an element's identity (see identity) to the positions of
	// the elements that have it; built when the array is first merged into.
	index map[string][]int
}

// leafNode is a scalar as its chunk spelled it (raw JSON).
type leafNode struct {
	chunk int
	raw   []byte
}

func (n *objNode) from() int  { return n.chunk }
func (n *arrNode) from() int  { return n.chunk }
func (n *leafNode) from() int { return n.chunk }

func isNull(n node) bool {
	l, ok := n.(*leafNode)
	return ok && l.raw[0] == 'n'
}

type merging struct {
	m         *Merger
	conflicts map[string]*Conflict
	order     []string
	dec       *jsontext.Decoder // reused for every part
	rd        bytes.Reader
}

// decode reads one chunk's data into the tree. Scalars are slices of
// data, which the tree keeps.
func (st *merging) decode(data []byte, c int) (node, error) {
	st.rd.Reset(data)
	if st.dec == nil {
		st.dec = jsontext.NewDecoder(&st.rd, jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	} else {
		st.dec.Reset(&st.rd, jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))
	}
	dec := st.dec
	n, err := decodeNode(dec, data, c, 0)
	if err != nil {
		return nil, err
	}
	if _, err := dec.ReadToken(); err == nil {
		return nil, errors.New("data after the JSON value")
	}
	return n, nil
}

func decodeNode(dec *jsontext.Decoder, data []byte, c, depth int) (node, error) {
	if depth > maxDepth {
		return nil, errors.New("nested too deep")
	}
	switch dec.PeekKind() {
	case '{':
		if _, err := dec.ReadToken(); err != nil {
			return nil, err
		}
		o := &objNode{chunk: c, vals: map[string]node{}}
		for dec.PeekKind() != '}' {
			name, err := dec.ReadToken()
			if err != nil {
				return nil, err
			}
			k := name.String()
			v, err := decodeNode(dec, data, c, depth+1)
			if err != nil {
				return nil, err
			}
			if _, dup := o.vals[k]; !dup {
				o.keys = append(o.keys, k)
			}
			o.vals[k] = v
		}
		_, err := dec.ReadToken()
		return o, err
	case '[':
		if _, err := dec.ReadToken(); err != nil {
			return nil, err
		}
		a := &arrNode{chunk: c}
		for dec.PeekKind() != ']' {
			v, err := decodeNode(dec, data, c, depth+1)
			if err != nil {
				return nil, err
			}
			a.items = append(a.items, v)
		}
		_, err := dec.ReadToken()
		return a, err
	}
	v, err := dec.ReadValue()
	if err != nil {
		return nil, err
	}
	// The value ends where the decoder is now; it is len(v) bytes long
	// (ReadValue's bytes are the decoder's, reused by the next read).
	end := int(dec.InputOffset())
	if start := end - len(v); start >= 0 && end <= len(data) && bytes.Equal(data[start:end], v) {
		return &leafNode{chunk: c, raw: data[start:end:end]}, nil
	}
	return &leafNode{chunk: c, raw: slices.Clone(v)}, nil
}

// merge merges v (one chunk's, described by schema sch, at path) into acc.
func (st *merging) merge(acc, v node, sch any, path string) node {
	if acc == nil || (isNull(acc) && !isNull(v)) {
		return v
	}
	if isNull(v) {
		return acc
	}
	switch a := acc.(type) {
	case *objNode:
		if o, ok := v.(*objNode); ok {
			for _, k := range o.keys {
				old, had := a.vals[k]
				a.vals[k] = st.merge(old, o.vals[k], st.m.property(sch, k), path+"/"+escape(k))
				if !had {
					a.keys = append(a.keys, k)
				}
			}
			return a
		}
	case *arrNode:
		if l, ok := v.(*arrNode); ok {
			keys := st.m.mergeKey(sch)
			items := st.m.items(sch)
			if a.index == nil {
				a.index = make(map[string][]int, len(a.items)+len(l.items))
				for i, e := range a.items {
					id := identity(e, keys)
					a.index[id] = append(a.index[id], i)
				}
			}
			c := v.from()
			for _, e := range l.items {
				id := identity(e, keys)
				if at, dup := a.fromOther(id, c); dup {
					if len(keys) > 0 {
						a.items[at] = st.merge(a.items[at], e, items, path+"/"+strconv.Itoa(at))
					}
					continue
				}
				a.index[id] = append(a.index[id], len(a.items))
				a.items = append(a.items, e)
			}
			return a
		}
	case *leafNode:
		if l, ok := v.(*leafNode); ok && equalLeaf(a, l) {
			return a
		}
	}
	st.conflict(path, acc, v)
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

func (st *merging) conflict(path string, kept, v node) {
	cf, ok := st.conflicts[path]
	if !ok {
		cf = &Conflict{Path: path, Values: []ConflictValue{{Chunk: kept.from(), Value: appendNode(nil, kept)}}}
		st.conflicts[path] = cf
		st.order = append(st.order, path)
	}
	cf.Values = append(cf.Values, ConflictValue{Chunk: v.from(), Value: appendNode(nil, v)})
}

// appendNode writes n as compact JSON.
func appendNode(b []byte, n node) []byte {
	switch n := n.(type) {
	case *objNode:
		b = append(b, '{')
		for i, k := range n.keys {
			if i > 0 {
				b = append(b, ',')
			}
			b, _ = jsontext.AppendQuote(b, k)
			b = append(b, ':')
			b = appendNode(b, n.vals[k])
		}
		return append(b, '}')
	case *arrNode:
		b = append(b, '[')
		for i, e := range n.items {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendNode(b, e)
		}
		return append(b, ']')
	case *leafNode:
		return append(b, n.raw...)
	}
	return append(b, "null"...)
}

// identity is what makes two array elements one: the canonical form of the
// element, or, when keys are given and the element is an object that has
// every one of them non-null, the canonical form of those.
func identity(e node, keys []string) string {
	var b []byte
	if o, ok := e.(*objNode); ok && len(keys) > 0 {
		complete := true
		for _, k := range keys {
			if v, ok := o.vals[k]; !ok || isNull(v) {
				complete = false
				break
			}
		}
		if complete {
			b = append(b, 'k')
			for _, k := range keys {
				b = canonical(b, o.vals[k])
				b = append(b, ',')
			}
			return string(b)
		}
	}
	return string(canonical(append(b, 'v'), e))
}

// canonical appends n so that two equal JSON values append the same:
// object members sorted by name, strings unescaped, numbers by their value.
func canonical(b []byte, n node) []byte {
	switch n := n.(type) {
	case *objNode:
		keys := slices.Clone(n.keys)
		slices.Sort(keys)
		b = append(b, '{')
		for _, k := range keys {
			b = strconv.AppendQuote(b, k)
			b = append(b, ':')
			b = canonical(b, n.vals[k])
			b = append(b, ',')
		}
		return append(b, '}')
	case *arrNode:
		b = append(b, '[')
		for _, e := range n.items {
			b = canonical(b, e)
			b = append(b, ',')
		}
		return append(b, ']')
	case *leafNode:
		return append(b, leafKey(n)...)
	}
	return b
}

// leafKey is a scalar's value as text: strings unescaped and quoted, the
// numbers 1, 1.0 and 1e0 one.
func leafKey(l *leafNode) string {
	switch l.raw[0] {
	case '"':
		s, err := jsontext.AppendUnquote(nil, l.raw)
		if err != nil {
			return string(l.raw)
		}
		return strconv.Quote(string(s))
	case 't', 'f', 'n':
		return string(l.raw)
	}
	return numberKey(string(l.raw))
}

// numberKey is a number's exact value as text.
func numberKey(n string) string {
	if !strings.ContainsAny(n, "eE") {
		// A JSON number without an exponent has no leading zeros: its
		// value is its text without the fraction's trailing zeros.
		if strings.IndexByte(n, '.') >= 0 {
			n = strings.TrimRight(strings.TrimRight(n, "0"), ".")
		}
		if n == "-0" {
			n = "0"
		}
		return n
	}
	r, ok := new(big.Rat).SetString(n)
	if !ok {
		return n
	}
	if r.IsInt() {
		return r.Num().String()
	}
	return r.RatString()
}

func equalLeaf(a, b *leafNode) bool {
	if bytes.Equal(a.raw, b.raw) {
		return true
	}
	ka, kb := a.raw[0], b.raw[0]
	switch {
	case (ka == '"') != (kb == '"'):
		return false
	case ka == '"' && bytes.IndexByte(a.raw, '\\') < 0 && bytes.IndexByte(b.raw, '\\') < 0:
		return false // two strings without escapes are equal only as bytes
	}
	return leafKey(a) == leafKey(b)
}

// escape writes a JSON Pointer token.
func escape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
