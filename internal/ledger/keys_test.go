package ledger

import (
	"testing"

	"github.com/llmpipeline/pipeline/internal/broker"
)

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
		if got := broker.SchemaSubject(broker.SubjectJobs, tc.schema); got != tc.subject {
			t.Errorf("SchemaSubject(%q) = %q, want %q", tc.schema, got, tc.subject)
		}
		if got := broker.SchemaOfSubject(tc.subject); got != tc.schema {
			t.Errorf("broker.SchemaOfSubject(%q) = %q, want %q", tc.subject, got, tc.schema)
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
		if got := Key(tc.id); got != tc.key {
			t.Errorf("LedgerKey(%q) = %q, want %q", tc.id, got, tc.key)
		}
	}
	// Tokens another producer wrote that SchemaToken never would stand
	// for themselves.
	for _, tok := range []string{"a%zz", "a%2e", "a%", "a%4", "a%41"} {
		if got := broker.SchemaOfToken(tok); got != tok {
			t.Errorf("SchemaOfToken(%q) = %q, want it unchanged", tok, got)
		}
	}
}
