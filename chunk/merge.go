package chunk

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/big"
	"slices"
	"strconv"
	"strings"
	"unsafe"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/llmpipeline/pipeline/job"
	"github.com/tidwall/gjson"
)

// maxDepth bounds the nesting of a chunk's answer.
const maxDepth = 200

// Part is one chunk's answer: its number (1-based, chunk order) and data.
type Part struct {
	Chunk int
	Data  json.RawMessage
}

// Conflict is a field where a later chunk gave another non-null value than
// the one kept: job.Conflict, which the document's outcome records.
type Conflict = job.Conflict

// ConflictValue is one chunk's value in a Conflict.
type ConflictValue = job.ConflictValue

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
// not JSON is an error naming its chunk. The parts' data is read in place:
// it must not change while Merge runs. The result is compact JSON whose
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
		acc = st.merge(acc, v, m.root, nil)
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
	keys  []string       // in the order they first appeared
	vals  []node         // vals[i] is keys[i]'s
	index map[string]int // key -> i, once the object has many keys
}

// smallObject is the most keys an object is searched linearly for.
const smallObject = 8

// get returns member k and its position.
func (o *objNode) get(k string) (node, int) {
	if o.index != nil {
		if i, ok := o.index[k]; ok {
			return o.vals[i], i
		}
		return nil, -1
	}
	for i, x := range o.keys {
		if x == k {
			return o.vals[i], i
		}
	}
	return nil, -1
}

// set sets member k (at position i from get, -1 when new).
func (o *objNode) set(k string, i int, v node) {
	if i >= 0 {
		o.vals[i] = v
		return
	}
	o.keys = append(o.keys, k)
	o.vals = append(o.vals, v)
	if o.index != nil {
		o.index[k] = len(o.keys) - 1
	} else if len(o.keys) > smallObject {
		o.index = make(map[string]int, 2*len(o.keys))
		for j, x := range o.keys {
			o.index[x] = j
		}
	}
}

// member is member k (nil when absent).
func (o *objNode) member(k string) node {
	v, _ := o.get(k)
	return v
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
	raw   string
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
	depthErr  bool // set by decodeNode past maxDepth
}

// decode reads one chunk's data into the tree. The tree's scalars and
// names are read in place (strings over data): data must not change
// until the merge is written.
func (st *merging) decode(data []byte, c int) (node, error) {
	if !gjson.ValidBytes(data) {
		return nil, errors.New("not valid JSON")
	}
	if len(data) == 0 {
		return nil, errors.New("empty")
	}
	st.depthErr = false
	n := st.decodeNode(gjson.Parse(unsafe.String(&data[0], len(data))), c, 0)
	if st.depthErr {
		return nil, errors.New("nested too deep")
	}
	return n, nil
}

func (st *merging) decodeNode(v gjson.Result, c, depth int) node {
	if depth > maxDepth {
		st.depthErr = true
		return &leafNode{chunk: c, raw: "null"}
	}
	switch {
	case v.IsObject():
		o := &objNode{chunk: c}
		v.ForEach(func(k, e gjson.Result) bool {
			_, at := o.get(k.Str)
			o.set(k.Str, at, st.decodeNode(e, c, depth+1))
			return !st.depthErr
		})
		return o
	case v.IsArray():
		a := &arrNode{chunk: c}
		v.ForEach(func(_, e gjson.Result) bool {
			a.items = append(a.items, st.decodeNode(e, c, depth+1))
			return !st.depthErr
		})
		return a
	}
	return &leafNode{chunk: c, raw: v.Raw}
}

// pathNode is a field's place: its parent's and its own segment. The
// pointer text is only written for a conflict.
type pathNode struct {
	parent *pathNode
	key    string
	index  int // an array element's, when key is ""
}

func (p *pathNode) String() string {
	if p == nil {
		return ""
	}
	if p.key == "" {
		return p.parent.String() + "/" + strconv.Itoa(p.index)
	}
	return p.parent.String() + "/" + escape(p.key)
}

// merge merges v (one chunk's, described by schema sch, at path) into acc.
func (st *merging) merge(acc, v node, sch any, path *pathNode) node {
	if acc == nil || (isNull(acc) && !isNull(v)) {
		return v
	}
	if isNull(v) {
		return acc
	}
	switch a := acc.(type) {
	case *objNode:
		if o, ok := v.(*objNode); ok {
			for i, k := range o.keys {
				old, at := a.get(k)
				a.set(k, at, st.merge(old, o.vals[i], st.m.property(sch, k), &pathNode{parent: path, key: k}))
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
						a.items[at] = st.merge(a.items[at], e, items, &pathNode{parent: path, index: at})
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

func (st *merging) conflict(at *pathNode, kept, v node) {
	path := at.String()
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
			b = appendNode(b, n.vals[i])
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
			if v := o.member(k); v == nil || isNull(v) {
				complete = false
				break
			}
		}
		if complete {
			b = append(b, 'k')
			for _, k := range keys {
				b = canonical(b, o.member(k))
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
			b = appendText(b, k)
			b = canonical(b, n.member(k))
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
		return appendLeafKey(b, n)
	}
	return b
}

// appendText appends s with its length first, so that texts side by side
// never run into each other.
func appendText(b []byte, s string) []byte {
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, ':')
	return append(b, s...)
}

// appendLeafKey appends a scalar's value: a string's text (unescaped), a
// number's value (1, 1.0 and 1e0 are one), true, false or null.
func appendLeafKey(b []byte, l *leafNode) []byte {
	switch l.raw[0] {
	case '"':
		body := l.raw[1 : len(l.raw)-1]
		if strings.IndexByte(body, '\\') >= 0 {
			if s, err := jsontext.AppendUnquote(nil, l.raw); err == nil {
				body = string(s)
			}
		}
		b = append(b, 's')
		return appendText(b, body)
	case 't', 'f', 'n':
		return append(b, l.raw...)
	}
	b = append(b, '#')
	return append(b, numberKey(string(l.raw))...)
}

// leafKey is appendLeafKey's text.
func leafKey(l *leafNode) string { return string(appendLeafKey(nil, l)) }

// numberKey is a number's exact value as text: an integer's digits, any
// other value's big.Rat.RatString, so that every spelling of one value
// (0.5, 5e-1, 50E-2; 1, 1.0, 1e0) has one key.
func numberKey(n string) string {
	if !strings.ContainsAny(n, ".eE") {
		// A JSON integer has no leading zeros: its text is its value.
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
	if a.raw == b.raw {
		return true
	}
	ka, kb := a.raw[0], b.raw[0]
	switch {
	case (ka == '"') != (kb == '"'):
		return false
	case ka == '"' && strings.IndexByte(a.raw, '\\') < 0 && strings.IndexByte(b.raw, '\\') < 0:
		return false // two strings without escapes are equal only as bytes
	}
	return leafKey(a) == leafKey(b)
}

// escape writes a JSON Pointer token.
func escape(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "~", "~0"), "/", "~1")
}
