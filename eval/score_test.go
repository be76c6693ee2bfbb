package eval

import (
	"maps"
	"testing"
)

func mustDecode(t *testing.T, s string) any {
	t.Helper()
	if s == "" {
		return nil
	}
	v, err := decode([]byte(s))
	if err != nil {
		t.Fatalf("decoding %s: %v", s, err)
	}
	return v
}

// c is Counts in the order correct, wrong, missing, extra.
func c(correct, wrong, missing, extra int) Counts {
	return Counts{Correct: correct, Wrong: wrong, Missing: missing, Extra: extra}
}

// TestRules holds each rule of the definition on hand-made pairs.
func TestRules(t *testing.T) {
	cases := []struct {
		name               string
		expected, produced string // "" is no result
		fields             map[string]Counts
	}{
		{"equal strings", `{"name":"Ada"}`, `{"name":"Ada"}`, map[string]Counts{"/name": c(1, 0, 0, 0)}},
		{"strings trimmed, case-folded, spaces collapsed", `{"name":"  Ada   LOVELACE "}`, `{"name":"ada lovelace"}`,
			map[string]Counts{"/name": c(1, 0, 0, 0)}},
		{"tabs and newlines are white space", `{"name":"a\t\n b"}`, `{"name":"A B"}`, map[string]Counts{"/name": c(1, 0, 0, 0)}},
		{"NFKC: full-width and ligature", `{"name":"ＡＤＡ ﬁle"}`, `{"name":"ada file"}`, map[string]Counts{"/name": c(1, 0, 0, 0)}},
		{"NFKC: composed and decomposed", `{"city":"Zürich"}`, `{"city":"zu\u0308rich"}`, map[string]Counts{"/city": c(1, 0, 0, 0)}},
		{"case folding beyond ASCII: ß and ẞ, Σ and ς", `{"a":"STRAẞE","b":"ΟΔΟΣ"}`, `{"a":"straße","b":"οδος"}`,
			map[string]Counts{"/a": c(1, 0, 0, 0), "/b": c(1, 0, 0, 0)}},
		{"ideographic space is white space", `{"name":"a\u3000\u3000b"}`, `{"name":"a b"}`, map[string]Counts{"/name": c(1, 0, 0, 0)}},
		{"different strings are wrong", `{"name":"Ada"}`, `{"name":"Bob"}`, map[string]Counts{"/name": c(0, 1, 0, 0)}},
		{"30 equals 30.0 and 3e1", `{"a":30,"b":30,"c":0.1}`, `{"a":30.0,"b":3e1,"c":1e-1}`,
			map[string]Counts{"/a": c(1, 0, 0, 0), "/b": c(1, 0, 0, 0), "/c": c(1, 0, 0, 0)}},
		{"large integers exactly", `{"a":12345678901234567890}`, `{"a":12345678901234567891}`, map[string]Counts{"/a": c(0, 1, 0, 0)}},
		{"a number is not its string", `{"a":30}`, `{"a":"30"}`, map[string]Counts{"/a": c(0, 1, 0, 0)}},
		{"booleans as they are", `{"a":true,"b":false}`, `{"a":true,"b":true}`, map[string]Counts{"/a": c(1, 0, 0, 0), "/b": c(0, 1, 0, 0)}},
		{"a boolean is not a string", `{"a":true}`, `{"a":"true"}`, map[string]Counts{"/a": c(0, 1, 0, 0)}},
		{"absent is missing", `{"a":1}`, `{}`, map[string]Counts{"/a": c(0, 0, 1, 0)}},
		{"null produced is missing", `{"a":1}`, `{"a":null}`, map[string]Counts{"/a": c(0, 0, 1, 0)}},
		{"extra when expected absent", `{}`, `{"a":1}`, map[string]Counts{"/a": c(0, 0, 0, 1)}},
		{"extra when expected null", `{"a":null}`, `{"a":1}`, map[string]Counts{"/a": c(0, 0, 0, 1)}},
		{"null against absent counts nothing", `{"a":null}`, `{}`, map[string]Counts{}},
		{"absent against null counts nothing", `{}`, `{"a":null}`, map[string]Counts{}},
		{"nested objects key by key", `{"buyer":{"name":"A","vat":"X1"}}`, `{"buyer":{"name":"a","vat":"X2","city":"Oslo"}}`,
			map[string]Counts{"/buyer/name": c(1, 0, 0, 0), "/buyer/vat": c(0, 1, 0, 0), "/buyer/city": c(0, 0, 0, 1)}},
		{"multiset of scalars: order does not matter", `{"tags":["a","b","c"]}`, `{"tags":["C","a","b"]}`,
			map[string]Counts{"/tags/*": c(3, 0, 0, 0)}},
		{"multiset with repeats", `{"tags":["a","a","b"]}`, `{"tags":["a","b","b","c"]}`,
			map[string]Counts{"/tags/*": c(2, 0, 1, 2)}},
		{"multiset of numbers by value", `{"n":[1,2,2]}`, `{"n":[2.0,1.0,3]}`, map[string]Counts{"/n/*": c(2, 0, 1, 1)}},
		{"multiset: nulls are absent", `{"tags":["a",null]}`, `{"tags":[null,"a",null]}`, map[string]Counts{"/tags/*": c(1, 0, 0, 0)}},
		{"multiset against absent", `{"tags":["a","b"]}`, `{}`, map[string]Counts{"/tags/*": c(0, 0, 2, 0)}},
		{"multiset produced, not expected", `{}`, `{"tags":["a"]}`, map[string]Counts{"/tags/*": c(0, 0, 0, 1)}},
		{"array of objects by position", `{"items":[{"sku":"A","qty":1},{"sku":"B","qty":2}]}`,
			`{"items":[{"sku":"B","qty":2},{"sku":"A","qty":1},{"sku":"C"}]}`,
			map[string]Counts{"/items/*/sku": c(0, 2, 0, 1), "/items/*/qty": c(0, 2, 0, 0)}},
		{"array of objects shorter", `{"items":[{"sku":"A"},{"sku":"B"}]}`, `{"items":[{"sku":"a"}]}`,
			map[string]Counts{"/items/*/sku": c(1, 0, 1, 0)}},
		{"nested arrays: outer by position, inner multisets", `{"m":[["a","b"],["c"]]}`, `{"m":[["b","a"],["d"],["e"]]}`,
			map[string]Counts{"/m/*/*": c(2, 0, 1, 2)}},
		{"arrays in objects in arrays", `{"items":[{"tags":["x","y"]}]}`, `{"items":[{"tags":["y"]}]}`,
			map[string]Counts{"/items/*/tags/*": c(1, 0, 1, 0)}},
		{"scalar where an object is expected: every value below is wrong", `{"buyer":{"name":"A","vat":"X"}}`, `{"buyer":"A"}`,
			map[string]Counts{"/buyer/name": c(0, 1, 0, 0), "/buyer/vat": c(0, 1, 0, 0)}},
		{"object where a scalar is expected is wrong", `{"buyer":"A"}`, `{"buyer":{"name":"A"}}`, map[string]Counts{"/buyer": c(0, 1, 0, 0)}},
		{"no result: every expected value is missing", `{"name":"A","tags":["a","b"],"items":[{"q":1}]}`, "",
			map[string]Counts{"/name": c(0, 0, 1, 0), "/tags/*": c(0, 0, 2, 0), "/items/*/q": c(0, 0, 1, 0)}},
		{"escaped names are their text", `{"a\u0062":"x","c":"\u00e9"}`, `{"ab":"x","\u0063":"é"}`, map[string]Counts{"/ab": c(1, 0, 0, 0), "/c": c(1, 0, 0, 0)}},
		{"a duplicate name: the later value", `{"a":1}`, `{"a":2,"a":1}`, map[string]Counts{"/a": c(1, 0, 0, 0)}},
		{"key with a slash is escaped", `{"a/b":1,"c~d":2}`, `{"a/b":1,"c~d":2}`, map[string]Counts{"/a~1b": c(1, 0, 0, 0), "/c~0d": c(1, 0, 0, 0)}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, keep := range []bool{false, true} { // both walks count the same
				cmp := newComparer()
				cmp.keep = keep
				fields := map[string]*Counts{}
				cmp.record(fields, mustDecode(t, tc.expected), mustDecode(t, tc.produced))
				got := map[string]Counts{}
				for p, c := range fields {
					got[p] = *c
				}
				if !maps.Equal(got, tc.fields) {
					t.Errorf("keep=%v: got %v, want %v", keep, got, tc.fields)
				}
			}
		})
	}
}

func TestFigures(t *testing.T) {
	cases := []struct {
		c        Counts
		p, r, f1 float64
	}{
		{c(0, 0, 0, 0), 0, 0, 0},
		{c(3, 0, 0, 0), 1, 1, 1},
		{c(0, 0, 2, 0), 0, 0, 0},
		{c(2, 1, 1, 0), 2.0 / 3, 2.0 / 4, 2 * (2.0 / 3) * 0.5 / (2.0/3 + 0.5)},
		{c(1, 0, 0, 3), 0.25, 1, 0.4},
	}
	for _, tc := range cases {
		s := Of(tc.c)
		if !near(s.Precision, tc.p) || !near(s.Recall, tc.r) || !near(s.F1, tc.f1) {
			t.Errorf("%+v: got p=%v r=%v f1=%v, want %v %v %v", tc.c, s.Precision, s.Recall, s.F1, tc.p, tc.r, tc.f1)
		}
	}
}

// TestF1AtTheThreshold: 6 correct, 1 missing, 2 extra has f1 12/15, which
// must be exactly 0.8 (the table prints 0.80), so that --min-f1 0.8 passes;
// 2PR/(P+R) gave 0.79999999999999993.
func TestF1AtTheThreshold(t *testing.T) {
	for _, tc := range []struct {
		c  Counts
		f1 float64
	}{{c(6, 0, 1, 2), 0.8}, {c(3, 1, 0, 0), 0.75}, {c(7, 0, 3, 0), 14.0 / 17}} {
		if s := Of(tc.c); s.F1 != tc.f1 || s.F1 < tc.f1 {
			t.Errorf("%+v: f1 %.17g, want exactly %.17g", tc.c, s.F1, tc.f1)
		}
	}
}

func near(a, b float64) bool { return a-b < 1e-12 && b-a < 1e-12 }

func TestMismatchesListed(t *testing.T) {
	cmp := newComparer()
	cmp.keep = true
	cmp.record(map[string]*Counts{}, mustDecode(t, `{"items":[{"sku":"A"},{"sku":"B"}],"tags":["x","y"],"name":"N"}`),
		mustDecode(t, `{"items":[{"sku":"A"},{"sku":"Q"}],"tags":["y"],"name":"N","extra":1}`))
	want := []Mismatch{
		{Kind: Wrong, Path: "/items/1/sku", Expected: "B", Produced: "Q"},
		{Kind: Missing, Path: "/tags/*", Expected: "x"},
	}
	if len(cmp.mism) != len(want) {
		t.Fatalf("got %+v, want %+v", cmp.mism, want)
	}
	for i := range want {
		if cmp.mism[i] != want[i] {
			t.Errorf("mismatch %d: got %+v, want %+v", i, cmp.mism[i], want[i])
		}
	}
}

func TestNumberKeys(t *testing.T) {
	cmp := newComparer()
	for _, pair := range [][2]string{{"30", "30.0"}, {"-0", "0"}, {"1e2", "100"}, {"-5", "-5.00"}} {
		if a, b := cmp.key(mustDecode(t, pair[0])), cmp.key(mustDecode(t, pair[1])); a != b {
			t.Errorf("key(%s) = %q, key(%s) = %q: want one key", pair[0], a, pair[1], b)
		}
	}
	if a, b := cmp.key(mustDecode(t, "12")), cmp.key(mustDecode(t, "-12")); a == b {
		t.Errorf("12 and -12 share key %q", a)
	}
}

// FuzzParseLabel: any line is either refused with its line number or read
// as a label whose id is a non-empty string and whose expected value
// decodes to an object; never a panic.
func FuzzParseLabel(f *testing.F) {
	for _, s := range []string{`{"id":"a","expected":{"x":1}}`, `{"id":"a","expected":[]}`, `{"id":7}`, `[1]`, `{"id":"a","id":"b","expected":{}}`,
		`{"id":"\u00e9","expected":{"t":["a",null,1.5e3]},"note":"x"}`, `{"expected":{},"id":""}`, `{`, ``} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		l, err := parseLabel("f.jsonl", 3, []byte(line))
		if err != nil {
			if le, ok := err.(*LineError); !ok || le.Line != 3 {
				t.Fatalf("error %v is not a LineError at line 3", err)
			}
			return
		}
		if l.id == "" {
			t.Fatalf("%q: empty id accepted", line)
		}
		v, err := decode(l.expected)
		if _, ok := v.(object); err != nil || !ok {
			t.Fatalf("%q: expected %s does not decode to an object: %v", line, l.expected, err)
		}
	})
}
