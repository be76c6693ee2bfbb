package ingest

// Job ids and schema ids are what users name things with: file names,
// paths, e-mail addresses, URLs, "ticket.v2", "My Invoice". Neither is
// restricted to what NATS allows where it carries them; each is encoded
// there instead, so that an id valid before this encoding existed maps to
// the subject or key it always had:
//
//   - a schema id in a subject (pipeline.jobs.<schema>, pipeline.results.<schema>,
//     pipeline.dlq.<schema>): SchemaToken, a percent escape;
//   - a job id in the ledger's KV keys: LedgerKey, an =XX escape;
//   - a job id as Nats-Msg-Id, and in the names of payload objects (which the
//     Object Store base64-encodes itself): as it is.

import (
	"fmt"
	"strings"
	"unicode"
	"unicode/utf8"
)

const (
	// MaxJobIDBytes bounds a job id.
	MaxJobIDBytes = 512
	// MaxSchemaIDBytes bounds a schema id: a file name's 255 bytes.
	MaxSchemaIDBytes = 255
)

// jobIDRule and schemaIDRule say what an id may be, for error messages.
const (
	jobIDRule    = "use 1-512 bytes of printable UTF-8, not beginning or ending with a space"
	schemaIDRule = "use 1-255 bytes of printable UTF-8"
)

// printable reports whether s is valid UTF-8 whose every character is
// printable in the sense of unicode.IsPrint (a letter, mark, number,
// punctuation, symbol or the ASCII space), and not U+FFFD, what invalid
// UTF-8 decodes to: two ids that differ in their invalid bytes would be one.
// Control and format characters (zero-width, bidirectional overrides) and
// other spaces than U+0020 are refused: they hide in logs and terminals,
// and a line break would end the Nats-Msg-Id header.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= utf8.RuneSelf {
			return printableUTF8(s[i:])
		} else if c < ' ' || c == 0x7f {
			return false
		}
	}
	return true
}

func printableUTF8(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) || r == utf8.RuneError {
			return false
		}
	}
	return true
}

// isJobID reports whether s can be a job id: 1 to MaxJobIDBytes bytes of
// printable UTF-8 (see printable), spaces inside included, so the ids batch
// inputs come with pass as they are: "inv-0001.pdf", "docs/2024/a.json",
// "ana@example.com", "https://x.example/a?b=c", "inv 7.pdf", "..". It may
// not begin or end with a space: NATS drops the spaces a header value
// begins with, so " a" would be deduplicated as "a", and no table shows
// the spaces a value ends with.
func isJobID(s string) bool {
	return len(s) >= 1 && len(s) <= MaxJobIDBytes && s[0] != ' ' && s[len(s)-1] != ' ' && printable(s)
}

// ValidSchemaID reports whether id can be a schema id: 1 to
// MaxSchemaIDBytes bytes of printable UTF-8 (see printable), dots and
// spaces included ("ticket.v2", "foo-1.0.0", "My Invoice").
func ValidSchemaID(id string) bool {
	return len(id) >= 1 && len(id) <= MaxSchemaIDBytes && printable(id)
}

// plainToken reports whether c stands for itself in a SchemaToken: the
// characters a schema id was limited to before ids were encoded.
func plainToken(c byte) bool {
	switch {
	case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		return true
	case c == '_', c == '-', c == ':', c == '~', c == '@', c == '+', c == '=':
		return true
	}
	return false
}

// SchemaToken is the subject token that stands for a schema id: every byte
// outside A-Z a-z 0-9 _ - : ~ @ + = is written %XX (uppercase hex), '%'
// included. NATS subjects cannot hold spaces, '.' (the token separator),
// '*' or '>'; the escape is injective, and leaves a schema id of those
// characters (all a schema id could be before) as it is, so a data dir of
// an earlier release keeps its subjects: "invoice" is "invoice",
// "ticket.v2" is "ticket%2Ev2", "My Invoice" is "My%20Invoice".
func SchemaToken(schemaID string) string {
	i := 0
	for i < len(schemaID) && plainToken(schemaID[i]) {
		i++
	}
	if i == len(schemaID) {
		return schemaID
	}
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	b.Grow(len(schemaID) + 16)
	b.WriteString(schemaID[:i])
	for ; i < len(schemaID); i++ {
		if c := schemaID[i]; plainToken(c) {
			b.WriteByte(c)
		} else {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&0xf])
		}
	}
	return b.String()
}

// SchemaOfToken is the schema id a subject token stands for, SchemaToken
// undone. A token SchemaToken cannot have written (a message another
// producer published on pipeline.jobs.a%zz, say) stands for itself.
func SchemaOfToken(token string) string {
	if !strings.Contains(token, "%") {
		return token
	}
	var b strings.Builder
	b.Grow(len(token))
	for i := 0; i < len(token); i++ {
		c := token[i]
		if c != '%' {
			b.WriteByte(c)
			continue
		}
		if i+2 >= len(token) {
			return token
		}
		hi, ok1 := unhex(token[i+1])
		lo, ok2 := unhex(token[i+2])
		if !ok1 || !ok2 {
			return token
		}
		b.WriteByte(hi<<4 | lo)
		i += 2
	}
	if id := b.String(); SchemaToken(id) == token {
		return id
	}
	return token
}

// unhex reads one uppercase hex digit.
func unhex(c byte) (byte, bool) {
	switch {
	case '0' <= c && c <= '9':
		return c - '0', true
	case 'A' <= c && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// SchemaSubject is the subject of schema on the stream whose subjects are
// prefix.> (SubjectJobs, SubjectResults, SubjectDLQ).
func SchemaSubject(prefix, schemaID string) string {
	return prefix + "." + SchemaToken(schemaID)
}

// schemaOfSubject is the schema id the last token of subject stands for.
func schemaOfSubject(subject string) string {
	return SchemaOfToken(lastToken(subject))
}

// jobIDError says why id is not a job id.
func jobIDError(id string) string {
	if len(id) > MaxJobIDBytes {
		return fmt.Sprintf("field \"id\" is %d bytes, over the limit of %d: %s", len(id), MaxJobIDBytes, jobIDRule)
	}
	return fmt.Sprintf("field \"id\" %q: %s", id, jobIDRule)
}
