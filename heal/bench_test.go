package heal

import (
	"context"
	"os"
	"testing"

	"github.com/llmpipeline/pipeline/model"
	"github.com/llmpipeline/pipeline/schemas"
)

// BenchmarkRun measures the loop's own per-job cost (prompt building,
// sanitizing, validating, heal turn) on the built-in invoice schema with a
// model that answers at once.
func BenchmarkRun(b *testing.B) {
	reg, err := schemas.Builtin()
	if err != nil {
		b.Fatal(err)
	}
	s, _ := reg.Get("invoice")
	valid, err := os.ReadFile("../schemas/testdata/invoice_valid.json")
	if err != nil {
		b.Fatal(err)
	}
	invalid, err := os.ReadFile("../schemas/testdata/invoice_invalid.json")
	if err != nil {
		b.Fatal(err)
	}
	task := Task{JobID: "bench", Schema: s, Input: "Invoice NB-2024-004217 from Nordlicht Bürobedarf GmbH ..."}
	for _, bc := range []struct {
		name    string
		answers [][]byte
	}{
		{"first_pass", [][]byte{valid}},
		{"fenced_first_pass", [][]byte{append(append([]byte("```json\n"), valid...), "\n```"...)}},
		{"healed_at_2", [][]byte{invalid, valid}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			model := model.Func(func(_ context.Context, req model.Request) (model.Response, error) {
				return model.Response{Content: string(bc.answers[req.Attempt-1]), FinishReason: model.FinishStop, Latency: 1}, nil
			})
			l, err := New(model, Config{MaxAttempts: 2, Temperature: 0.7, TemperatureStep: 0.2, TemperatureFloor: 0.1})
			if err != nil {
				b.Fatal(err)
			}
			b.ReportAllocs()
			for b.Loop() {
				if res := l.Run(context.Background(), task); !res.OK() {
					b.Fatalf("%s: %s", res.Class, res.Reason)
				}
			}
		})
	}
}
