// Package fastpath is the validator's fast path for valid documents: a
// JSON Schema that github.com/santhosh-tekuri/jsonschema/v6 compiled,
// compiled once more, from that compiled form, into a Checker that walks a
// document's bytes in one pass without decoding it. Package schemas tries
// it first in Schema.Validate; only schemas imports it.
//
// Most documents a worker validates are valid, and for them the general
// validator's cost (decoding the whole document into maps and
// json.Numbers, comparing every bound as a big.Rat) buys nothing but a nil.
//
//	fast := fastpath.Compile(compiled) // nil: the root uses a keyword it does not decide
//	if fast != nil && fast.Accept(doc) {
//		return nil // valid
//	}
//	// otherwise the general validator decides, and writes the diagnostics
//
// The contract is one-sided: Accept(doc) == true implies the general
// validator finds no error and schemas.Schema.Validate would return no
// diagnostic (the differential tests and FuzzFastPath hold it to that).
// false only means "not shown valid here": the document may be invalid, or
// use something the fast path does not decide (a keyword it does not
// implement, an escaped key, a number it cannot compare exactly, a oneOf
// whose other branches are not plainly invalid). Validate then runs the
// general validator, which produces the diagnostics. Nothing the fast path
// does can change a verdict, only skip work when the verdict is "valid".
//
// compile.go turns the compiled schema into nodes; walk.go checks values,
// objects and arrays against them; scalar.go reads strings and numbers in
// place; reject.go proves a branch invalid, with the mirror contract, so
// that oneOf, not and if/then/else are decided when the other branches are
// plainly invalid (a discriminator's const, a wrong type, a missing
// required property).
package fastpath
