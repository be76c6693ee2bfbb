package strict

import (
	"encoding/json"
	"os"
	"testing"

	"github.com/llmpipeline/pipeline/llm/batchtest"
)

// ticketSchema (testdata/ticket.schema.json, shared with package llm's
// tests) is a schema as users write them: optional properties,
// keywords strict mode does not take (minLength, maxLength, uniqueItems,
// a format it does not know), a union written with oneOf, a $defs entry
// referred to, and an optional property that takes null itself.
var ticketSchema = readFile("testdata/ticket.schema.json")

func readFile(name string) string {
	b, err := os.ReadFile(name)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// TestStrictTransform: the strict form of each schema passes OpenAI's
// strict-mode check; a schema without one is sent as it is, strict false.
func TestStrictTransform(t *testing.T) {
	for _, tc := range []struct {
		name, schema string
		strict       bool
	}{
		{"optional scalar", `{"type":"object","properties":{"a":{"type":"integer","minimum":1}}}`, true},
		{"optional enum", `{"type":"object","properties":{"a":{"type":"string","enum":["x","y"]}}}`, true},
		{"optional const", `{"type":"object","properties":{"a":{"const":"x"}}}`, true},
		{"optional ref", `{"type":"object","properties":{"a":{"$ref":"#/definitions/d"}},"definitions":{"d":{"type":"object","properties":{"b":{"type":"string","maxLength":3}}}}}`, true},
		{"nested arrays of objects", `{"type":"object","required":["l"],"properties":{"l":{"type":"array","minItems":1,"items":{"type":"object","properties":{"x":{"type":"number"}},"additionalProperties":true}}}}`, true},
		{"one allOf", `{"type":"object","properties":{"a":{"allOf":[{"type":"string"}],"description":"d"}}}`, true},
		{"properties without type", `{"type":"object","properties":{"o":{"properties":{"p":{"type":"boolean"}}}}}`, true},
		{"untyped property", `{"type":"object","properties":{"a":{"description":"anything"}}}`, false},
		{"map", `{"type":"object","properties":{"m":{"type":"object","additionalProperties":{"type":"string"}}}}`, false},
		{"array root", `{"type":"array","items":{"type":"string"}}`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := Transform(OpenAI, json.RawMessage(tc.schema))
			if s.Strict != tc.strict {
				t.Fatalf("strict %v (%s), want %v", s.Strict, s.Why, tc.strict)
			}
			if !s.Strict {
				if string(s.JSON) != tc.schema {
					t.Errorf("sent %s, want the schema as it is", s.JSON)
				}
				return
			}
			var v any
			if err := json.Unmarshal(s.JSON, &v); err != nil {
				t.Fatal(err)
			}
			if msg := batchtest.StrictSchemaError("t", v); msg != "" {
				t.Errorf("refused: %s\n%s", msg, s.JSON)
			}
		})
	}
}

// FuzzStrictTransform: any schema text either has a strict form that
// OpenAI's check takes, or is sent as it is; mapping any answer back
// never fails, and a JSON answer stays JSON.
func FuzzStrictTransform(f *testing.F) {
	f.Add(ticketSchema, `{"subject":"abc","customer":{"name":"A","plan":null},"tags":null}`)
	f.Add(`{"type":"object","properties":{"a":{"allOf":[{"allOf":[{"type":"string"}]}]}}}`, `{"a":null}`)
	f.Add(`{"type":"object","properties":{"r":{"$ref":"#"}}}`, `{"r":{"r":{"r":null}}}`)
	f.Add(`{"type":"object","properties":{"a":{"type":"array","items":{"anyOf":[{"type":"object","properties":{"b":{"type":"string"}}},{"type":"null"}]}}}}`, `{"a":[{"b":null},null]}`)
	f.Fuzz(func(t *testing.T, schema, answer string) {
		s := Transform(OpenAI, json.RawMessage(schema))
		if !s.Strict {
			if string(s.JSON) != schema {
				t.Fatalf("not strict, but sent %s for %s", s.JSON, schema)
			}
			return
		}
		var v any
		if err := json.Unmarshal(s.JSON, &v); err != nil {
			t.Fatalf("strict form is not JSON: %v\n%s", err, s.JSON)
		}
		if msg := batchtest.StrictSchemaError("f", v); msg != "" {
			t.Fatalf("strict form refused: %s\n%s\nfrom %s", msg, s.JSON, schema)
		}
		out := s.Back.Answer(answer)
		if json.Valid([]byte(answer)) && !json.Valid([]byte(out)) {
			t.Fatalf("answer %s mapped to %s, not JSON", answer, out)
		}
	})
}
