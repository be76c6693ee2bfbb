package eval

import (
	"encoding/json"
	"errors"

	"github.com/tidwall/gjson"
)

// decoder reads JSON values into trees of object, []any, string,
// json.Number (the number's text, so that 30 and 30.0 compare by value and
// large integers stay exact), bool and nil. It walks the text with gjson,
// whose strings without escapes are slices of the text (no copy per
// value), after gjson.Valid: several times faster than encoding/json's
// reflection into any. Labels were held to strict JSON (duplicate names,
// UTF-8) by check before; a produced value reads as the worker stored it,
// a later duplicate name winning. One decoder serves one goroutine.
type decoder struct {
	// the members and elements of the objects and arrays being read: a
	// container's go into one allocation of their exact size
	members []member
	elems   []any
}

func newDecoder() *decoder { return &decoder{} }

var errNotJSON = errors.New("not valid JSON")

// decode reads the one JSON value b holds.
func (d *decoder) decode(b []byte) (any, error) {
	if !gjson.ValidBytes(b) {
		return nil, errNotJSON
	}
	clear(d.members)
	clear(d.elems)
	d.members, d.elems = d.members[:0], d.elems[:0]
	return d.value(gjson.Parse(string(b))), nil
}

func (d *decoder) value(r gjson.Result) any {
	switch r.Type {
	case gjson.String:
		return r.Str
	case gjson.Number:
		return json.Number(r.Raw)
	case gjson.True:
		return true
	case gjson.False:
		return false
	case gjson.Null:
		return nil
	}
	if r.IsArray() {
		start := len(d.elems)
		r.ForEach(func(_, v gjson.Result) bool {
			d.elems = append(d.elems, d.value(v))
			return true
		})
		a := make([]any, len(d.elems)-start)
		copy(a, d.elems[start:])
		clear(d.elems[start:])
		d.elems = d.elems[:start]
		return a
	}
	start := len(d.members)
	var pos map[string]int // for big objects, to replace a duplicate
	r.ForEach(func(k, v gjson.Result) bool {
		key, val := k.Str, d.value(v)
		cur := object(d.members[start:])
		if i := cur.index(key, pos); i >= 0 {
			cur[i].val = val
			return true
		}
		d.members = append(d.members, member{key, val})
		if n := len(d.members) - start; pos != nil {
			pos[key] = n - 1
		} else if n == bigObject {
			pos = object(d.members[start:]).positions()
		}
		return true
	})
	o := make(object, len(d.members)-start)
	copy(o, d.members[start:])
	clear(d.members[start:])
	d.members = d.members[:start]
	return o
}

// decode reads one JSON value with a decoder of its own (tests).
func decode(b []byte) (any, error) { return newDecoder().decode(b) }
