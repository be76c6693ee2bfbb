package schemas

import (
	"slices"
	"testing"
)

// TestCheckPart: on a part of a document, a rule that cannot be evaluated
// (a field the part does not have) is no diagnostic, where Check makes it
// one; a rule that evaluates to false and an ungrounded value are
// diagnostics for both.
func TestCheckPart(t *testing.T) {
	t.Parallel()
	s := mustCompile(t, "bill", `{"type":"object","properties":{"vendor":{"type":"string","x-grounded":true},
		"subtotal":{"type":"number"},"tax":{"type":"number"},"total":{"type":"number"}},
		"x-rules":[{"rule":"self.total == self.subtotal + self.tax","path":"/total"},{"rule":"!has(self.total) || self.total > 0.0"}]}`)
	in := NewInput("Sold by ACME. Subtotal 100.")
	tests := []struct {
		name       string
		doc        string
		whole      []string // Check's keywords
		part       []string // CheckPart's
		groundings int
	}{
		{name: "a field of another part", doc: `{"vendor":"ACME","subtotal":100}`, whole: []string{"x-rules/0"}, groundings: 1},
		{name: "a false rule", doc: `{"subtotal":100,"tax":19,"total":-1}`, whole: []string{"x-rules/0", "x-rules/1"}, part: []string{"x-rules/0", "x-rules/1"}},
		{name: "an ungrounded value", doc: `{"vendor":"Globex"}`, whole: []string{"x-grounded", "x-rules/0"}, part: []string{"x-grounded"}},
	}
	keywords := func(ds []Diagnostic) []string {
		var out []string
		for _, d := range ds {
			out = append(out, d.Keyword)
		}
		return out
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			whole, _, _, err := s.Check([]byte(tt.doc), in, 0)
			if err != nil {
				t.Fatal(err)
			}
			part, _, gs, err := s.CheckPart([]byte(tt.doc), in, 0)
			if err != nil {
				t.Fatal(err)
			}
			if got := keywords(whole); !slices.Equal(got, tt.whole) {
				t.Errorf("Check: %v, want %v", got, tt.whole)
			}
			if got := keywords(part); !slices.Equal(got, tt.part) {
				t.Errorf("CheckPart: %v, want %v", got, tt.part)
			}
			if len(gs) != tt.groundings {
				t.Errorf("CheckPart grounding %+v, want %d", gs, tt.groundings)
			}
		})
	}
}
