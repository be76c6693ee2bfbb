package schemas

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf8"
)

// FuzzValidate feeds arbitrary documents to the built-in schemas and a
// schema with every composition keyword: no panic, and the diagnostics keep
// their promises (sorted, unique, capped, received cut).
func FuzzValidate(f *testing.F) {
	for _, seed := range []string{
		string(invoiceValid), string(invoiceInvalid), `{}`, `[]`, `null`, `"x"`, `1e400`, `{"a/b":{"~":[1,{"":2}]}}`,
		`{"vendor":{"name":""},"line_items":[{"unit_price":"1,5"}],"currency":"€"}`,
		`{"p":{"kind":"card"},"n":5,"t":[1,1]}`, `{"tracking_code":"1Z` + strings.Repeat("A", 300) + `"}`,
	} {
		f.Add([]byte(seed), 3)
	}
	r, err := Builtin()
	if err != nil {
		f.Fatal(err)
	}
	schemasUnderTest := []*Schema{mustCompile(f, "combo", `{
		"type":"object",
		"properties":{
			"p":{"oneOf":[{"type":"object","required":["kind"],"properties":{"kind":{"const":"card"}}},{"type":"string"}]},
			"n":{"anyOf":[{"type":"string"},{"type":"null"}]},
			"t":{"type":"array","uniqueItems":true,"items":{"not":{"type":"boolean"}}},
			"d":{"if":{"type":"string"},"then":{"format":"date"},"else":{"type":"integer"}}
		},
		"patternProperties":{"^x":{"type":"integer"}},
		"dependentRequired":{"a":["b"]},
		"additionalProperties":{"type":["string","number"]}}`)}
	for _, id := range r.IDs() {
		s, _ := r.Get(id)
		schemasUnderTest = append(schemasUnderTest, s)
	}
	f.Fuzz(func(t *testing.T, doc []byte, max int) {
		max %= 40
		for _, s := range schemasUnderTest {
			ds, omitted, err := s.Validate(doc, max)
			if err != nil {
				if json.Valid(doc) && utf8.Valid(doc) {
					t.Fatalf("%s: valid JSON refused: %v", s.ID, err)
				}
				continue
			}
			limit := max
			if limit <= 0 {
				limit = DefaultMaxDiagnostics
			}
			if len(ds) > limit || omitted < 0 || (omitted > 0 && len(ds) != limit) {
				t.Fatalf("%s: %d diagnostics, %d omitted, cap %d", s.ID, len(ds), omitted, limit)
			}
			for i, d := range ds {
				if d.Keyword == "" || d.Message == "" {
					t.Fatalf("%s: incomplete diagnostic %+v", s.ID, d)
				}
				if utf8.RuneCountInString(d.Received) > maxReceived {
					t.Fatalf("%s: received not cut: %d characters", s.ID, utf8.RuneCountInString(d.Received))
				}
				if d.Path != "" && d.Path[0] != '/' {
					t.Fatalf("%s: path %q is not a JSON Pointer", s.ID, d.Path)
				}
				if i > 0 && (comparePointers(ds[i-1].Path, d.Path) > 0 || ds[i-1] == d) {
					t.Fatalf("%s: not sorted or duplicated at %d: %v", s.ID, i, ds)
				}
				_ = d.Line()
			}
		}
	})
}
