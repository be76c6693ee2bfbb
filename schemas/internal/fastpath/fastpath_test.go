package fastpath

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"math/rand/v2"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/santhosh-tekuri/jsonschema/v6"
)

// The fast path's one promise: when it accepts a document, the general
// validator finds nothing wrong with it. These tests hold it to that on
// hand-picked edge cases, on generated documents (mostly invalid, each
// mistake a model makes) and under the fuzzer; they also check it does
// accept the common valid documents, or it would be no faster.

// fastSchemas covers every keyword the fast path decides, alone and
// combined, and some it leaves to the general validator.
var fastSchemas = map[string]string{
	"kitchen": `{
		"$defs": {
			"money": {"type": "number", "minimum": 0.1, "exclusiveMaximum": 1e6},
			"node": {"type": "object", "additionalProperties": false,
				"properties": {"v": {"type": "integer", "minimum": -3, "maximum": 9007199254740993},
				               "kids": {"type": "array", "items": {"$ref": "#/$defs/node"}, "maxItems": 3}}}
		},
		"type": "object",
		"required": ["id", "tags", "price"],
		"minProperties": 3, "maxProperties": 9,
		"properties": {
			"id": {"type": "string", "minLength": 2, "maxLength": 5, "pattern": "^[a-zé]+$"},
			"tags": {"type": "array", "uniqueItems": true, "minItems": 1, "items": {"type": "string", "enum": ["a", "b", "c", "é", "\"q\""]}},
			"price": {"$ref": "#/$defs/money"},
			"when": {"type": "string", "format": "date"},
			"mail": {"type": ["string", "null"], "format": "email"},
			"flag": {"const": true},
			"nothing": {"enum": [null, false, "none"]},
			"pair": {"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}], "items": false},
			"tree": {"$ref": "#/$defs/node"},
			"either": {"anyOf": [{"type": "integer", "exclusiveMinimum": 0}, {"type": "string", "maxLength": 2}]},
			"both": {"allOf": [{"type": "number"}, {"minimum": -1.5}, {"maximum": 2.5}]},
			"extra": {"type": "object", "additionalProperties": {"type": "boolean"}},
			"no": false,
			"yes": true
		}
	}`,
	"draft07": `{
		"$schema": "http://json-schema.org/draft-07/schema#",
		"definitions": {"n": {"type": "number", "exclusiveMinimum": 0}},
		"type": "object",
		"properties": {
			"t": {"type": "array", "items": [{"type": "string"}, {"$ref": "#/definitions/n"}], "additionalItems": false},
			"all": {"type": "array", "items": {"type": "integer"}}
		}
	}`,
	"draft04": `{
		"$schema": "http://json-schema.org/draft-04/schema#",
		"type": "object",
		"properties": {"x": {"type": "number", "minimum": 0, "exclusiveMinimum": true}}
	}`,
	"opaque": `{
		"type": "object",
		"properties": {
			"pp": {"type": "object", "patternProperties": {"^x": {"type": "integer"}}},
			"mult": {"type": "number", "multipleOf": 0.5},
			"ok": {"type": "string"}
		}
	}`,
}

// schemasDir is package schemas' directory, whose fixtures these tests
// share: the built-in schemas, the union schema (testdata/union.json) and
// the 2 KB invoice.
const schemasDir = "../.."

// fixture reads a file of schemasDir.
func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(schemasDir, name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// schema is one schema of the tests: its text, the general validator's
// compiled form and the fast path compiled from it.
type schema struct {
	ID       string
	Raw      []byte
	compiled *jsonschema.Schema
	fast     *Checker
}

// mustCompile compiles a schema the way package schemas does: draft
// 2020-12 by default, formats asserted.
func mustCompile(t testing.TB, id, raw string) *schema {
	t.Helper()
	doc, err := jsonschema.UnmarshalJSON(strings.NewReader(raw))
	if err != nil {
		t.Fatalf("parsing schema %s: %v", id, err)
	}
	c := jsonschema.NewCompiler()
	c.DefaultDraft(jsonschema.Draft2020)
	c.AssertFormat()
	url := "mem:///" + id + ".json"
	if err := c.AddResource(url, doc); err != nil {
		t.Fatalf("adding schema %s: %v", id, err)
	}
	compiled, err := c.Compile(url)
	if err != nil {
		t.Fatalf("compiling schema %s: %v", id, err)
	}
	return &schema{ID: id, Raw: []byte(raw), compiled: compiled, fast: Compile(compiled)}
}

// fastRegistry compiles the built-in schemas, then the union schema and
// fastSchemas by id.
func fastRegistry(t testing.TB) []*schema {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(schemasDir, "builtin", "*.json"))
	if err != nil || len(files) == 0 {
		t.Fatalf("no built-in schemas in %s: %v", schemasDir, err)
	}
	sort.Strings(files)
	var out []*schema
	for _, f := range files {
		name := filepath.Base(f)
		out = append(out, mustCompile(t, strings.TrimSuffix(name, ".json"), string(fixture(t, "builtin/"+name))))
	}
	raw := map[string]string{"union": string(fixture(t, "testdata/union.json"))}
	for id, text := range fastSchemas {
		raw[id] = text
	}
	ids := make([]string, 0, len(raw))
	for id := range raw {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		out = append(out, mustCompile(t, id, raw[id]))
	}
	return out
}

// validate is the general validator's verdict on doc as schemas.Validate
// reaches it: nil when doc is one JSON value, holds no number whose
// exponent is beyond MaxExponent (Validate reports those) and the compiled
// schema finds no error.
func validate(sch *jsonschema.Schema, doc []byte) error {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return fmt.Errorf("not JSON: %w", err)
	}
	if n, ok := hugeNumber(v); ok {
		return fmt.Errorf("number %s: exponent out of range", n)
	}
	return sch.Validate(v)
}

// hugeNumber finds a number whose exponent is beyond MaxExponent.
func hugeNumber(v any) (json.Number, bool) {
	switch x := v.(type) {
	case json.Number:
		i := strings.IndexAny(string(x), "eE")
		if i < 0 {
			return "", false
		}
		exp, err := strconv.Atoi(strings.TrimPrefix(string(x[i+1:]), "+"))
		return x, err != nil || exp < -MaxExponent || exp > MaxExponent
	case []any:
		for _, e := range x {
			if n, ok := hugeNumber(e); ok {
				return n, true
			}
		}
	case map[string]any:
		for _, e := range x {
			if n, ok := hugeNumber(e); ok {
				return n, true
			}
		}
	}
	return "", false
}

// checkSound fails when the fast path accepts what the general validator
// rejects, and returns whether each accepted.
func checkSound(t testing.TB, s *schema, doc []byte) (fast, general bool) {
	t.Helper()
	fast = s.fast != nil && s.fast.Accept(doc)
	err := validate(s.compiled, doc)
	general = err == nil
	if fast && !general {
		t.Fatalf("%s: fast path accepted %s, general validator: %v", s.ID, doc, err)
	}
	if s.fast != nil && general && rejectsDoc(s.fast.root, doc) {
		t.Fatalf("%s: rejects says %s is invalid, the general validator accepts it", s.ID, doc)
	}
	return fast, general
}

func TestFastEdgeCases(t *testing.T) {
	t.Parallel()
	invoiceValid := fixture(t, "testdata/invoice_valid.json")
	invoiceInvalid := fixture(t, "testdata/invoice_invalid.json")
	byID := map[string]*schema{}
	for _, s := range fastRegistry(t) {
		byID[s.ID] = s
	}
	base := `"id":"ab","tags":["a"],"price":1`
	for _, tc := range []struct {
		schema, doc string
		fast        bool // what the fast path must say
	}{
		{"kitchen", `{` + base + `}`, true},
		{"kitchen", ` {` + base + `} ` + "\n", true},
		{"kitchen", `{` + base + `} x`, false},
		{"kitchen", `{` + base + `}{}`, false},
		{"kitchen", `{"id":"ab","tags":["a"]}`, false},                          // required
		{"kitchen", `{"id":"ab","id":"cd","tags":["a"],"price":1}`, false},      // repeated key, minProperties
		{"kitchen", `{"id":"ab","tags":["a"],"price":1,"zz":1}`, true},          // additional allowed
		{"kitchen", `{"id":"éé","tags":["é"],"price":1}`, true},                 // runes, not bytes
		{"kitchen", `{"id":"\u00e9\u00e9","tags":["\u00e9"],"price":1}`, true},  // escaped runes
		{"kitchen", `{"id":"abcdef","tags":["a"],"price":1}`, false},            // maxLength
		{"kitchen", `{"id":"a1","tags":["a"],"price":1}`, false},                // pattern
		{"kitchen", `{"id":"ab","tags":["a","a"],"price":1}`, false},            // uniqueItems
		{"kitchen", `{"id":"ab","tags":["a","\u0061"],"price":1}`, false},       // the same when decoded
		{"kitchen", `{"id":"ab","tags":["\"q\"","a"],"price":1}`, true},         // escaped enum value
		{"kitchen", `{"id":"ab","tags":["d"],"price":1}`, false},                // enum
		{"kitchen", `{"id":"ab","tags":[],"price":1}`, false},                   // minItems
		{"kitchen", `{"id":"ab","tags":["a"],"price":0.1}`, false},              // equal to an inexact bound: undecided
		{"kitchen", `{"id":"ab","tags":["a"],"price":1,"tree":{"v":-3}}`, true}, // equal to an exact bound
		{"kitchen", `{"id":"ab","tags":["a"],"price":1,"tree":{"v":-3.0}}`, true},
		{"kitchen", `{"id":"ab","tags":["a"],"price":1,"tree":{"v":-4}}`, false},
		{"kitchen", `{"id":"ab","tags":["a"],"price":1,"either":0.0}`, false}, // exclusive
		{"kitchen", `{"id":"ab","tags":["a"],"price":0.10000001}`, true},
		{"kitchen", `{"id":"ab","tags":["a"],"price":0.09}`, false},
		{"kitchen", `{"id":"ab","tags":["a"],"price":"1"}`, false},
		{"kitchen", `{"id":"ab","tags":["a"],"price":1e400}`, false},
		{"kitchen", `{"id":"ab","tags":["a"],"price":1E2}`, true},
		{"kitchen", `{"id":"ab","tags":["a"],"price":1,"when":"2026-02-28"}`, true},
		{"kitchen", `{"id":"ab","tags":["a"],"price":1,"when":"2026-02-30"}`, false},
		{"kitchen", `{"id":"ab","tags":["a"],"price":1,"mail":null}`, true},
		{"kitchen", `{"id":"ab","tags":["a"],"price":1,"mail":"a@b.example"}`, true},
		{"kitchen", `{"id":"ab","tags":["a"],"price":1,"mail":"not mail"}`, false},
		{"kitchen", `{"id":"ab","tags":["a"],"price":1,"flag":true}`, true},
		{"kitchen", `{"id":"ab","tags":["a"],"price":1,"flag":1}`, false},
		{"kitchen", `{"id":"ab","tags":["a"],"price":1,"nothing":null}`, true},
		{"kitchen", `{"id":"ab","tags":["a"],"price":1,"nothing":"none"}`, true},
		{"kitchen", `{"id":"ab","tags":["a"],"price":1,"nothing":true}`, false},
		{"kitchen", `{"id":"ab","tags":["a"],"price":1,"pair":[1,"x"]}`, true},
		{"kitchen", `{"id":"ab","tags":["a"],"price":1,"pair":[1.0,"x"]}`, true}, // 1.0 is an integer
		{"kitchen", `{"id":"ab","tags":["a"],"price":1,"pair":[1.5,"x"]}`, false},
		{"kitchen", `{"id":"ab","tags":["a"],"price":1,"pair":[1,"x",2]}`, false}, // items false
		{"kitchen", `{"id":"ab","tags":["a"],"price":1,"tree":{"v":1,"kids":[{"v":2,"kids":[{"v":3}]}]}}`, true},
		{"kitchen", `{"id":"ab","tags":["a"],"price":1,"tree":{"v":1,"kids":[{"v":2,"kids":[{"w":3}]}]}}`, false},
		{"kitchen", `{"id":"ab","tags":["a"],"price":1,"tree":{"v":9007199254740993}}`, false}, // equal as floats
		{"kitchen", `{"id":"ab","tags":["a"],"price":1,"either":3}`, true},
		{"kitchen", `{"id":"ab","tags":["a"],"price":1,"either":"ab"}`, true},
		{"kitchen", `{"id":"ab","tags":["a"],"price":1,"either":0}`, false},
		{"kitchen", `{"id":"ab","tags":["a"],"price":1,"both":2}`, true},
		{"kitchen", `{"id":"ab","tags":["a"],"price":1,"both":3}`, false},
		{"kitchen", `{"id":"ab","tags":["a"],"price":1,"extra":{"x":true,"y":false}}`, true},
		{"kitchen", `{"id":"ab","tags":["a"],"price":1,"extra":{"x":1}}`, false},
		{"kitchen", `{"id":"ab","tags":["a"],"price":1,"no":1}`, false},
		{"kitchen", `{"id":"ab","tags":["a"],"price":1,"yes":[{"\ud83d\ude00":1}]}`, true},
		{"kitchen", `{"id":"ab","tags":["a"],"price":1,"yes":"\ud83d"}`, false}, // lone surrogate: undecided
		{"kitchen", `{"\u0069d":"ab","tags":["a"],"price":1}`, false},           // escaped name: undecided
		{"kitchen", "{\"id\":\"a\xffb\",\"tags\":[\"a\"],\"price\":1}", false},
		{"kitchen", `{"id":"ab","tags":["a"],"price":01}`, false},
		{"kitchen", `{"id":"ab","tags":["a"],"price":1,}`, false},
		{"kitchen", `{"id":"ab","tags":["a"],"price":-}`, false},
		{"kitchen", ``, false},
		{"draft07", `{"t":["x",1]}`, true},
		{"draft07", `{"t":["x",0]}`, false},
		{"draft07", `{"t":["x",1,2]}`, false},
		{"draft07", `{"all":[1,2,3]}`, true},
		{"draft04", `{"x":1}`, true},
		{"draft04", `{"x":0}`, false},
		{"opaque", `{"ok":"x"}`, true},
		{"opaque", `{"mult":1}`, false},
		{"opaque", `{"pp":{"x":1}}`, false},
		{"union", `{"pay":{"kind":"card","last4":"1234"}}`, true},
		{"union", `{"pay":{"kind":"iban","iban":"DE89370400440532013000"}}`, true},
		{"union", `{"pay":{"kind":"cheque"}}`, true},
		{"union", `{"pay":{"kind":"card","last4":"12a4"}}`, false},     // no branch
		{"union", `{"pay":{"kind":"card"}}`, false},                    // required
		{"union", `{"pay":{"kind":"\u0063ard","last4":"1234"}}`, true}, // an escaped value is decoded
		{"union", `{"pay":{"kind":"card","kind":"iban","iban":"DE89370400440532013000"}}`, false},
		{"union", `{"id":"x"}`, true},
		{"union", `{"id":7}`, true},
		{"union", `{"id":7.0}`, true},
		{"union", `{"id":7.5}`, false},
		{"union", `{"id":null}`, true},
		{"union", `{"qty":3}`, true},
		{"union", `{"qty":7}`, false}, // both branches
		{"union", `{"qty":12}`, true},
		{"union", `{"qty":12.5}`, false},
		{"union", `{"note":"x"}`, true},
		{"union", `{"note":null}`, false},
		{"union", `{"tags":["a","b"]}`, true},
		{"union", `{"tags":["a","n/a"]}`, false},
		{"union", `{"ship":{"country":"US","zip":"12345"}}`, true},
		{"union", `{"ship":{"country":"US"}}`, false},
		{"union", `{"ship":{"country":"DE","zip":"D-1"}}`, true},
		{"union", `{"ship":{"zip":"x"}}`, true},
		{"union", `{"ship":{"country":"DE","zip":5}}`, false},
		{"union", `{"size":2}`, true},
		{"union", `{"size":0}`, false},
		{"union", `{"size":"big"}`, true},
		{"union", `{"list":[1]}`, true},
		{"union", `{"list":[1,2]}`, false},
		{"union", `{"list":[1,2,3]}`, true},
		{"union", `{"list":[null]}`, false}, // maxItems 1 and the tuple both hold
		{"invoice", string(invoiceValid), true},
		{"invoice", string(invoiceInvalid), false},
	} {
		s := byID[tc.schema]
		fast, _ := checkSound(t, s, []byte(tc.doc))
		if fast != tc.fast {
			t.Errorf("%s: fast path on %s = %v, want %v", tc.schema, tc.doc, fast, tc.fast)
		}
	}
}

// rejectsDoc applies rejects to a whole document.
func rejectsDoc(n *node, doc []byte) bool {
	sc := scanner{doc: doc, budget: 16*len(doc) + 1024}
	sc.ws()
	return sc.rejects(sc.pos, n, 0)
}

// TestFastGenerated runs both validators on documents generated from each
// schema: values that follow it, and values with one of the mistakes models
// make (wrong type, missing or unknown field, off-by-one bounds, numbers
// as strings, escapes, repeated items or keys).
func TestFastGenerated(t *testing.T) {
	t.Parallel()
	for _, s := range fastRegistry(t) {
		t.Run(s.ID, func(t *testing.T) {
			t.Parallel()
			var root any
			if err := json.Unmarshal(s.Raw, &root); err != nil {
				t.Fatal(err)
			}
			g := docGen{r: rand.New(rand.NewPCG(1, uint64(len(s.ID)))), root: root}
			valid, fastValid := 0, 0
			const n = 3000
			for i := range n {
				g.mistakes = i%2 == 1
				var b bytes.Buffer
				g.write(&b, root, 0)
				fast, general := checkSound(t, s, b.Bytes())
				if general {
					valid++
				}
				if fast {
					fastValid++
				}
			}
			t.Logf("%d documents: %d valid, %d of them shown valid by the fast path", n, valid, fastValid)
			if valid < n/10 {
				t.Errorf("only %d of %d generated documents are valid: the generator misses the schema", valid, n)
			}
			if s.fast != nil && s.ID != "opaque" && s.ID != "union" && fastValid < valid*8/10 {
				t.Errorf("the fast path decided %d of %d valid documents: it should take most", fastValid, valid)
			}
		})
	}
}

// docGen writes random documents for a schema (its raw form). With
// mistakes on, about one value in twenty is wrong in some way.
type docGen struct {
	r        *rand.Rand
	root     any
	mistakes bool
}

func (g *docGen) chance(p float64) bool { return g.r.Float64() < p }

func (g *docGen) wrong() bool { return g.mistakes && g.chance(0.15) }

func (g *docGen) resolve(s map[string]any) map[string]any {
	for i := 0; i < 8; i++ {
		ref, ok := s["$ref"].(string)
		if !ok {
			return s
		}
		cur := g.root
		for _, part := range strings.Split(strings.TrimPrefix(ref, "#/"), "/") {
			if part == "#" || part == "" {
				continue
			}
			m, _ := cur.(map[string]any)
			cur = m[part]
		}
		next, _ := cur.(map[string]any)
		if next == nil {
			return s
		}
		merged := map[string]any{}
		for k, v := range next {
			merged[k] = v
		}
		for k, v := range s {
			if k != "$ref" {
				merged[k] = v
			}
		}
		s = merged
	}
	return s
}

var junk = []string{`null`, `true`, `0`, `-1`, `1.5`, `1e2`, `"12,50"`, `""`, `"x"`, `[]`, `{}`, `"\u00e9"`, `"a\"b"`, `1e401`, `"2026-13-01"`}

func (g *docGen) write(b *bytes.Buffer, schema any, depth int) {
	s, _ := schema.(map[string]any)
	if s == nil || g.wrong() || depth > 6 {
		if s == nil || depth > 6 {
			b.WriteString(`null`)
			return
		}
		b.WriteString(junk[g.r.IntN(len(junk))])
		return
	}
	s = g.resolve(s)
	for _, k := range []string{"anyOf", "oneOf"} {
		if alts, ok := s[k].([]any); ok && len(alts) > 0 {
			g.write(b, alts[g.r.IntN(len(alts))], depth+1)
			return
		}
	}
	if all, ok := s["allOf"].([]any); ok && len(all) > 0 {
		merged := map[string]any{}
		for _, a := range all {
			if m, ok := a.(map[string]any); ok {
				for k, v := range m {
					merged[k] = v
				}
			}
		}
		g.write(b, merged, depth+1)
		return
	}
	if c, ok := s["const"]; ok {
		writeJSON(b, c)
		return
	}
	if e, ok := s["enum"].([]any); ok && len(e) > 0 {
		writeJSON(b, e[g.r.IntN(len(e))])
		return
	}
	t := pickType(g, s)
	switch t {
	case "object":
		g.object(b, s, depth)
	case "array":
		g.array(b, s, depth)
	case "string":
		g.str(b, s)
	case "integer", "number":
		g.number(b, s, t == "integer")
	case "boolean":
		b.WriteString([]string{"true", "false"}[g.r.IntN(2)])
	default:
		b.WriteString("null")
	}
}

func pickType(g *docGen, s map[string]any) string {
	switch t := s["type"].(type) {
	case string:
		return t
	case []any:
		return fmt.Sprint(t[g.r.IntN(len(t))])
	}
	switch {
	case s["properties"] != nil:
		return "object"
	case s["items"] != nil || s["prefixItems"] != nil:
		return "array"
	case s["minimum"] != nil || s["maximum"] != nil || s["exclusiveMinimum"] != nil:
		return "number"
	case s["minLength"] != nil || s["pattern"] != nil || s["format"] != nil:
		return "string"
	}
	return []string{"string", "integer", "boolean", "null"}[g.r.IntN(4)]
}

func (g *docGen) object(b *bytes.Buffer, s map[string]any, depth int) {
	props, _ := s["properties"].(map[string]any)
	req := map[string]bool{}
	if r, ok := s["required"].([]any); ok {
		for _, k := range r {
			req[fmt.Sprint(k)] = true
		}
	}
	names := make([]string, 0, len(props))
	for k := range props {
		names = append(names, k)
	}
	sort.Strings(names)
	b.WriteByte('{')
	n := 0
	sep := func() {
		if n > 0 {
			b.WriteByte(',')
		}
		n++
	}
	for _, k := range names {
		if (!req[k] && g.chance(0.4)) || (req[k] && g.wrong()) || (props[k] == false && !g.wrong()) {
			continue
		}
		times := 1
		if g.wrong() {
			times = 2 // a repeated key
		}
		for range times {
			sep()
			if g.wrong() {
				b.WriteString(`"\u00` + strconv.FormatInt(int64(k[0]), 16) + k[1:] + `"`)
			} else {
				writeJSON(b, k)
			}
			b.WriteByte(':')
			g.write(b, props[k], depth+1)
		}
	}
	if g.wrong() || (s["additionalProperties"] == nil && g.chance(0.1)) {
		sep()
		b.WriteString(`"unexpected":`)
		if ap, ok := s["additionalProperties"].(map[string]any); ok {
			g.write(b, ap, depth+1)
		} else {
			b.WriteString(junk[g.r.IntN(len(junk))])
		}
	}
	b.WriteByte('}')
}

func (g *docGen) array(b *bytes.Buffer, s map[string]any, depth int) {
	lo, hi := 0, 4
	if v, ok := s["minItems"].(float64); ok {
		lo = int(v)
	}
	if v, ok := s["maxItems"].(float64); ok && int(v) < hi {
		hi = int(v)
	}
	if hi < lo {
		hi = lo
	}
	n := lo + g.r.IntN(hi-lo+1)
	if g.wrong() {
		n = []int{max(lo-1, 0), hi + 1}[g.r.IntN(2)]
	}
	prefix, _ := s["prefixItems"].([]any)
	if p, ok := s["items"].([]any); ok { // draft-07 tuples
		prefix = p
	}
	var seen []string
	b.WriteByte('[')
	for i := range n {
		if i > 0 {
			b.WriteByte(',')
		}
		var item bytes.Buffer
		switch {
		case i < len(prefix):
			g.write(&item, prefix[i], depth+1)
		default:
			if it, ok := s["items"].(map[string]any); ok {
				g.write(&item, it, depth+1)
			} else if add, ok := s["additionalItems"].(map[string]any); ok {
				g.write(&item, add, depth+1)
			} else {
				item.WriteString(junk[g.r.IntN(len(junk))])
			}
		}
		if s["uniqueItems"] == true && !g.wrong() {
			for tries := 0; tries < 5 && contains(seen, item.String()); tries++ {
				item.Reset()
				if it, ok := s["items"].(map[string]any); ok {
					g.write(&item, it, depth+1)
				}
			}
		}
		seen = append(seen, item.String())
		b.Write(item.Bytes())
	}
	b.WriteByte(']')
}

var words = []string{"Acme GmbH", "invoice", "é", "日本", "a\"b", "x\\y", "tab\there", "ok", "2026-03-04", "a@b.example", "1Z999", "", "😀", "1Z999AA10123456784", "abé"}

func (g *docGen) str(b *bytes.Buffer, s map[string]any) {
	var v string
	switch s["format"] {
	case "date":
		v = fmt.Sprintf("%04d-%02d-%02d", 2020+g.r.IntN(8), 1+g.r.IntN(12), 1+g.r.IntN(28))
		if g.wrong() {
			v = "31/12/2026"
		}
	case "email":
		v = "billing@acme.example"
		if g.wrong() {
			v = "billing at acme"
		}
	case "date-time":
		v = "2026-03-04T05:06:07Z"
	default:
		v = words[g.r.IntN(len(words))]
		if g.chance(0.3) {
			v += words[g.r.IntN(len(words))]
		}
		if p, ok := s["pattern"].(string); ok && !g.wrong() {
			re := regexp.MustCompile(p)
			var fit []string
			for _, w := range words {
				if re.MatchString(w) {
					fit = append(fit, w)
				}
			}
			if len(fit) > 0 {
				v = fit[g.r.IntN(len(fit))]
			}
		}
	}
	if m, ok := s["minLength"].(float64); ok && !g.wrong() {
		for len([]rune(v)) < int(m) {
			v += "a"
		}
	}
	if m, ok := s["maxLength"].(float64); ok && !g.wrong() {
		if r := []rune(v); len(r) > int(m) {
			v = string(r[:int(m)])
		}
	}
	writeJSON(b, v)
}

func (g *docGen) number(b *bytes.Buffer, s map[string]any, integer bool) {
	lo, hi := -1000.0, 1000.0
	for _, k := range []string{"minimum", "exclusiveMinimum"} {
		if v, ok := s[k].(float64); ok {
			lo = v
		}
	}
	for _, k := range []string{"maximum", "exclusiveMaximum"} {
		if v, ok := s[k].(float64); ok {
			hi = v
		}
	}
	if hi > lo+1e6 {
		hi = lo + 1e6
	}
	switch {
	case g.chance(0.1): // on a bound
		b.WriteString(strconv.FormatFloat([]float64{lo, hi}[g.r.IntN(2)], 'g', -1, 64))
	case integer:
		b.WriteString(strconv.Itoa(int(lo) + 1 + g.r.IntN(max(1, int(hi-lo)-1))))
	default:
		b.WriteString(strconv.FormatFloat(lo+(hi-lo)*(0.01+0.98*g.r.Float64()), 'f', g.r.IntN(4), 64))
	}
}

func writeJSON(b *bytes.Buffer, v any) {
	enc := json.NewEncoder(b)
	enc.SetEscapeHTML(false)
	_ = enc.Encode(v)
	b.Truncate(b.Len() - 1)
}

// FuzzFastPath: whatever the bytes, the fast path never accepts a document
// the general validator rejects.
func FuzzFastPath(f *testing.F) {
	invoiceValid := fixture(f, "testdata/invoice_valid.json")
	invoiceInvalid := fixture(f, "testdata/invoice_invalid.json")
	for _, seed := range []string{
		string(invoiceValid), string(invoiceInvalid), `{}`, `[]`, `null`, `1e400`,
		`{"id":"ab","tags":["a"],"price":1,"tree":{"v":1,"kids":[{"v":2}]}}`,
		`{"id":"\u00e9b","tags":["a","b"],"price":0.1000001,"pair":[1.0,"x"],"either":"ab"}`,
		`{"t":["x",1],"all":[1,2]}`, `{"x":1}`, `{"ok":"x","mult":1}`,
		`{"pay":{"kind":"card","last4":"1234"},"id":7,"qty":3,"note":"x","tags":["a"],"ship":{"country":"US","zip":"12345"},"size":2,"list":[null]}`,
		`{"pay":{"kind":"cash","amount":0},"id":null,"qty":7,"ship":{"country":"DE","zip":5},"list":[1,2,3]}`,
	} {
		f.Add([]byte(seed))
	}
	ss := fastRegistry(f)
	f.Fuzz(func(t *testing.T, doc []byte) {
		for _, s := range ss {
			checkSound(t, s, doc)
		}
	})
}

// FuzzExactFloat holds exactFloat to strconv.ParseFloat on every number it
// takes, bit for bit (the sign of zero included).
func FuzzExactFloat(f *testing.F) {
	for _, s := range []string{"0", "-0", "1", "12.50", "-0.000000000000001", "123456789012345", "1234567890123456", "0.1", "9007199254740993", "1e5", "99.99", "-12.340"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sc := scanner{doc: []byte(s)}
		ni, ok := sc.number()
		if !ok || ni.end != len(s) {
			return
		}
		got, ok := exactFloat([]byte(s))
		if !ok {
			return
		}
		want, err := strconv.ParseFloat(s, 64)
		if err != nil {
			t.Fatalf("ParseFloat(%q): %v", s, err)
		}
		if math.Float64bits(got) != math.Float64bits(want) {
			t.Fatalf("exactFloat(%q) = %v, ParseFloat %v", s, got, want)
		}
	})
}
