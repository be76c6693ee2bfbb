package chunk

import (
	"encoding/json"
	"testing"
)

const invoiceSchema = `{
  "type": "object",
  "properties": {
    "currency": {"type": "string"},
    "total": {"type": "number"},
    "parties": {"type": "object", "properties": {"seller": {"type": "string"}, "buyer": {"type": "string"}}},
    "tags": {"type": "array", "items": {"type": "string"}},
    "lines": {"$ref": "#/$defs/lines"}
  },
  "$defs": {
    "lines": {"type": "array", "x-merge-key": ["sku"], "items": {"$ref": "#/$defs/line"}},
    "line": {"type": "object", "properties": {"sku": {"type": "string"}, "qty": {"type": "integer"}, "price": {"type": "number"}}}
  }
}`

func TestMerge(t *testing.T) {
	m, err := NewMerger([]byte(invoiceSchema))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		name      string
		parts     []string
		want      string
		conflicts string
	}{
		{"objects merge property by property",
			[]string{`{"parties":{"seller":"ACME"}}`, `{"parties":{"buyer":"Bob"},"currency":"EUR"}`},
			`{"parties":{"seller":"ACME","buyer":"Bob"},"currency":"EUR"}`, `[]`},
		{"arrays concatenate in chunk order",
			[]string{`{"tags":["a","b"]}`, `{"tags":["c"]}`, `{"tags":["d"]}`},
			`{"tags":["a","b","c","d"]}`, `[]`},
		{"an element equal to one of another chunk is dropped",
			[]string{`{"tags":["a","b"]}`, `{"tags":["b","c"]}`},
			`{"tags":["a","b","c"]}`, `[]`},
		{"an element repeated inside one chunk is kept",
			[]string{`{"tags":["a","a"]}`, `{"tags":["a","b"]}`},
			`{"tags":["a","a","b"]}`, `[]`},
		{"equal as JSON values: member order and number spelling do not matter",
			[]string{`{"x":[{"a":1,"b":2.0}]}`, `{"x":[{"b":2,"a":1e0}]}`},
			`{"x":[{"a":1,"b":2.0}]}`, `[]`},
		{"x-merge-key: the later element fills in what the first lacked",
			[]string{`{"lines":[{"sku":"A","qty":2}]}`, `{"lines":[{"sku":"A","price":9.5},{"sku":"B","qty":1}]}`},
			`{"lines":[{"sku":"A","qty":2,"price":9.5},{"sku":"B","qty":1}]}`, `[]`},
		{"x-merge-key: a different value in a later chunk is a conflict",
			[]string{`{"lines":[{"sku":"A","qty":2}]}`, `{"lines":[{"sku":"A","qty":3}]}`},
			`{"lines":[{"sku":"A","qty":2}]}`, `[{"path":"/lines/0/qty","values":[{"chunk":1,"value":2},{"chunk":2,"value":3}]}]`},
		{"x-merge-key: an element without its key is compared whole",
			[]string{`{"lines":[{"qty":2}]}`, `{"lines":[{"qty":2},{"qty":3}]}`},
			`{"lines":[{"qty":2},{"qty":3}]}`, `[]`},
		{"scalars: the first non-null wins and later values are conflicts",
			[]string{`{"currency":null}`, `{"currency":"EUR"}`, `{"currency":"EUR"}`, `{"currency":"EUR"}`, `{"currency":"USD"}`},
			`{"currency":"EUR"}`, `[{"path":"/currency","values":[{"chunk":2,"value":"EUR"},{"chunk":5,"value":"USD"}]}]`},
		{"numbers: equal values in other spellings are equal",
			[]string{`{"x":[1.50,-0,100,2e1]}`, `{"x":[1.5,0,1e2,20.0,1.05]}`},
			`{"x":[1.50,-0,100,2e1,1.05]}`, `[]`},
		{"scalars: an equal number is no conflict",
			[]string{`{"total":10}`, `{"total":10.00}`},
			`{"total":10}`, `[]`},
		{"a null never overrides",
			[]string{`{"currency":"EUR","parties":{"seller":"A"}}`, `{"currency":null,"parties":null}`},
			`{"currency":"EUR","parties":{"seller":"A"}}`, `[]`},
		{"a value of another type is a conflict, the first kept",
			[]string{`{"total":10}`, `{"total":{"amount":10}}`},
			`{"total":10}`, `[{"path":"/total","values":[{"chunk":1,"value":10},{"chunk":2,"value":{"amount":10}}]}]`},
		{"paths escape ~ and /",
			[]string{`{"a/b":{"c~d":1}}`, `{"a/b":{"c~d":2}}`},
			`{"a/b":{"c~d":1}}`, `[{"path":"/a~1b/c~0d","values":[{"chunk":1,"value":1},{"chunk":2,"value":2}]}]`},
		{"one chunk is itself",
			[]string{`{"b":1,"a":[1,1]}`},
			`{"b":1,"a":[1,1]}`, `[]`},
	} {
		t.Run(c.name, func(t *testing.T) {
			var parts []Part
			for i, p := range c.parts {
				parts = append(parts, Part{Chunk: i + 1, Data: json.RawMessage(p)})
			}
			got, conflicts, err := m.Merge(parts)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != c.want {
				t.Errorf("merged\n got %s\nwant %s", got, c.want)
			}
			cj, _ := json.Marshal(conflicts)
			if string(cj) != c.conflicts {
				t.Errorf("conflicts\n got %s\nwant %s", cj, c.conflicts)
			}
		})
	}
}

func TestMergeBadChunkNamesIt(t *testing.T) {
	m, _ := NewMerger(nil)
	_, _, err := m.Merge([]Part{{Chunk: 1, Data: json.RawMessage(`{}`)}, {Chunk: 2, Data: json.RawMessage(`{`)}})
	if err == nil || err.Error()[:7] != "chunk 2" {
		t.Fatalf("err = %v, want one naming chunk 2", err)
	}
}

// FuzzMerge: any two JSON values merge into valid JSON, and a value merged
// with itself from another chunk is itself.
func FuzzMerge(f *testing.F) {
	f.Add(`{"a":[1,{"b":"x"}],"c":null}`, `{"a":[1,2],"c":"y"}`)
	f.Add(`[1,1.0,"\u0041"]`, `["A",1e0]`)
	m, _ := NewMerger([]byte(invoiceSchema))
	f.Fuzz(func(t *testing.T, a, b string) {
		if !json.Valid([]byte(a)) || !json.Valid([]byte(b)) {
			return
		}
		got, _, err := m.Merge([]Part{{Chunk: 1, Data: json.RawMessage(a)}, {Chunk: 2, Data: json.RawMessage(b)}})
		if err != nil {
			t.Fatalf("merging %s and %s: %v", a, b, err)
		}
		if !json.Valid(got) {
			t.Fatalf("merging %s and %s gave %s, not JSON", a, b, got)
		}
		self, _, err := m.Merge([]Part{{Chunk: 1, Data: json.RawMessage(a)}, {Chunk: 2, Data: json.RawMessage(a)}})
		if err != nil {
			t.Fatal(err)
		}
		var x, y any
		_ = json.Unmarshal(self, &x)
		_ = json.Unmarshal([]byte(a), &y)
		if xs, _ := json.Marshal(x); string(xs) != func() string { ys, _ := json.Marshal(y); return string(ys) }() {
			t.Fatalf("%s merged with itself gave %s", a, self)
		}
	})
}

// TestMergeNumberSpellings: one value spelled two ways is one value: an
// array element is dropped as a duplicate and a scalar is no conflict,
// whether or not the spellings have an exponent; different values still
// conflict.
func TestMergeNumberSpellings(t *testing.T) {
	m, err := NewMerger(nil)
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ a, b, want, conflicts string }{
		{`{"x":[0.5]}`, `{"x":[5e-1]}`, `{"x":[0.5]}`, `[]`},
		{`{"t":0.5}`, `{"t":5E-1}`, `{"t":0.5}`, `[]`},
		{`{"t":1.25}`, `{"t":125e-2}`, `{"t":1.25}`, `[]`},
		{`{"t":1.0}`, `{"t":1}`, `{"t":1.0}`, `[]`},
		{`{"t":-0.0}`, `{"t":0}`, `{"t":-0.0}`, `[]`},
		{`{"t":0.5}`, `{"t":0.25}`, `{"t":0.5}`, `[{"path":"/t","values":[{"chunk":1,"value":0.5},{"chunk":2,"value":0.25}]}]`},
	} {
		got, cf, err := m.Merge([]Part{{1, json.RawMessage(c.a)}, {2, json.RawMessage(c.b)}})
		if err != nil {
			t.Fatalf("%s + %s: %v", c.a, c.b, err)
		}
		cj, _ := json.Marshal(cf)
		if cf == nil {
			cj = []byte(`[]`)
		}
		if string(got) != c.want || string(cj) != c.conflicts {
			t.Errorf("%s + %s: %s conflicts %s; want %s conflicts %s", c.a, c.b, got, cj, c.want, c.conflicts)
		}
	}
}
