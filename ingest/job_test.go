package ingest

import (
	"errors"
	"strings"
	"testing"
)

// TestJobIDsAsTheFieldHasThem: a job id may be any printable UTF-8 text
// of up to 512 bytes: a file name, a path, an email address, a URL, text
// with spaces inside; control and format characters, other spaces than
// U+0020, a space at either end, invalid UTF-8 and ids over 512 bytes are
// refused with the field named. A schema id may hold dots and spaces.
func TestJobIDsAsTheFieldHasThem(t *testing.T) {
	job := func(id string) string {
		return `{"id":"` + id + `","schema":"invoice","input":"x"}`
	}
	for _, id := range []string{
		"inv-0001", "invoice_2024-03.pdf", "docs/2024/a.json", "user@example.com", "ana@example.com",
		"https://example.com/a?b=1#c", "https://x.example/a?b=c", "façade-7", "請求書-7", "a.b*>", `C:\\scans\\7.tif`,
		"inv.2024/03 #7", "a b", ".", "..", "ünïcode", "%", "=3D", "a~r1",
		strings.Repeat("é", 256), // 512 bytes
		strings.Repeat("x", 512),
	} {
		j, err := ParseJob([]byte(job(id)))
		if err != nil {
			t.Errorf("ParseJob with id %q: %v", id, err)
			continue
		}
		if key := LedgerKey(j.ID); strings.ContainsAny(key, ".*> /\\") {
			t.Errorf("LedgerKey(%q) = %q: not one KV key token", j.ID, key)
		}
	}
	for _, id := range []string{
		"", " a", "a ", " ", `a\tb`, `a\nb`, `a\rb`, `a\u0000b`, `a\u001bb`, "a\u00a0b", "a\u200bb", "a\u202eb", "a\u007fb", "a\ufffdb",
		strings.Repeat("é", 256) + "a", // 513 bytes
		strings.Repeat("x", 513),
	} {
		_, err := ParseJob([]byte(job(id)))
		if !errors.Is(err, ErrInvalidJob) || !strings.Contains(err.Error(), `"id"`) {
			t.Errorf("ParseJob with id %q: %v, want an invalid job naming the id", id, err)
		}
	}
	if _, err := ParseJob([]byte(job(strings.Repeat("x", 513)))); err == nil || !strings.Contains(err.Error(), "513 bytes, over the limit of 512") {
		t.Errorf("a 513-byte id: %v, want its size and the limit", err)
	}
	if _, err := ParseJob([]byte("{\"id\":\"a\xffb\",\"schema\":\"invoice\",\"input\":\"x\"}")); !errors.Is(err, ErrInvalidJob) {
		t.Errorf("an id of invalid UTF-8: %v, want an invalid job", err)
	}
	for _, schema := range []string{"in.voice", "ticket.v2", "foo-1.0.0", "My Invoice", "請求書", "."} {
		if _, err := ParseJob([]byte(`{"id":"a","schema":"` + schema + `","input":"x"}`)); err != nil {
			t.Errorf("schema id %q: %v", schema, err)
		}
	}
	for _, schema := range []string{`a\tb`, "a\u202eb", strings.Repeat("s", 256)} {
		if _, err := ParseJob([]byte(`{"id":"a","schema":"` + schema + `","input":"x"}`)); !errors.Is(err, ErrInvalidJob) || !strings.Contains(err.Error(), `"schema"`) {
			t.Errorf("schema id %q: %v, want an invalid job naming the schema", schema, err)
		}
	}
}

// TestOldIDsKeepTheirSubjectsAndKeys: the ids a release before encoded ids
// accepted map to the subjects and ledger keys that release used, written
// out here as it wrote them, so a data dir it left reads the same; the new
// ids get subjects and keys of their own.
func TestOldIDsKeepTheirSubjectsAndKeys(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct{ schema, subject string }{
		{"invoice", "pipeline.jobs.invoice"},
		{"a_b-c:d~e@f+g=h", "pipeline.jobs.a_b-c:d~e@f+g=h"},
		{"=2E", "pipeline.jobs.=2E"},
		{"ticket.v2", "pipeline.jobs.ticket%2Ev2"},
		{"foo-1.0.0", "pipeline.jobs.foo-1%2E0%2E0"},
		{"My Invoice", "pipeline.jobs.My%20Invoice"},
		{"a%2Eb", "pipeline.jobs.a%252Eb"},
		{"*>", "pipeline.jobs.%2A%3E"},
		{"ü", "pipeline.jobs.%C3%BC"},
	} {
		if got := SchemaSubject(SubjectJobs, tc.schema); got != tc.subject {
			t.Errorf("SchemaSubject(%q) = %q, want %q", tc.schema, got, tc.subject)
		}
		if got := schemaOfSubject(tc.subject); got != tc.schema {
			t.Errorf("schemaOfSubject(%q) = %q, want %q", tc.subject, got, tc.schema)
		}
	}
	for _, tc := range []struct{ id, key string }{
		{"inv-0001", "inv-0001"},
		{"a:b~c@d+e=f", "a=3Ab=7Ec=40d=2Be=3Df"},
		{"user@example.com", "user=40example=2Ecom"},
		{"docs/2024/a.json", "docs=2F2024=2Fa=2Ejson"},
		{"façade", "fa=C3=A7ade"},
		{"inv.2024/03 #7", "inv=2E2024=2F03=20=237"},
		{"..", "=2E=2E"},
	} {
		if got := LedgerKey(tc.id); got != tc.key {
			t.Errorf("LedgerKey(%q) = %q, want %q", tc.id, got, tc.key)
		}
	}
	// Tokens another producer wrote that SchemaToken never would stand
	// for themselves.
	for _, tok := range []string{"a%zz", "a%2e", "a%", "a%4", "a%41"} {
		if got := SchemaOfToken(tok); got != tok {
			t.Errorf("SchemaOfToken(%q) = %q, want it unchanged", tok, got)
		}
	}
}
