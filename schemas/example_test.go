package schemas_test

import (
	"fmt"

	"github.com/llmpipeline/pipeline/schemas"
)

func ExampleSchema_Validate() {
	reg, err := schemas.Builtin()
	if err != nil {
		panic(err)
	}
	s, _ := reg.Get("ticket")
	doc := []byte(`{"subject":"Cannot log in","priority":"hi","category":"account",
		"customer":{"name":"Ada","email":"ada(at)example.com"},"mood":"angry"}`)
	diags, omitted, err := s.Validate(doc, 20)
	if err != nil {
		panic(err) // doc is not JSON
	}
	fmt.Println(schemas.Lines(diags, omitted))
	// Output:
	// - /customer/email: expected string in format email (name@example.com), got "ada(at)example.com"
	// - /mood: property not allowed, remove it (allowed properties: category, customer, priority, product, subject, summary, tags)
	// - /priority: expected one of "low", "normal", "high", "urgent", got "hi"
}

func ExampleLintRaw() {
	raw := []byte(`{"type":"object","additionalProperties":false,"required":["id"],
		"properties":{"qty":{"type":"integer","minimum":10,"maximum":1}}}`)
	for _, f := range schemas.LintRaw("order", raw) {
		fmt.Printf("%s %s: %s\n", f.Path, f.Rule, f.Suggestion)
	}
	// Output:
	// /properties/qty/minimum minimum_above_maximum: swap or correct minimum and maximum
	// /required/0 required_forbidden: add "id" to properties, or remove it from required
}

func ExampleCompile() {
	s, err := schemas.Compile("point", []byte(`{"type": "object", "required": ["x", "y"]}`))
	if err != nil {
		panic(err)
	}
	fmt.Println(s.ID, string(s.Raw), len(s.Version))
	// Output: point {"required":["x","y"],"type":"object"} 12
}
