package ingest

import (
	"errors"
	"strings"
	"testing"
)

// TestJobIDsAsTheFieldHasThem: a job id may be a file name, a path, an
// email address, a URL or non-ASCII text; spaces, control and format
// characters, invalid UTF-8 and ids over 200 bytes are refused with the
// field named. A schema id stays a subject token.
func TestJobIDsAsTheFieldHasThem(t *testing.T) {
	job := func(id string) string {
		return `{"id":"` + id + `","schema":"invoice","input":"x"}`
	}
	for _, id := range []string{
		"inv-0001", "invoice_2024-03.pdf", "docs/2024/a.json", "user@example.com",
		"https://example.com/a?b=1#c", "façade-7", "請求書-7", "a.b*>", `C:\\scans\\7.tif`,
		strings.Repeat("é", 100), // 200 bytes
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
		"", "a b", `a\tb`, `a\nb`, `a\u0000b`, "a\u00a0b", "a\u200bb", "a\u202eb", "a\u007fb",
		strings.Repeat("é", 100) + "a", // 201 bytes
	} {
		_, err := ParseJob([]byte(job(id)))
		if !errors.Is(err, ErrInvalidJob) || !strings.Contains(err.Error(), `"id"`) {
			t.Errorf("ParseJob with id %q: %v, want an invalid job naming the id", id, err)
		}
	}
	if _, err := ParseJob([]byte("{\"id\":\"a\xffb\",\"schema\":\"invoice\",\"input\":\"x\"}")); !errors.Is(err, ErrInvalidJob) {
		t.Errorf("an id of invalid UTF-8: %v, want an invalid job", err)
	}
	if _, err := ParseJob([]byte(`{"id":"a","schema":"in.voice","input":"x"}`)); !errors.Is(err, ErrInvalidJob) || !strings.Contains(err.Error(), `"schema"`) {
		t.Errorf("a schema id with a dot: %v, want an invalid job naming the schema", err)
	}
}
