package broker

import (
	"regexp"
	"strings"
	"testing"
)

func FuzzRedactURL(f *testing.F) {
	for _, s := range []string{"nats://u:secret@h:1", "nats://h:1,nats://t0ken@h:2", "secret@h", "::"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		out := RedactURL(s)
		// Whatever stood before an '@' in a URL must be gone.
		for _, part := range strings.Split(s, ",") {
			part = strings.TrimSpace(part)
			at := strings.LastIndex(part, "@")
			if at <= 0 || strings.ContainsAny(part, "/?#%") {
				continue
			}
			secret := part[:at]
			if !strings.Contains("REDACTED", secret) && strings.Contains(out, secret+"@") {
				t.Fatalf("RedactURL(%q) = %q keeps %q", s, out, secret)
			}
		}
	})
}

// oldSchemaID is what a schema id could be before ids were encoded.
var oldSchemaID = regexp.MustCompile(`^[A-Za-z0-9_\-:~@+=]{1,200}$`)

// FuzzSchemaToken: a token is one subject token of plain bytes and %XX,
// reads back as the id, and is the id itself for an id of the old rule.
func FuzzSchemaToken(f *testing.F) {
	for _, s := range []string{"", "a", "job-1", "a b", "a.b", "x*", "é", "a%2Eb", "%", "%%", strings.Repeat("a", 200), "k:~@+=_-", "ticket.v2"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tok := SchemaToken(s)
		if SchemaOfToken(tok) != s {
			t.Fatalf("SchemaOfToken(SchemaToken(%q) = %q) = %q", s, tok, SchemaOfToken(tok))
		}
		if oldSchemaID.MatchString(s) && tok != s {
			t.Fatalf("SchemaToken(%q) = %q: an id of the old rule must keep its subject", s, tok)
		}
		for i := 0; i < len(tok); i++ {
			if c := tok[i]; !plainToken(c) && c != '%' {
				t.Fatalf("SchemaToken(%q) = %q holds %q", s, tok, c)
			}
		}
		// A token read as an id stands for one id only.
		if id := SchemaOfToken(s); id != s && SchemaToken(id) != s {
			t.Fatalf("SchemaOfToken(%q) = %q, which encodes as %q", s, id, SchemaToken(id))
		}
	})
}
