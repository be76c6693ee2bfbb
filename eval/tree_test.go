package eval

import (
	"bytes"
	"encoding/json"
	"testing"
	"unicode/utf8"
)

// sameTree says whether ours (object, []any, ...) holds what encoding/json
// read into theirs (map[string]any, []any, ..., json.Number).
func sameTree(ours, theirs any) bool {
	switch t := theirs.(type) {
	case map[string]any:
		o, ok := ours.(object)
		if !ok || len(o) != len(t) {
			return false
		}
		for _, m := range o {
			if v, ok := t[m.key]; !ok || !sameTree(m.val, v) {
				return false
			}
		}
		return true
	case []any:
		a, ok := ours.([]any)
		if !ok || len(a) != len(t) {
			return false
		}
		for i := range a {
			if !sameTree(a[i], t[i]) {
				return false
			}
		}
		return true
	}
	return ours == theirs
}

// FuzzDecode: every valid UTF-8 JSON text decodes to the tree encoding/json
// reads from it (a later duplicate name winning in both).
func FuzzDecode(f *testing.F) {
	for _, s := range []string{`{"a":1,"b":[1,"x",null,true,{"c":1.5e3}]}`, `{"a":1,"a":2}`, `"\u00e9\n"`, `[]`, `{}`, `-0.0`,
		`{"k\u002f":"v","":""}`, ` [ 1 , 2 ] `, `12345678901234567890`, `{"a":{"a":{"a":[[[]]]}}}`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if !json.Valid(b) || !utf8.Valid(b) {
			return
		}
		d := json.NewDecoder(bytes.NewReader(b))
		d.UseNumber()
		var theirs any
		if err := d.Decode(&theirs); err != nil {
			return
		}
		ours, err := decode(b)
		if err != nil {
			t.Fatalf("%q: %v", b, err)
		}
		if !sameTree(ours, theirs) {
			t.Fatalf("%q: got %#v, encoding/json %#v", b, ours, theirs)
		}
	})
}
