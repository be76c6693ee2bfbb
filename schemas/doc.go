// Package schemas loads and compiles JSON Schemas, validates model output
// against them into diagnostics a model can act on, and lints schemas for
// contradictions no output can satisfy.
//
// A schema's id is its file name without .json or .schema.json; its
// version is a short hash of its canonical text (keys sorted, no
// whitespace), so outcomes recorded against different versions never mix.
// Validation uses github.com/santhosh-tekuri/jsonschema/v6 (draft 2020-12
// by default, formats asserted, no file or network references).
//
//	reg, err := schemas.Load(dir) // "" means the built-in examples
//	s, ok := reg.Get("invoice")
//	diags, omitted, err := s.Validate(doc, 20)
//	feedback := schemas.Lines(diags, omitted)
//	// - /line_items/0/unit_price: expected number > 0, got "12,50"
//
// Diagnostics come from the validator's error tree: one per root cause
// (a failed anyOf/oneOf reports its best branch, not every branch), with a
// JSON Pointer to the failing field (for required and additionalProperties
// the property itself), what the schema expects, and the value received,
// sorted by path and capped. A compiled Schema is immutable and safe for
// concurrent use.
//
// Lint, LintRaw and LintDir report static contradictions (minimum above
// maximum, empty enum, a required property forbidden by
// additionalProperties: false, ...) with a path into the schema and a
// one-line suggestion.
package schemas
