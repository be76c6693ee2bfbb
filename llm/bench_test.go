package llm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"strconv"
	"testing"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	jsonv1 "github.com/go-json-experiment/json/v1"

	"github.com/llmpipeline/pipeline/heal"
	"github.com/llmpipeline/pipeline/schemas"
)

// BenchmarkOpenAIComplete is one client round trip against a local
// httptest server speaking the chat-completions format (keep-alive reuse).
func BenchmarkOpenAIComplete(b *testing.B) {
	for _, par := range []int{1, 64} {
		b.Run(fmt.Sprintf("inflight=%d", par), func(b *testing.B) {
			p := newProvider(b, openAIOK(`{"invoice_number": "INV-1", "total": 12.5}`, "stop"))
			o := newTestOpenAI(b, p.URL, func(c *Config) { c.Timeout = 10 * time.Second })
			req := testRequest()
			b.ReportAllocs()
			b.SetParallelism(par)
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := o.Complete(b.Context(), req); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

// BenchmarkOpenAICodec is the chat-completions request encoding and
// response decoding of one call, by encoding/json and by the json v2
// implementation in its encoding/json mode (Complete encodes with the first
// and decodes with the second, the faster of each), on what
// scripts/benchrun sends and receives: the heal loop's first turn for the
// built-in invoice schema (rules and schema in a 2.8 KB system turn, a
// 300-byte text) and an invoice of 1.5 KB as the answer.
func BenchmarkOpenAICodec(b *testing.B) {
	reg, err := schemas.Builtin()
	if err != nil {
		b.Fatal(err)
	}
	sc, ok := reg.Get("invoice")
	if !ok {
		b.Fatal("no built-in invoice schema")
	}
	text := "INVOICE INV-2024-0042 from Acme Tools GmbH, Hauptstrasse 5, 10115 Berlin, issued 2024-03-14, due 2024-04-13. " +
		"Bill to: Example Corp <billing@example.com>. 3 x Cordless drill @ 89.90 EUR; 1 x Drill bit set @ 24.50 EUR & " +
		"shipping 7.95 EUR. Total due: 302.15 EUR."
	body := openAIRequest{
		Model:       "gpt-4o-mini",
		Messages:    heal.Messages(heal.Task{JobID: "inv-42", Schema: sc, Input: text}),
		Temperature: new(0.7),
		Format:      &openAIFormat{Type: "json_object"},
	}
	// An invoice indented as the simulator writes it, with eight lines.
	items := make([]any, 8)
	for i := range items {
		items[i] = map[string]any{"description": "Cordless drill, 18 V, model " + strconv.Itoa(1000+i), "quantity": i + 1, "unit_price": 89.9, "amount": 89.9 * float64(i+1)}
	}
	raw, err := json.MarshalIndent(map[string]any{
		"invoice_number": "INV-2024-0042", "issue_date": "2024-03-14", "due_date": "2024-04-13", "currency": "EUR",
		"vendor":     map[string]any{"name": "Acme Tools GmbH", "address": "Hauptstrasse 5, 10115 Berlin", "email": "billing@acme.example", "vat_id": "DE123456789"},
		"line_items": items, "subtotal": 1887.9, "tax": 358.7, "total": 2246.6,
	}, "", "  ")
	if err != nil {
		b.Fatal(err)
	}
	answer := string(raw)
	resp := []byte(openAIOK(answer, "stop").body)
	if got, err := encodeOpenAIRequest(&body); err != nil {
		b.Fatal(err)
	} else if v2, _ := jsonv2.Marshal(body, jsonv1.DefaultOptionsV1()); !bytes.Equal(got, v2) {
		b.Fatalf("json v2 wrote\n%s\njson.Marshal\n%s", v2, got)
	}
	if got, f := parseOpenAIResponse(resp); f != nil || got.Content != answer {
		b.Fatalf("parseOpenAIResponse = %+v, %+v", got, f)
	}
	b.Logf("system %d B, user %d B, content %d B, response %d B",
		len(body.Messages[0].Content), len(body.Messages[1].Content), len(answer), len(resp))

	b.Run("encode/json-v2", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := jsonv2.Marshal(body, jsonv1.DefaultOptionsV1()); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("encode/encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := json.Marshal(body); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("decode/json-v2", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, f := parseOpenAIResponse(resp); f != nil {
				b.Fatal(f.message)
			}
		}
	})
	b.Run("decode/encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			var r openAIResponse
			if err := json.Unmarshal(resp, &r); err != nil {
				b.Fatal(err)
			}
		}
	})
}
