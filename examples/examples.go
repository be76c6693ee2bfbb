// Package examples holds the example jobs that `pipeline demo` submits:
// invoices, support tickets and shipment notices for the built-in schemas.
package examples

import _ "embed"

//go:embed jobs.jsonl
var jobs []byte

// Jobs returns the example jobs as JSONL.
func Jobs() []byte { return jobs }
