package strict

import (
	"bytes"

	"github.com/llmpipeline/pipeline/internal/jsonorder"
)

// object is a JSON object whose members keep their order (property order
// is the order a strict answer is written in).
type object = jsonorder.Object

// decodeOrdered reads one JSON value (and nothing after it) with its
// objects' member order kept and its numbers as written.
func decodeOrdered(data []byte) (any, error) { return jsonorder.Decode(data, 10000) }

func writeJSON(b *bytes.Buffer, v any) error { return jsonorder.Write(b, v) }

func newObject() *object { return jsonorder.NewObject() }
