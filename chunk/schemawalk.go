package chunk

import (
	"net/url"
	"strconv"
	"strings"
)

// The schema walk the merge needs: the subschema of a property and of an
// array's items, and an array schema's "x-merge-key", through local $refs
// and allOf / anyOf / oneOf.

// maxRefs bounds the $refs followed for one look-up (a cycle ends there).
const maxRefs = 32

// property is the subschema of member k of an object described by sch.
// (The common case, a schema whose "properties" has k, needs no walk.)
func (m *Merger) property(sch any, k string) any {
	if o, ok := sch.(map[string]any); ok {
		if props, ok := o["properties"].(map[string]any); ok {
			if p, ok := props[k]; ok {
				return p
			}
		}
	}
	return m.find(sch, func(o map[string]any) any {
		if props, ok := o["properties"].(map[string]any); ok {
			if p, ok := props[k]; ok {
				return p
			}
		}
		if ap, ok := o["additionalProperties"].(map[string]any); ok {
			return ap
		}
		return nil
	})
}

// items is the subschema of the elements of an array described by sch.
func (m *Merger) items(sch any) any {
	return m.find(sch, func(o map[string]any) any {
		if it, ok := o["items"].(map[string]any); ok {
			return it
		}
		return nil
	})
}

// mergeKey is the "x-merge-key" of an array schema: the names of the
// properties that identify an element (nil when none).
func (m *Merger) mergeKey(sch any) []string {
	v := m.find(sch, func(o map[string]any) any {
		if l, ok := o["x-merge-key"].([]any); ok && len(l) > 0 {
			return l
		}
		if s, ok := o["x-merge-key"].(string); ok && s != "" {
			return []any{s}
		}
		return nil
	})
	l, _ := v.([]any)
	var keys []string
	for _, k := range l {
		if s, ok := k.(string); ok {
			keys = append(keys, s)
		}
	}
	return keys
}

// find applies get to sch, then to what its $ref points to, then to its
// allOf, anyOf and oneOf branches, and returns the first non-nil answer.
func (m *Merger) find(sch any, get func(map[string]any) any) any {
	return m.findDepth(sch, get, 0)
}

func (m *Merger) findDepth(sch any, get func(map[string]any) any, depth int) any {
	o, ok := sch.(map[string]any)
	if !ok || depth > maxRefs {
		return nil
	}
	if v := get(o); v != nil {
		return v
	}
	if ref, ok := o["$ref"].(string); ok {
		if v := m.findDepth(m.resolve(ref), get, depth+1); v != nil {
			return v
		}
	}
	for _, kw := range []string{"allOf", "anyOf", "oneOf"} {
		branches, _ := o[kw].([]any)
		for _, b := range branches {
			if v := m.findDepth(b, get, depth+1); v != nil {
				return v
			}
		}
	}
	return nil
}

// resolve follows a local reference ("#/$defs/item"); any other is nil.
func (m *Merger) resolve(ref string) any {
	if !strings.HasPrefix(ref, "#") {
		return nil
	}
	frag, err := url.PathUnescape(ref[1:])
	if err != nil {
		return nil
	}
	cur := m.root
	if frag == "" {
		return cur
	}
	for _, tok := range strings.Split(strings.TrimPrefix(frag, "/"), "/") {
		tok = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
		switch c := cur.(type) {
		case map[string]any:
			cur = c[tok]
		case []any:
			i, err := strconv.Atoi(tok)
			if err != nil || i < 0 || i >= len(c) {
				return nil
			}
			cur = c[i]
		default:
			return nil
		}
	}
	return cur
}
