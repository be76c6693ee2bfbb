package broker

// Job ids and schema ids are what users name things with: file names,
// paths, e-mail addresses, URLs, "ticket.v2", "My Invoice". Neither is
// restricted to what NATS allows where it carries them; each is encoded
// there instead, so that an id valid before this encoding existed maps to
// the subject or key it always had:
//
//   - a schema id in a subject (pipeline.jobs.<schema>, pipeline.results.<schema>,
//     pipeline.dlq.<schema>): SchemaToken, a percent escape;
//   - a job id in the ledger's KV keys: ledger.Key, an =XX escape;
//   - a job id as Nats-Msg-Id, and in the names of payload objects (which the
//     Object Store base64-encodes itself): as it is.

import (
	"strings"
)

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

// SchemaOfSubject is the schema id the last token of subject stands for.
func SchemaOfSubject(subject string) string {
	return SchemaOfToken(LastToken(subject))
}

// LastToken is the last token of subject (all of it when it has one).
func LastToken(subject string) string {
	if i := strings.LastIndexByte(subject, '.'); i >= 0 {
		return subject[i+1:]
	}
	return subject
}
