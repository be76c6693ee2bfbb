package sim

import (
	"encoding/json"
	"strconv"

	"github.com/go-json-experiment/json/jsontext"
	"github.com/llmpipeline/pipeline/internal/jsonorder"
)

// val is a JSON value with object keys in order, as the simulator builds
// and edits its outputs.
type val struct {
	k    byte   // vNull, vBool, vNum, vStr, vObj, vArr
	s    string // bool and number: JSON text; string: the decoded text
	keys []string
	vals []*val // object values (parallel to keys) or array items
	n    *snode // the schema node it was generated from; nil when parsed
}

const (
	vNull byte = iota
	vBool
	vNum
	vStr
	vObj
	vArr
)

// omap is a decoded JSON object that remembers its key order.
type omap = jsonorder.Object

// decodeOrdered decodes one JSON value: objects as *omap, arrays as []any,
// numbers as json.Number. Trailing data is an error.
func decodeOrdered(b []byte) (any, error) { return jsonorder.Decode(b, 200) }

// fromAny converts a decodeOrdered value to a val.
func fromAny(x any) *val {
	switch t := x.(type) {
	case nil:
		return &val{k: vNull}
	case bool:
		return &val{k: vBool, s: strconv.FormatBool(t)}
	case json.Number:
		return &val{k: vNum, s: t.String()}
	case string:
		return &val{k: vStr, s: t}
	case *omap:
		v := &val{k: vObj, keys: make([]string, 0, len(t.Keys)), vals: make([]*val, 0, len(t.Keys))}
		for _, k := range t.Keys {
			v.keys = append(v.keys, k)
			v.vals = append(v.vals, fromAny(t.Vals[k]))
		}
		return v
	case []any:
		v := &val{k: vArr, vals: make([]*val, 0, len(t))}
		for _, e := range t {
			v.vals = append(v.vals, fromAny(e))
		}
		return v
	}
	return &val{k: vNull}
}

// clone copies v deeply (enum and const values are shared by the schema).
func (v *val) clone() *val {
	c := *v
	if v.keys != nil {
		c.keys = append([]string(nil), v.keys...)
	}
	if v.vals != nil {
		c.vals = make([]*val, len(v.vals))
		for i, e := range v.vals {
			c.vals[i] = e.clone()
		}
	}
	return &c
}

func (v *val) get(key string) (*val, int) {
	for i, k := range v.keys {
		if k == key {
			return v.vals[i], i
		}
	}
	return nil, -1
}

func (v *val) set(key string, x *val) {
	if _, i := v.get(key); i >= 0 {
		v.vals[i] = x
		return
	}
	v.keys = append(v.keys, key)
	v.vals = append(v.vals, x)
}

func (v *val) del(key string) {
	if _, i := v.get(key); i >= 0 {
		v.keys = append(v.keys[:i], v.keys[i+1:]...)
		v.vals = append(v.vals[:i], v.vals[i+1:]...)
	}
}

// equal reports whether two values are the same JSON (numbers by text).
func (v *val) equal(o *val) bool {
	if v.k != o.k || v.s != o.s || len(v.vals) != len(o.vals) || len(v.keys) != len(o.keys) {
		return false
	}
	for i := range v.keys {
		if v.keys[i] != o.keys[i] {
			return false
		}
	}
	for i := range v.vals {
		if !v.vals[i].equal(o.vals[i]) {
			return false
		}
	}
	return true
}

// writer serialises vals as indented JSON, optionally leaving one trailing
// comma after the last member of the container numbered comma (counting
// non-empty containers in document order from 1; 0 for none).
type writer struct {
	buf   []byte
	comma int
	seen  int
}

func (w *writer) value(v *val, indent int) {
	switch v.k {
	case vNull:
		w.buf = append(w.buf, "null"...)
	case vBool, vNum:
		w.buf = append(w.buf, v.s...)
	case vStr:
		w.buf = appendString(w.buf, v.s)
	case vObj, vArr:
		open, close := byte('{'), byte('}')
		if v.k == vArr {
			open, close = '[', ']'
		}
		if len(v.vals) == 0 {
			w.buf = append(w.buf, open, close)
			return
		}
		w.seen++
		me := w.seen
		w.buf = append(w.buf, open)
		for i, e := range v.vals {
			w.buf = append(w.buf, '\n')
			w.buf = appendIndent(w.buf, indent+1)
			if v.k == vObj {
				w.buf = appendString(w.buf, v.keys[i])
				w.buf = append(w.buf, ':', ' ')
			}
			w.value(e, indent+1)
			if i < len(v.vals)-1 || me == w.comma {
				w.buf = append(w.buf, ',')
			}
		}
		w.buf = append(w.buf, '\n')
		w.buf = appendIndent(w.buf, indent)
		w.buf = append(w.buf, close)
	}
}

// appendString appends s as a JSON string, escaped only where JSON
// requires it. Invalid UTF-8 is written as U+FFFD; AppendQuote's error
// says only that, so the text it wrote is kept.
func appendString(b []byte, s string) []byte {
	b, _ = jsontext.AppendQuote(b, s)
	return b
}

func appendIndent(b []byte, n int) []byte {
	for range n {
		b = append(b, ' ', ' ')
	}
	return b
}

// containers counts the non-empty objects and arrays in v.
func containers(v *val) int {
	if (v.k != vObj && v.k != vArr) || len(v.vals) == 0 {
		return 0
	}
	c := 1
	for _, e := range v.vals {
		c += containers(e)
	}
	return c
}
