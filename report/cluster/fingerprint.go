package cluster

import (
	"crypto/sha256"
	"encoding/hex"
	"strconv"
	"strings"
)

// FingerprintVersion is the version of the rule that turns a diagnostic into
// a Fingerprint and an ID. It is stored with every cluster, so a change
// of the rule never silently regroups old data: bump it when PathPattern or
// the fields hashed by ID change.
const FingerprintVersion = 1

// Fingerprint identifies a kind of failure: which field of which schema
// version failed which keyword. Failures with the same fingerprint form a
// cluster in the report.
type Fingerprint struct {
	Schema  string `json:"schema"`
	Version string `json:"version"`
	// Path is a path pattern: a JSON Pointer with array indices as "*".
	Path    string `json:"path"`
	Keyword string `json:"keyword"`
}

// ID returns the short stable id of a fingerprint: 12 hex digits of
// the SHA-256 of the fingerprint version and the fields. Path is passed
// through PathPattern first, so a concrete pointer and its pattern give the
// same id.
func ID(fp Fingerprint) string {
	h := sha256.New()
	var buf [8]byte
	b := strconv.AppendInt(buf[:0], FingerprintVersion, 10)
	h.Write(b)
	for _, s := range [...]string{fp.Schema, fp.Version, PathPattern(fp.Path), fp.Keyword} {
		h.Write([]byte{0})
		h.Write([]byte(s))
	}
	var sum [sha256.Size]byte
	return hex.EncodeToString(h.Sum(sum[:0])[:6])
}

// PathPattern turns a JSON Pointer into a path pattern by replacing every
// array index (a segment of decimal digits) with "*":
// "/items/2/price" -> "/items/*/price". Other segments, escapes included,
// are kept as they are. An object key made only of digits is
// indistinguishable from an index here and becomes "*" too.
func PathPattern(pointer string) string {
	if !strings.ContainsAny(pointer, "0123456789") {
		return pointer
	}
	var b strings.Builder
	b.Grow(len(pointer))
	for i := 0; i < len(pointer); {
		if pointer[i] != '/' {
			// A pointer should start with "/"; keep whatever precedes it.
			j := strings.IndexByte(pointer[i:], '/')
			if j < 0 {
				b.WriteString(pointer[i:])
				break
			}
			b.WriteString(pointer[i : i+j])
			i += j
			continue
		}
		b.WriteByte('/')
		i++
		j := strings.IndexByte(pointer[i:], '/')
		if j < 0 {
			j = len(pointer) - i
		}
		seg := pointer[i : i+j]
		if isIndex(seg) {
			b.WriteByte('*')
		} else {
			b.WriteString(seg)
		}
		i += j
	}
	return b.String()
}

func isIndex(seg string) bool {
	if seg == "" {
		return false
	}
	for i := 0; i < len(seg); i++ {
		if seg[i] < '0' || seg[i] > '9' {
			return false
		}
	}
	return true
}
