package schemas

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
)

// truthSchema grounds the vendor and every string of the line items, and
// holds the invoice to two rules.
const truthSchema = `{
	"type": "object",
	"required": ["vendor", "subtotal", "tax", "total"],
	"properties": {
		"vendor": {"type": "string", "x-grounded": true},
		"note": {"type": ["string", "null"], "x-grounded": true},
		"subtotal": {"type": "number"},
		"tax": {"type": "number"},
		"total": {"type": "number"},
		"items": {"type": "array", "x-grounded": true, "items": {
			"type": "object",
			"properties": {"name": {"type": "string"}, "sku": {"type": "string"}},
			"x-rules": [{"rule": "self.name != self.sku", "message": "name and sku differ"}]
		}}
	},
	"x-rules": [
		{"rule": "self.total == self.subtotal + self.tax", "message": "total must be subtotal + tax", "path": "/total"},
		{"rule": "self.discount >= 0.0"},
		{"rule": "math.abs(self.total - self.subtotal - self.tax) < 1000.0 && size(self.vendor) > 0"}
	]
}`

// slice is Python's input[start:end]: code points.
func slice(s string, start, end int) string {
	r := []rune(s)
	if start < 0 || end > len(r) || start > end {
		return "<out of range>"
	}
	return string(r[start:end])
}

// TestGroundingOffsets: offsets are code points, so they slice the value
// out of text with accents, CJK and emoji, exactly or normalised.
func TestGroundingOffsets(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, "inv", `{"type":"object","properties":{"a":{"type":"string","x-grounded":true},"b":{"type":"string","x-grounded":true}},"additionalProperties":{"x-grounded":true}}`)
	tests := []struct {
		name  string
		input string
		doc   string
		want  map[string]string // path -> slice of the input
		match map[string]string
	}{
		{
			name:  "accents",
			input: "Facture émise par Société Générale, Zürich.",
			doc:   `{"a":"Société Générale","b":"Zürich"}`,
			want:  map[string]string{"/a": "Société Générale", "/b": "Zürich"},
			match: map[string]string{"/a": MatchExact, "/b": MatchExact},
		},
		{
			name:  "CJK and emoji",
			input: "🧾 請求書 🚀 発行者: 株式会社テスト 👍 合計",
			doc:   `{"a":"株式会社テスト","b":"合計"}`,
			want:  map[string]string{"/a": "株式会社テスト", "/b": "合計"},
			match: map[string]string{"/a": MatchExact, "/b": MatchExact},
		},
		{
			name: "normalized: case, white space, NFKC, decomposed accents",
			// The input writes "Café" decomposed (e + U+0301), full-width
			// digits, and breaks the name over two lines.
			input: "😀 Bill to: ACME   Corp\n  Ltd, Cafe\u0301 ＡＢＣ１２３ 🎉 HAUPTSTRASSE 5",
			doc:   `{"a":"acme corp ltd","b":"café abc123","c":"Hauptstraße"}`,
			want:  map[string]string{"/a": "ACME   Corp\n  Ltd", "/b": "Cafe\u0301 ＡＢＣ１２３", "/c": "HAUPTSTRASSE"},
			match: map[string]string{"/a": MatchNormalized, "/b": MatchNormalized, "/c": MatchNormalized},
		},
		{
			name:  "the next occurrence after the previous value of the object",
			input: "Widget 🙂 Widget",
			doc:   `{"a":"Widget","b":"Widget"}`,
			want:  map[string]string{"/a": "Widget", "/b": "Widget"},
			match: map[string]string{"/a": MatchExact, "/b": MatchExact},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			diags, _, gr, err := s.Check([]byte(tc.doc), NewInput(tc.input), 0)
			if err != nil || len(diags) > 0 {
				t.Fatalf("Check: %v %v", diags, err)
			}
			if len(gr) != len(tc.want) {
				t.Fatalf("grounding %+v, want %d entries", gr, len(tc.want))
			}
			for _, g := range gr {
				if got := slice(tc.input, g.Start, g.End); got != tc.want[g.Path] {
					t.Errorf("%s: input[%d:%d] = %q, want %q", g.Path, g.Start, g.End, got, tc.want[g.Path])
				}
				if g.Match != tc.match[g.Path] {
					t.Errorf("%s: match %s, want %s", g.Path, g.Match, tc.match[g.Path])
				}
			}
			if tc.name == "the next occurrence after the previous value of the object" && gr[0].Start == gr[1].Start {
				t.Errorf("both values grounded at the same occurrence: %+v", gr)
			}
		})
	}
}

// TestCheckDiagnostics: ungrounded values and failing rules are
// diagnostics at their paths, with x-grounded / x-rules/<i> keywords; a
// rule over a missing field is a diagnostic too, not a crash; empty
// strings and nulls are not grounded.
func TestCheckDiagnostics(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, "inv", truthSchema)
	input := "Invoice from Acme Corp. Items: bolt (B-1), nut (N-2). Note: paid."
	doc := `{"vendor":"Globex","note":null,"subtotal":10,"tax":2,"total":13,"discount":1,
		"items":[{"name":"bolt","sku":"B-1"},{"name":"N-2","sku":"N-2"},{"name":"","sku":"B-1"}]}`
	diags, omitted, gr, err := s.Check([]byte(doc), NewInput(input), 0)
	if err != nil {
		t.Fatal(err)
	}
	got := Lines(diags, omitted)
	for _, want := range []string{
		`- /vendor [x-grounded]: "Globex" not found in the input: quote the document exactly, or return null if it says nothing`,
		`- /total [x-rules/0]: total must be subtotal + tax (rule: self.total == self.subtotal + self.tax), got 13`,
		`- /items/1 [x-rules/0]: name and sku differ (rule: self.name != self.sku), got {"name":"N-2","sku":"N-2"}`,
	} {
		if !strings.Contains(got, want) {
			t.Errorf("diagnostics lack\n%s\ngot\n%s", want, got)
		}
	}
	if len(diags) != 3 {
		t.Errorf("want 3 diagnostics (the discount rule holds, the empty name and the null note are not checked), got\n%s", got)
	}
	if len(gr) != 5 { // bolt, B-1, N-2, N-2, B-1
		t.Errorf("grounding %+v, want 5 entries", gr)
	}

	// A runtime error: the discount is optional and absent.
	diags, _, _, err = s.Check([]byte(`{"vendor":"Acme Corp","subtotal":10,"tax":2,"total":12}`), NewInput(input), 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(diags) != 1 || diags[0].Keyword != "x-rules/1" || diags[0].Path != "" ||
		!strings.Contains(diags[0].Message, "could not be evaluated: no such key: discount") {
		t.Errorf("runtime error: got %+v", diags)
	}

	// Without the input, grounding is skipped and rules still apply.
	diags, _, gr, _ = s.Check([]byte(doc), nil, 0)
	if len(diags) != 2 || len(gr) != 0 {
		t.Errorf("no input: got %v %v", diags, gr)
	}
}

// TestRuleDoesNotCompile: a rule that does not compile makes the schema
// broken, naming the file, the rule and CEL's message.
func TestRuleDoesNotCompile(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	bad := `{"type":"object","x-rules":[{"rule":"self.total >"}]}`
	notBool := `{"type":"object","x-rules":[{"rule":"self.a + 1"}]}`
	for name, text := range map[string]string{"bad.json": bad, "notbool.json": notBool, "good.json": truthSchema} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	reg, err := Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := reg.Get("good"); !ok {
		t.Fatalf("good schema did not load: %v", reg.Err())
	}
	ce, broken := reg.BrokenSchema("bad")
	if !broken {
		t.Fatal("a rule that does not compile loaded")
	}
	msg := ce.Error()
	for _, want := range []string{filepath.Join(dir, "bad.json"), `rule "self.total >" does not compile`, "Syntax error"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	var re *RuleError
	if !errors.As(ce, &re) || re.Index != 0 {
		t.Errorf("error is not a *RuleError for rule 0: %v", ce)
	}
	if ce, _ := reg.BrokenSchema("notbool"); ce == nil || !strings.Contains(ce.Error(), "not a bool") {
		t.Errorf("a rule giving an int loaded: %v", ce)
	}
}

// TestVersionCoversRules: changing a rule's text is a new version.
func TestVersionCoversRules(t *testing.T) {
	t.Parallel()
	a := mustCompile(t, "inv", truthSchema)
	b := mustCompile(t, "inv", strings.Replace(truthSchema, "self.subtotal + self.tax", "self.subtotal", 1))
	if a.Version == b.Version {
		t.Errorf("a changed rule kept version %s", a.Version)
	}
	if !a.HasChecks() || len(a.Rules()) != 4 {
		t.Errorf("HasChecks %v, Rules %+v", a.HasChecks(), a.Rules())
	}
}

// TestCheckFollowsRefsAndBranches: x-grounded under a $ref and in the
// anyOf branch the value satisfies applies; in the other branch it does not.
func TestCheckFollowsRefsAndBranches(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, "inv", `{"$defs":{"g":{"type":"string","x-grounded":true}},"type":"object",
		"properties":{"r":{"$ref":"#/$defs/g"},"u":{"anyOf":[{"type":"number"},{"type":"string","x-grounded":true}]},
		"n":{"anyOf":[{"type":"number","x-grounded":true},{"type":"string"}]}}}`)
	diags, _, _, err := s.Check([]byte(`{"r":"zzz","u":"yyy","n":"xxx"}`), NewInput("nothing here"), 0)
	if err != nil {
		t.Fatal(err)
	}
	got := Lines(diags, 0)
	if len(diags) != 2 || !strings.Contains(got, "/r [x-grounded]") || !strings.Contains(got, "/u [x-grounded]") {
		t.Errorf("got\n%s", got)
	}
}

// TestLintTruth: lint reports a rule naming a property the object does not
// define, and x-grounded on a non-string.
func TestLintTruth(t *testing.T) {
	t.Parallel()
	raw := `{"type":"object","properties":{"total":{"type":"number","x-grounded":true},"vendor":{"type":"string","x-grounded":true},
		"addr":{"type":"object","properties":{"city":{"type":"string"}}},"tags":{"type":"object","x-grounded":true}},
		"x-rules":[{"rule":"self.total == self.subtotl"},{"rule":"has(self.addr.zip) || self.addr.city != ''"},
		{"rule":"self.items.all(i, i.price > 0.0)"},{"rule":"self.total >= 0.0"}]}`
	got := LintRaw("inv", []byte(raw))
	want := map[string]string{
		"/properties/total/x-grounded|" + RuleGroundedNonString: "x-grounded on a value of type number",
		"/x-rules/0|" + RuleRuleUnknownField:                    "names self.subtotl",
		"/x-rules/1|" + RuleRuleUnknownField:                    "names self.addr.zip",
		"/x-rules/2|" + RuleRuleUnknownField:                    "names self.items",
	}
	if len(got) != len(want) {
		t.Errorf("findings %+v, want %d", got, len(want))
	}
	for _, f := range got {
		w, ok := want[f.Path+"|"+f.Rule]
		if !ok || !strings.Contains(f.Message, w) {
			t.Errorf("unexpected finding %+v", f)
		}
	}
}

// TestDecodeOrderedRepeatedNames: a repeated member keeps its first place
// and its last value, below and above 16 members.
func TestDecodeOrderedRepeatedNames(t *testing.T) {
	t.Parallel()
	var sb strings.Builder
	sb.WriteString(`{"a":1,`)
	for i := range 20 {
		fmt.Fprintf(&sb, `"k%d":%d,`, i, i)
	}
	sb.WriteString(`"a":2,"k3":"x","k19":"y"}`)
	n, err := decodeOrdered([]byte(sb.String()))
	if err != nil {
		t.Fatal(err)
	}
	if len(n.keys) != 21 || n.keys[0] != "a" || string(n.kids[0].num) != "2" || n.kids[4].str != "x" || n.kids[20].str != "y" {
		t.Errorf("keys %v, a=%v k3=%q k19=%q", n.keys, n.kids[0].num, n.kids[4].str, n.kids[20].str)
	}
}

// TestCheckConcurrent: one compiled schema checks documents from many
// goroutines at once (run with -race), each job with its own Input.
func TestCheckConcurrent(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, "inv", truthSchema)
	input := "Invoice from Acme Corp. Items: bolt (B-1), nut (N-2)."
	doc := []byte(`{"vendor":"ACME corp","subtotal":10,"tax":2,"total":13,"discount":1,"items":[{"name":"bolt","sku":"B-1"}]}`)
	var wg sync.WaitGroup
	errs := make(chan string, 8)
	for range 8 {
		wg.Go(func() {
			in := NewInput(input)
			for range 20 {
				diags, _, gr, err := s.Check(doc, in, 0)
				if err != nil || len(diags) != 1 || len(gr) != 3 || gr[0].Match != MatchNormalized {
					errs <- fmt.Sprintf("%v %v %v", diags, gr, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for e := range errs {
		t.Error(e)
	}
}

// TestCheckRefusesDeepAnswers: an answer nested deeper than MaxCheckDepth
// is refused at once (an error wrapping ErrNotJSON that says why), so a
// recursive schema with anyOf cannot hold a worker for minutes; one at the
// bound is checked. Before, 2,000 levels took 41 s.
func TestCheckRefusesDeepAnswers(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, "deep", `{"$defs":{"n":{"anyOf":[{"type":"string","x-grounded":true},{"type":"object","properties":{"c":{"$ref":"#/$defs/n"}}}]}},"$ref":"#/$defs/n"}`)
	nest := func(levels int) []byte {
		return []byte(strings.Repeat(`{"c":`, levels) + `"x"` + strings.Repeat(`}`, levels))
	}
	_, _, _, err := s.Check(nest(5000), NewInput("x"), 0)
	if !errors.Is(err, ErrNotJSON) || !strings.Contains(err.Error(), "deeper than 128 levels") {
		t.Errorf("5,000 levels: %v, want refused as deeper than %d levels", err, MaxCheckDepth)
	}
	diags, _, gr, err := s.Check(nest(MaxCheckDepth-1), NewInput("x"), 0)
	if err != nil || len(diags) != 0 || len(gr) != 1 {
		t.Errorf("%d levels: diagnostics %v, grounding %v, err %v; want the value grounded", MaxCheckDepth-1, diags, gr, err)
	}
}

// TestGroundingInDocumentOrder: the grounding list is in the order the
// values stand in the input, whatever the answer's order of members.
func TestGroundingInDocumentOrder(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, "ord", `{"type":"object","additionalProperties":{"type":"string","x-grounded":true}}`)
	_, _, gr, err := s.Check([]byte(`{"b":"second","a":"first"}`), NewInput("first second"), 0)
	if err != nil || len(gr) != 2 || gr[0].Path != "/a" || gr[1].Path != "/b" {
		t.Errorf("grounding %+v (%v), want /a then /b", gr, err)
	}
}
