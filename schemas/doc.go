// Package schemas loads and compiles JSON Schemas, validates model output
// against them into diagnostics a model can act on, and lints schemas for
// contradictions no output can satisfy.
//
// A schema's id is its file name without .json or .schema.json (1 to 255
// bytes of printable UTF-8, dots and spaces included: "ticket.v2", "My
// Invoice", see ValidID); its version is a short hash
// of its canonical text (keys sorted, no whitespace) and of the files it
// references, so outcomes recorded against different versions never mix.
// Validation uses github.com/santhosh-tekuri/jsonschema/v6 (draft 2020-12
// by default, formats asserted).
//
//	reg, err := schemas.Load(dir) // "" means the built-in examples
//	for _, ce := range reg.Broken() { ... } // files that did not load, and why
//	s, ok := reg.Get("invoice")
//	diags, omitted, err := s.Validate(doc, 20)
//	feedback := schemas.Lines(diags, omitted)
//	// - /line_items/0/unit_price: expected number > 0, got "12,50"
//
// The files of a directory reference each other (refs.go): they are
// resources under the directory's URL, so {"$ref": "address.json"} or
// "address.json#/$defs/line" resolves, and a file's $id is a second name
// for it. The compiler's loader serves those files only; a remote ref, a
// ref outside the directory or to a missing file is a *RefError naming the
// file and the ref. Before a file is parsed, its size and (with a
// streaming token reader) its nesting are checked against Config's limits
// (*LimitError). A file that does not load does not stop the others: the
// Registry lists it in Broken with its *CompileError.
//
// Diagnostics come from the validator's error tree: one per root cause
// (a failed anyOf/oneOf reports its best branch, not every branch), with a
// JSON Pointer to the failing field (for required and additionalProperties
// the property itself), what the schema expects, and the value received,
// sorted by path and capped. A compiled Schema is immutable and safe for
// concurrent use.
//
// Most documents a worker validates are valid, so Validate first tries a
// fast path (package schemas/internal/fastpath, which only this package
// imports): the schema compiled once more, from the general validator's
// compiled form, into a checker that walks the document's bytes in one
// pass without decoding it (about a fifteenth of the general validator's
// time on the 2 KB invoice, a few allocations instead of about a
// thousand). It only ever says "valid"; for anything else (an invalid
// document, or one it does not decide: patternProperties, multipleOf,
// uniqueItems over non-strings, an escaped property name, a number equal
// to an inexact bound) the general validator runs and writes the
// diagnostics. oneOf, not and if/then/else are decided when the other
// branches are plainly invalid (a discriminator's const, a wrong type, a
// missing required property): fastpath's reject.go proves invalidity with
// the mirror contract. FuzzFastPath and the differential tests there hold
// both halves to the general validator's verdicts.
//
// After the JSON Schema, Check runs the truth checks a schema may carry
// (truth.go): x-grounded strings must occur in the job's input (an Input,
// searched exactly, then after NFKC, case folding and white space
// collapse, linear in its size, ground.go), reporting where in code
// points (Grounding); x-rules are CEL expressions over an object, compiled
// with the schema through a vocabulary of the validator (rules.go, a cost
// limit per evaluation). Their failures are Diagnostics with keyword
// x-grounded or x-rules/<index>, so the heal loop treats them as schema
// failures:
//
//	diags, omitted, grounding, err := s.Check(doc, schemas.NewInput(job.Input), 20)
//
// CheckPart checks the answer to one chunk of a longer document: a rule
// that cannot be evaluated on it (a field another chunk reads) is left to
// the check of the merge. A nil Input grounds nothing (a job with files).
//
// Lint, LintRaw and LintDir report static contradictions (minimum above
// maximum, empty enum, a required property forbidden by
// additionalProperties: false, ...) with a path into the schema and a
// one-line suggestion.
package schemas
