package schemas

import (
	"fmt"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

func mustCompile(t testing.TB, id, raw string) *Schema {
	t.Helper()
	s, err := Compile(id, []byte(raw))
	if err != nil {
		t.Fatalf("Compile(%s): %v", id, err)
	}
	return s
}

func TestValidateDiagnostics(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		schema string
		doc    string
		want   []Diagnostic // Message is not compared (the validator's words)
	}{
		{
			name:   "valid document has no diagnostics",
			schema: `{"type":"object","properties":{"a":{"type":"integer"}}}`,
			doc:    `{"a":1}`,
		},
		{
			name:   "type error expects the bounds too",
			schema: `{"type":"object","properties":{"items":{"type":"array","items":{"type":"object","properties":{"price":{"type":"number","exclusiveMinimum":0}}}}}}`,
			doc:    `{"items":[{"price":1},{"price":2},{"price":"12,50"}]}`,
			want:   []Diagnostic{{Path: "/items/2/price", Keyword: "type", Expected: "number > 0", Received: `"12,50"`}},
		},
		{
			name:   "required points at the missing property",
			schema: `{"type":"object","required":["total","tax"],"properties":{"total":{"type":"number","minimum":0}}}`,
			doc:    `{}`,
			want: []Diagnostic{
				{Path: "/tax", Keyword: "required"},
				{Path: "/total", Keyword: "required", Expected: "number >= 0"},
			},
		},
		{
			name:   "additionalProperties points at each extra property",
			schema: `{"type":"object","additionalProperties":false,"properties":{"a":{},"b":{}}}`,
			doc:    `{"a":1,"zz":true,"c":[1]}`,
			want: []Diagnostic{
				{Path: "/c", Keyword: "additionalProperties", Expected: "allowed properties: a, b", Received: `[1]`},
				{Path: "/zz", Keyword: "additionalProperties", Expected: "allowed properties: a, b", Received: `true`},
			},
		},
		{
			name:   "enum lists every value in full",
			schema: `{"enum":["EUR","USD","GBP","CHF","JPY","CAD","AUD","SEK","NOK","DKK","PLN","CZK","a very long currency name that must not be elided"]}`,
			doc:    `"EURO"`,
			want: []Diagnostic{{Path: "", Keyword: "enum", Received: `"EURO"`,
				Expected: `one of "EUR", "USD", "GBP", "CHF", "JPY", "CAD", "AUD", "SEK", "NOK", "DKK", "PLN", "CZK", "a very long currency name that must not be elided"`}},
		},
		{
			name:   "const",
			schema: `{"properties":{"v":{"const":2}}}`,
			doc:    `{"v":3}`,
			want:   []Diagnostic{{Path: "/v", Keyword: "const", Expected: "exactly 2", Received: "3"}},
		},
		{
			name:   "minimum and maximum",
			schema: `{"type":"array","items":{"type":"integer","minimum":1,"maximum":99}}`,
			doc:    `[0,5,100]`,
			want: []Diagnostic{
				{Path: "/0", Keyword: "minimum", Expected: "integer >= 1 and <= 99", Received: "0"},
				{Path: "/2", Keyword: "maximum", Expected: "integer >= 1 and <= 99", Received: "100"},
			},
		},
		{
			name:   "pattern",
			schema: `{"properties":{"tracking_code":{"type":"string","pattern":"^1Z[0-9A-Z]{16}$"}}}`,
			doc:    `{"tracking_code":"1Z12"}`,
			want:   []Diagnostic{{Path: "/tracking_code", Keyword: "pattern", Expected: "string matching ^1Z[0-9A-Z]{16}$", Received: `"1Z12"`}},
		},
		{
			name:   "string length and array size",
			schema: `{"properties":{"s":{"type":"string","minLength":3},"a":{"type":"array","maxItems":2}}}`,
			doc:    `{"s":"ab","a":[1,2,3]}`,
			want: []Diagnostic{
				{Path: "/a", Keyword: "maxItems", Expected: "array of at most 2 items", Received: "[1,2,3]"},
				{Path: "/s", Keyword: "minLength", Expected: "string of at least 3 characters", Received: `"ab"`},
			},
		},
		{
			name:   "nullable anyOf gives one type diagnostic",
			schema: `{"properties":{"n":{"anyOf":[{"type":"string"},{"type":"null"}]}}}`,
			doc:    `{"n":5}`,
			want:   []Diagnostic{{Path: "/n", Keyword: "type", Expected: "string or null", Received: "5"}},
		},
		{
			name: "anyOf reports the best branch only",
			schema: `{"properties":{"p":{"anyOf":[
				{"type":"object","required":["kind","card"],"properties":{"kind":{"const":"card"},"card":{"type":"string"}}},
				{"type":"string"},
				{"type":"integer"}]}}}`,
			doc:  `{"p":{"kind":"card"}}`,
			want: []Diagnostic{{Path: "/p/card", Keyword: "required", Expected: "string"}},
		},
		{
			name:   "oneOf with no matching branch type names every alternative",
			schema: `{"oneOf":[{"type":"string","format":"date"},{"type":"integer","minimum":0}]}`,
			doc:    `true`,
			want:   []Diagnostic{{Path: "", Keyword: "oneOf", Expected: "string in format date (YYYY-MM-DD), or integer >= 0", Received: "true"}},
		},
		{
			name:   "ref is followed for expected",
			schema: `{"$defs":{"money":{"type":"number","minimum":0}},"properties":{"total":{"$ref":"#/$defs/money"}},"required":["tax"],"properties2":{}}`,
			doc:    `{"total":-1}`,
			want: []Diagnostic{
				{Path: "/tax", Keyword: "required"},
				{Path: "/total", Keyword: "minimum", Expected: "number >= 0", Received: "-1"},
			},
		},
		{
			name:   "pointer escaping and gjson special characters in keys",
			schema: `{"properties":{"a/b":{"type":"integer"},"c~d":{"type":"integer"},"e.f":{"type":"integer"},"g*":{"type":"integer"}}}`,
			doc:    `{"a/b":"x","c~d":"y","e.f":"z","g*":"w"}`,
			want: []Diagnostic{
				{Path: "/a~1b", Keyword: "type", Expected: "integer", Received: `"x"`},
				{Path: "/c~0d", Keyword: "type", Expected: "integer", Received: `"y"`},
				{Path: "/e.f", Keyword: "type", Expected: "integer", Received: `"z"`},
				{Path: "/g*", Keyword: "type", Expected: "integer", Received: `"w"`},
			},
		},
		{
			name:   "sorted by path with numeric indices",
			schema: `{"type":"array","items":{"type":"integer"}}`,
			doc:    `[0,"a",2,3,4,5,6,7,8,9,"b",11]`,
			want: []Diagnostic{
				{Path: "/1", Keyword: "type", Expected: "integer", Received: `"a"`},
				{Path: "/10", Keyword: "type", Expected: "integer", Received: `"b"`},
			},
		},
		{
			name:   "false property schema",
			schema: `{"properties":{"secret":false}}`,
			doc:    `{"secret":1}`,
			want:   []Diagnostic{{Path: "/secret", Keyword: "false", Expected: "no value here", Received: "1"}},
		},
		{
			name:   "root type",
			schema: `{"type":"object"}`,
			doc:    ` [1, 2] `,
			want:   []Diagnostic{{Path: "", Keyword: "type", Expected: "object", Received: "[1, 2]"}},
		},
		{
			name:   "dependentRequired points at the missing property",
			schema: `{"dependentRequired":{"card":["cvv"]}}`,
			doc:    `{"card":"4111"}`,
			want:   []Diagnostic{{Path: "/cvv", Keyword: "dependentRequired"}},
		},
		{
			name:   "uniqueItems",
			schema: `{"properties":{"tags":{"type":"array","uniqueItems":true}}}`,
			doc:    `{"tags":["a","a"]}`,
			want:   []Diagnostic{{Path: "/tags", Keyword: "uniqueItems", Expected: "array with unique items", Received: `["a","a"]`}},
		},
		{
			name:   "contains is one diagnostic, not one per item",
			schema: `{"type":"array","contains":{"const":"x"}}`,
			doc:    `["a","b","c"]`,
			want:   []Diagnostic{{Path: "", Keyword: "contains", Expected: "array", Received: `["a","b","c"]`}},
		},
		{
			name:   "oneOf matching two branches",
			schema: `{"oneOf":[{"type":"integer"},{"minimum":0}]}`,
			doc:    `5`,
			want:   []Diagnostic{{Path: "", Keyword: "oneOf", Expected: "a value matching exactly one alternative", Received: "5"}},
		},
		{
			name:   "not",
			schema: `{"properties":{"n":{"not":{"type":"null"}}}}`,
			doc:    `{"n":null}`,
			want:   []Diagnostic{{Path: "/n", Keyword: "not", Expected: "a value that does not match the 'not' schema", Received: "null"}},
		},
		{
			name:   "allOf errors are reported as their root causes",
			schema: `{"allOf":[{"required":["a"]},{"properties":{"b":{"type":"string"}}}]}`,
			doc:    `{"b":1}`,
			want: []Diagnostic{
				{Path: "/a", Keyword: "required"},
				{Path: "/b", Keyword: "type", Expected: "string", Received: "1"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			s := mustCompile(t, "t", tt.schema)
			got, omitted, err := s.Validate([]byte(tt.doc), 0)
			if err != nil {
				t.Fatalf("Validate: %v", err)
			}
			if omitted != 0 {
				t.Errorf("omitted = %d, want 0", omitted)
			}
			if len(got) != len(tt.want) {
				t.Fatalf("got %d diagnostics, want %d:\n%s", len(got), len(tt.want), Lines(got, omitted))
			}
			for i := range got {
				if got[i].Message == "" {
					t.Errorf("diagnostic %d has no message: %+v", i, got[i])
				}
				g := got[i]
				g.Message = ""
				if g != tt.want[i] {
					t.Errorf("diagnostic %d:\n got %+v\nwant %+v", i, g, tt.want[i])
				}
			}
		})
	}
}

func TestValidateFormats(t *testing.T) {
	t.Parallel()
	tests := []struct {
		format string
		good   string
		bad    string
	}{
		{"date", "2024-02-29", "2024-02-30"},
		{"date-time", "2024-01-31T09:30:00Z", "31/01/2024 09:30"},
		{"email", "ada@example.com", "ada at example.com"},
		{"uuid", "123e4567-e89b-12d3-a456-426614174000", "123e4567-e89b-12d3-a456"},
		{"uri", "https://example.com/x", "not a uri"},
		{"ipv4", "192.0.2.1", "192.0.2.999"},
	}
	for _, tt := range tests {
		t.Run(tt.format, func(t *testing.T) {
			t.Parallel()
			s := mustCompile(t, "f", fmt.Sprintf(`{"type":"string","format":%q}`, tt.format))
			if ds, _, err := s.Validate([]byte(fmt.Sprintf("%q", tt.good)), 0); err != nil || len(ds) != 0 {
				t.Errorf("%q: got %v, %v; want valid", tt.good, ds, err)
			}
			ds, _, err := s.Validate([]byte(fmt.Sprintf("%q", tt.bad)), 0)
			if err != nil || len(ds) != 1 {
				t.Fatalf("%q: got %v, %v; want one diagnostic", tt.bad, ds, err)
			}
			if ds[0].Keyword != "format" || !strings.Contains(ds[0].Expected, tt.format) {
				t.Errorf("%q: got %+v, want a format diagnostic naming %s", tt.bad, ds[0], tt.format)
			}
		})
	}
}

func TestValidateCapAndReceivedCut(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, "cap", `{"type":"array","items":{"type":"integer"}}`)
	var items []string
	for i := range 30 {
		items = append(items, fmt.Sprintf(`"v%d"`, i))
	}
	doc := []byte("[" + strings.Join(items, ",") + "]")
	for _, tt := range []struct {
		max, wantN, wantOmitted int
	}{{0, 20, 10}, {-1, 20, 10}, {5, 5, 25}, {30, 30, 0}, {100, 30, 0}} {
		t.Run(fmt.Sprintf("max=%d", tt.max), func(t *testing.T) {
			ds, omitted, err := s.Validate(doc, tt.max)
			if err != nil {
				t.Fatal(err)
			}
			if len(ds) != tt.wantN || omitted != tt.wantOmitted {
				t.Errorf("got %d + %d omitted, want %d + %d", len(ds), omitted, tt.wantN, tt.wantOmitted)
			}
			if ds[0].Path != "/0" || ds[len(ds)-1].Path != fmt.Sprintf("/%d", tt.wantN-1) {
				t.Errorf("not the first paths in order: %s .. %s", ds[0].Path, ds[len(ds)-1].Path)
			}
		})
	}

	long := strings.Repeat("é", 500)
	s2 := mustCompile(t, "long", `{"properties":{"s":{"type":"string","maxLength":10}}}`)
	ds, _, err := s2.Validate([]byte(`{"s":"`+long+`"}`), 0)
	if err != nil || len(ds) != 1 {
		t.Fatalf("got %v, %v", ds, err)
	}
	if n := utf8.RuneCountInString(ds[0].Received); n != maxReceived {
		t.Errorf("received has %d characters, want %d", n, maxReceived)
	}
	if !utf8.ValidString(ds[0].Received) || !strings.HasPrefix(ds[0].Received, `"éé`) {
		t.Errorf("received cut badly: %q", ds[0].Received[:20])
	}
}

func TestValidateNotJSON(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, "x", `{"type":"object"}`)
	for _, doc := range []string{``, `{`, `{"a":1} {"b":2}`, `nope`, `{"a":1,}`} {
		t.Run(doc, func(t *testing.T) {
			if _, _, err := s.Validate([]byte(doc), 0); err == nil {
				t.Errorf("Validate(%q): want an error", doc)
			}
		})
	}
}

func TestDiagnosticLine(t *testing.T) {
	t.Parallel()
	tests := []struct {
		d    Diagnostic
		want string
	}{
		{Diagnostic{Path: "/items/2/price", Keyword: "type", Expected: "number > 0", Received: `"12,50"`},
			`- /items/2/price: expected number > 0, got "12,50"`},
		{Diagnostic{Path: "/total", Keyword: "required", Expected: "number >= 0"},
			`- /total: missing required property, expected number >= 0`},
		{Diagnostic{Path: "/tax", Keyword: "required"}, `- /tax: missing required property`},
		{Diagnostic{Path: "/x", Keyword: "additionalProperties", Expected: "allowed properties: a, b", Received: "1"},
			`- /x: property not allowed, remove it (allowed properties: a, b)`},
		{Diagnostic{Path: "", Keyword: "type", Expected: "object", Received: "[]"}, `- (root): expected object, got []`},
		{Diagnostic{Path: "/a", Keyword: "uniqueItems", Message: "items at 0 and 1 are equal", Received: "[1,1]"},
			`- /a: items at 0 and 1 are equal, got [1,1]`},
	}
	for _, tt := range tests {
		t.Run(tt.want, func(t *testing.T) {
			t.Parallel()
			if got := tt.d.Line(); got != tt.want {
				t.Errorf("Line() = %q, want %q", got, tt.want)
			}
		})
	}
	ds := []Diagnostic{tests[0].d, tests[1].d}
	got := Lines(ds, 3)
	want := tests[0].want + "\n" + tests[1].want + "\n- ... and 3 more"
	if got != want {
		t.Errorf("Lines = %q, want %q", got, want)
	}
	if got := Lines(nil, 0); got != "" {
		t.Errorf("Lines(nil) = %q", got)
	}
}

func TestComparePointers(t *testing.T) {
	t.Parallel()
	tests := []struct {
		a, b string
		want int
	}{
		{"/items/2", "/items/10", -1},
		{"/items/10", "/items/2", 1},
		{"", "/a", -1},
		{"/a", "/a/b", -1},
		{"/a/b", "/a", 1},
		{"/b", "/a/z", 1},
		{"/2", "/a", -1},
		{"/x", "/x", 0},
		{"/000", "/0", 1}, // the same number, different names: a total order
		{"/0", "/000", -1},
	}
	for _, tt := range tests {
		t.Run(tt.a+" vs "+tt.b, func(t *testing.T) {
			t.Parallel()
			if got := comparePointers(tt.a, tt.b); got != tt.want {
				t.Errorf("comparePointers(%q, %q) = %d, want %d", tt.a, tt.b, got, tt.want)
			}
		})
	}
}

// TestValidateConcurrent shares one compiled schema between goroutines;
// run with -race.
func TestValidateConcurrent(t *testing.T) {
	t.Parallel()
	r, err := Builtin()
	if err != nil {
		t.Fatal(err)
	}
	s, _ := r.Get("invoice")
	docs := [][]byte{invoiceValid, invoiceInvalid}
	want := make([]int, len(docs))
	for i, d := range docs {
		ds, _, err := s.Validate(d, 0)
		if err != nil {
			t.Fatal(err)
		}
		want[i] = len(ds)
	}
	if want[0] != 0 || want[1] == 0 {
		t.Fatalf("fixtures: valid has %d diagnostics, invalid %d", want[0], want[1])
	}
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				k := (g + i) % len(docs)
				ds, _, err := s.Validate(docs[k], 0)
				if err != nil || len(ds) != want[k] {
					errs <- fmt.Errorf("goroutine %d: doc %d: %d diagnostics, %v", g, k, len(ds), err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func TestValidateHugeExponent(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, "n", `{"type":"object","properties":{"a":{"type":"array","items":{"type":"number","minimum":0}}}}`)
	tests := []struct {
		doc      string
		wantPath string // "" with wantN 0 means valid
		wantN    int
	}{
		{`{"a":[1e300,2E-300,1e+400]}`, "", 0},
		{`{"a":[1,1e999999999]}`, "/a/1", 1},
		{`{"a":[1e-99999999999999999999]}`, "/a/0", 1},
	}
	for _, tt := range tests {
		t.Run(tt.doc, func(t *testing.T) {
			t.Parallel()
			ds, _, err := s.Validate([]byte(tt.doc), 0)
			if err != nil {
				t.Fatal(err)
			}
			if len(ds) != tt.wantN || (tt.wantN > 0 && (ds[0].Path != tt.wantPath || ds[0].Received == "")) {
				t.Errorf("got %+v, want %d diagnostic(s) at %q", ds, tt.wantN, tt.wantPath)
			}
		})
	}
}
