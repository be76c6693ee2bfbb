// Package jsonorder decodes and writes JSON whose objects keep their
// members' order: a schema's property order is the order a model writes
// its answer in, so the strict form of a schema sent to a provider and the
// simulator's answers both need it, and encoding/json's maps lose it.
package jsonorder

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
)

// Object is a JSON object whose members keep their order.
type Object struct {
	Keys []string
	Vals map[string]any // *Object, []any, string, json.Number, bool or nil
}

// NewObject is an empty object.
func NewObject() *Object { return &Object{Vals: map[string]any{}} }

// Set sets member k, appended when it is new.
func (o *Object) Set(k string, v any) {
	if _, ok := o.Vals[k]; !ok {
		o.Keys = append(o.Keys, k)
	}
	o.Vals[k] = v
}

// Del removes member k.
func (o *Object) Del(k string) {
	if _, ok := o.Vals[k]; !ok {
		return
	}
	delete(o.Vals, k)
	for i, x := range o.Keys {
		if x == k {
			o.Keys = append(o.Keys[:i:i], o.Keys[i+1:]...)
			break
		}
	}
}

// Clone is a shallow copy: the members' values are shared.
func (o *Object) Clone() *Object {
	n := &Object{Keys: append([]string(nil), o.Keys...), Vals: make(map[string]any, len(o.Vals))}
	for k, v := range o.Vals {
		n.Vals[k] = v
	}
	return n
}

// MarshalJSON writes the members in their order, compact, strings as
// they are (no HTML escaping).
func (o *Object) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	if err := Write(&b, o); err != nil {
		return nil, err
	}
	return b.Bytes(), nil
}

// Write writes v (a value Decode returns) to b, compact, objects in their
// members' order.
func Write(b *bytes.Buffer, v any) error {
	switch v := v.(type) {
	case *Object:
		b.WriteByte('{')
		for i, k := range v.Keys {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := Write(b, k); err != nil {
				return err
			}
			b.WriteByte(':')
			if err := Write(b, v.Vals[k]); err != nil {
				return err
			}
		}
		b.WriteByte('}')
	case []any:
		b.WriteByte('[')
		for i, x := range v {
			if i > 0 {
				b.WriteByte(',')
			}
			if err := Write(b, x); err != nil {
				return err
			}
		}
		b.WriteByte(']')
	default:
		var tmp bytes.Buffer
		enc := json.NewEncoder(&tmp)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(v); err != nil {
			return err
		}
		b.Write(bytes.TrimRight(tmp.Bytes(), "\n"))
	}
	return nil
}

// Decode reads one JSON value (and nothing after it): objects as *Object
// (a repeated key keeps its first place and its last value), arrays as
// []any, numbers as json.Number, nested at most maxDepth deep.
func Decode(data []byte, maxDepth int) (any, error) {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	v, err := decodeValue(dec, 0, maxDepth)
	if err != nil {
		return nil, err
	}
	if _, err := dec.Token(); !errors.Is(err, io.EOF) {
		return nil, errors.New("data after the JSON value")
	}
	return v, nil
}

func decodeValue(dec *json.Decoder, depth, maxDepth int) (any, error) {
	if depth > maxDepth {
		return nil, errors.New("nested too deep")
	}
	tok, err := dec.Token()
	if err != nil {
		return nil, err
	}
	d, ok := tok.(json.Delim)
	if !ok {
		return tok, nil
	}
	switch d {
	case '{':
		o := NewObject()
		for dec.More() {
			kt, err := dec.Token()
			if err != nil {
				return nil, err
			}
			k, ok := kt.(string)
			if !ok {
				return nil, errors.New("object key is not a string")
			}
			v, err := decodeValue(dec, depth+1, maxDepth)
			if err != nil {
				return nil, err
			}
			o.Set(k, v)
		}
		if _, err := dec.Token(); err != nil {
			return nil, err
		}
		return o, nil
	case '[':
		l := []any{}
		for dec.More() {
			v, err := decodeValue(dec, depth+1, maxDepth)
			if err != nil {
				return nil, err
			}
			l = append(l, v)
		}
		if _, err := dec.Token(); err != nil {
			return nil, err
		}
		return l, nil
	}
	return nil, fmt.Errorf("unexpected %v", strings.TrimSpace(d.String()))
}
