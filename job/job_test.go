package job_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/llmpipeline/pipeline/internal/ledger"
	"github.com/llmpipeline/pipeline/job"
)

// TestJobIDsAsTheFieldHasThem: a job id may be any printable UTF-8 text
// of up to 512 bytes: a file name, a path, an email address, a URL, text
// with spaces inside; control and format characters, other spaces than
// U+0020, a space at either end, invalid UTF-8 and ids over 512 bytes are
// refused with the field named. A schema id may hold dots and spaces.
func TestJobIDsAsTheFieldHasThem(t *testing.T) {
	jobJSON := func(id string) string {
		return `{"id":"` + id + `","schema":"invoice","input":"x"}`
	}
	for _, id := range []string{
		"inv-0001", "invoice_2024-03.pdf", "docs/2024/a.json", "user@example.com", "ana@example.com",
		"https://example.com/a?b=1#c", "https://x.example/a?b=c", "façade-7", "請求書-7", "a.b*>", `C:\\scans\\7.tif`,
		"inv.2024/03 #7", "a b", ".", "..", "ünïcode", "%", "=3D", "a~r1",
		strings.Repeat("é", 256), // 512 bytes
		strings.Repeat("x", 512),
	} {
		j, err := job.Parse([]byte(jobJSON(id)))
		if err != nil {
			t.Errorf("ParseJob with id %q: %v", id, err)
			continue
		}
		if key := ledger.Key(j.ID); strings.ContainsAny(key, ".*> /\\") {
			t.Errorf("LedgerKey(%q) = %q: not one KV key token", j.ID, key)
		}
	}
	for _, id := range []string{
		"", " a", "a ", " ", `a\tb`, `a\nb`, `a\rb`, `a\u0000b`, `a\u001bb`, "a\u00a0b", "a\u200bb", "a\u202eb", "a\u007fb", "a\ufffdb",
		strings.Repeat("é", 256) + "a", // 513 bytes
		strings.Repeat("x", 513),
	} {
		_, err := job.Parse([]byte(jobJSON(id)))
		if !errors.Is(err, job.ErrInvalid) || !strings.Contains(err.Error(), `"id"`) {
			t.Errorf("ParseJob with id %q: %v, want an invalid job naming the id", id, err)
		}
	}
	if _, err := job.Parse([]byte(jobJSON(strings.Repeat("x", 513)))); err == nil || !strings.Contains(err.Error(), "513 bytes, over the limit of 512") {
		t.Errorf("a 513-byte id: %v, want its size and the limit", err)
	}
	if _, err := job.Parse([]byte("{\"id\":\"a\xffb\",\"schema\":\"invoice\",\"input\":\"x\"}")); !errors.Is(err, job.ErrInvalid) {
		t.Errorf("an id of invalid UTF-8: %v, want an invalid job", err)
	}
	for _, schema := range []string{"in.voice", "ticket.v2", "foo-1.0.0", "My Invoice", "請求書", "."} {
		if _, err := job.Parse([]byte(`{"id":"a","schema":"` + schema + `","input":"x"}`)); err != nil {
			t.Errorf("schema id %q: %v", schema, err)
		}
	}
	for _, schema := range []string{`a\tb`, "a\u202eb", strings.Repeat("s", 256)} {
		if _, err := job.Parse([]byte(`{"id":"a","schema":"` + schema + `","input":"x"}`)); !errors.Is(err, job.ErrInvalid) || !strings.Contains(err.Error(), `"schema"`) {
			t.Errorf("schema id %q: %v, want an invalid job naming the schema", schema, err)
		}
	}
}

// BenchmarkParseJob decodes a realistic invoice job (about 300 bytes,
// escaped newlines in its input) by job.Parse (json v2, checks included)
// and by encoding/json.
func BenchmarkParseJob(b *testing.B) {
	data := []byte(`{"id":"bench-0000001","schema":"invoice","input":"INVOICE 2111-0118\nFrom: Acme Tools GmbH, 189 Market Street\nDate: 2026-01-03\n  1 x USB-C cable 2m @ 9.99 EUR = 9.99\nSubtotal 9.99\nVAT 20% 2.00\nTotal due 11.99 EUR\nPayment within 30 days."}`)
	b.Run("ParseJob", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			if _, err := job.Parse(data); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json.Unmarshal", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(data)))
		for b.Loop() {
			var j job.Job
			if err := json.Unmarshal(data, &j); err != nil {
				b.Fatal(err)
			}
		}
	})
}
