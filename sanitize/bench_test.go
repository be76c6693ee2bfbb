package sanitize

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/kaptinlin/jsonrepair"
)

// benchDoc builds a realistic extraction result of about n bytes: an invoice
// with line items.
func benchDoc(n int) string {
	var b strings.Builder
	b.WriteString(`{"invoice_id": "INV-2024-0042", "customer": {"name": "Ann Example", "email": "ann@example.com"}, "currency": "EUR", "items": [`)
	for i := 0; b.Len() < n-120; i++ {
		if i > 0 {
			b.WriteString(", ")
		}
		fmt.Fprintf(&b, `{"sku": "SKU-%05d", "description": "Widget, size %d \u00e9", "qty": %d, "unit_price": %d.%02d}`, i, i%7, i%5+1, 10+i%90, i%100)
	}
	b.WriteString(`], "total": 1234.56, "paid": false}`)
	return b.String()
}

// damaged turns a clean document into what a chatty model emits: a fence,
// trailing commas, prose after it. (Prose before the fence would make
// kaptinlin fail fast with an error instead of repairing: no comparison.)
func damaged(doc string) string {
	doc = strings.ReplaceAll(doc, `}, {`, `,}, {`)
	doc = strings.Replace(doc, `], "total"`, `,], "total"`, 1)
	return "```json\n" + doc + "\n```\nLet me know if you need anything else."
}

var benchInputs = func() []struct{ name, in string } {
	clean2k := benchDoc(2048)
	clean200k := benchDoc(200 * 1024)
	return []struct{ name, in string }{
		{"clean_2KB", clean2k},
		{"fenced_2KB", "```json\n" + clean2k + "\n```"},
		{"fenced_commas_prose_2KB", damaged(clean2k)},
		{"fenced_commas_prose_200KB", damaged(clean200k)},
		{"truncated_2KB", damaged(clean2k)[:len(damaged(clean2k))*2/3]},
	}
}()

func BenchmarkClean(b *testing.B) {
	for _, bi := range benchInputs {
		in := []byte(bi.in)
		b.Run(bi.name, func(b *testing.B) {
			b.SetBytes(int64(len(in)))
			b.ReportAllocs()
			for b.Loop() {
				_, _ = Clean(in)
			}
		})
	}
}

func BenchmarkKaptinlin(b *testing.B) {
	for _, bi := range benchInputs {
		b.Run(bi.name, func(b *testing.B) {
			b.SetBytes(int64(len(bi.in)))
			b.ReportAllocs()
			for b.Loop() {
				_, _ = jsonrepair.Repair(bi.in)
			}
		})
	}
}

func BenchmarkJSONValid(b *testing.B) {
	in := []byte(benchInputs[0].in)
	b.SetBytes(int64(len(in)))
	b.ReportAllocs()
	for b.Loop() {
		_ = json.Valid(in)
	}
}

// TestBenchInputs checks the benchmark inputs are what their names say.
func TestBenchInputs(t *testing.T) {
	t.Parallel()
	for _, bi := range benchInputs {
		res, err := Clean([]byte(bi.in))
		switch {
		case strings.HasPrefix(bi.name, "truncated"):
			if err == nil {
				t.Errorf("%s: want a refusal", bi.name)
			}
		case err != nil:
			t.Errorf("%s: %v", bi.name, err)
		case bi.name == "clean_2KB" && len(res.Stages) != 0:
			t.Errorf("%s: stages %q", bi.name, res.Stages)
		}
	}
}
