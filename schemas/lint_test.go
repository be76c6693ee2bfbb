package schemas

import (
	"slices"
	"strings"
	"testing"
)

func TestLintRaw(t *testing.T) {
	t.Parallel()
	type want struct{ path, rule string }
	tests := []struct {
		name   string
		schema string
		want   []want
	}{
		{"clean schema", `{"type":"object","required":["a"],"additionalProperties":false,"properties":{"a":{"type":"integer","minimum":0,"maximum":10}}}`, nil},
		{"minimum above maximum", `{"properties":{"n":{"minimum":10,"maximum":5}}}`,
			[]want{{"/properties/n/minimum", RuleMinAboveMax}}},
		{"exclusive bounds meet", `{"exclusiveMinimum":5,"maximum":5}`, []want{{"/exclusiveMinimum", RuleMinAboveMax}}},
		{"inclusive bounds meet are fine", `{"minimum":5,"maximum":5}`, nil},
		{"minimum vs exclusiveMaximum", `{"minimum":3,"exclusiveMaximum":3}`, []want{{"/minimum", RuleMinAboveMax}}},
		{"decimal bounds compared exactly", `{"minimum":0.30000000000000001,"maximum":0.3}`, []want{{"/minimum", RuleMinAboveMax}}},
		{"minLength above maxLength", `{"items":{"minLength":5,"maxLength":2}}`, []want{{"/items/minLength", RuleMinLengthAboveMax}}},
		{"minItems above maxItems", `{"$defs":{"l":{"minItems":3,"maxItems":1}}}`, []want{{"/$defs/l/minItems", RuleMinItemsAboveMax}}},
		{"minProperties above maxProperties", `{"minProperties":2,"maxProperties":1}`, []want{{"/minProperties", RuleMinPropsAboveMax}}},
		{"empty enum", `{"properties":{"c":{"enum":[]}}}`, []want{{"/properties/c/enum", RuleEmptyEnum}}},
		{"required forbidden by additionalProperties false",
			`{"type":"object","additionalProperties":false,"required":["a","b"],"properties":{"a":{}}}`,
			[]want{{"/required/1", RuleRequiredForbidden}}},
		{"required allowed by patternProperties",
			`{"additionalProperties":false,"required":["x_1"],"patternProperties":{"^x_":{}}}`, nil},
		{"required with a false schema", `{"required":["a"],"properties":{"a":false}}`,
			[]want{{"/required/0", RuleRequiredForbidden}}},
		{"required without additionalProperties false is fine", `{"required":["b"],"properties":{"a":{}}}`, nil},
		{"const not in enum", `{"const":"x","enum":["a","b"]}`, []want{{"/const", RuleConstNotInEnum}}},
		{"const in enum by number value", `{"const":1.0,"enum":[1,2]}`, nil},
		{"const of the wrong type", `{"type":"string","const":3}`, []want{{"/const", RuleConstType}}},
		{"no enum value of the type", `{"type":"integer","enum":["1","2"]}`, []want{{"/enum", RuleEnumType}}},
		{"some enum values of the wrong type", `{"type":"integer","enum":[1,2.5,"3"]}`, []want{{"/enum", RuleEnumType}}},
		{"integer-valued number is an integer", `{"type":"integer","enum":[1.0]}`, nil},
		{"nested in anyOf and items arrays",
			`{"anyOf":[{"minLength":3,"maxLength":1}],"prefixItems":[{"enum":[]}],"items":[{"minItems":2,"maxItems":1}]}`,
			[]want{{"/anyOf/0/minLength", RuleMinLengthAboveMax}, {"/items/0/minItems", RuleMinItemsAboveMax}, {"/prefixItems/0/enum", RuleEmptyEnum}}},
		{"not JSON", `{"type":`, []want{{"", RuleInvalidJSON}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := LintRaw("s", []byte(tt.schema))
			if len(got) != len(tt.want) {
				t.Fatalf("got %d findings, want %d: %v", len(got), len(tt.want), got)
			}
			for i, f := range got {
				if f.Path != tt.want[i].path || f.Rule != tt.want[i].rule {
					t.Errorf("finding %d = %s %s, want %s %s", i, f.Path, f.Rule, tt.want[i].path, tt.want[i].rule)
				}
				if f.Schema != "s" || f.Message == "" || f.Suggestion == "" || strings.Contains(f.Suggestion, "\n") {
					t.Errorf("finding %d incomplete: %+v", i, f)
				}
			}
		})
	}
}

func TestLintDir(t *testing.T) {
	t.Parallel()
	dir := writeFiles(t, map[string]string{
		"good.json":      `{"type":"object"}`,
		"bounds.json":    `{"minimum":2,"maximum":1}`,
		"noparse.json":   `{`,
		"nocompile.json": `{"type":"objekt"}`,
	})
	got, err := LintDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var rules []string
	for _, f := range got {
		rules = append(rules, strings.TrimPrefix(f.File, dir+"/")+":"+f.Rule)
		if !strings.HasPrefix(f.File, dir) {
			t.Errorf("finding without its file: %+v", f)
		}
	}
	want := []string{"bounds.json:" + RuleMinAboveMax, "nocompile.json:" + RuleCompile, "noparse.json:" + RuleInvalidJSON}
	if !slices.Equal(rules, want) {
		t.Errorf("findings = %v, want %v", rules, want)
	}
	// The registry's lint of schemas that compile agrees with LintRaw.
	r, err := Load(writeFiles(t, map[string]string{"b.json": `{"minItems":2,"maxItems":1}`}))
	if err != nil {
		t.Fatal(err)
	}
	fs := r.Lint()
	if len(fs) != 1 || fs[0].Rule != RuleMinItemsAboveMax || !strings.HasSuffix(fs[0].File, "b.json") {
		t.Errorf("Registry.Lint = %v", fs)
	}
	if s := fs[0].String(); !strings.Contains(s, "/minItems") || !strings.Contains(s, RuleMinItemsAboveMax) {
		t.Errorf("Finding.String = %q", s)
	}
}
