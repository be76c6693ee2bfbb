package schemas

import _ "embed"

// A realistic invoice of about 2 KB, valid against the built-in invoice
// schema, and the same invoice with the mistakes models make.
var (
	//go:embed testdata/invoice_valid.json
	invoiceValid []byte
	//go:embed testdata/invoice_invalid.json
	invoiceInvalid []byte
)

// unionSchema has discriminated oneOf unions, not and if/then/else: the
// fast path's tests (schemas/internal/fastpath) and BenchmarkValidateUnion
// share it.
//
//go:embed testdata/union.json
var unionSchema string
