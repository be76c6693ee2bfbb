package secret

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"net/url"
	"slices"
	"strings"
	"sync"
)

// Mask replaces a secret.
const Mask = "[REDACTED]"

// MinLen is the shortest secret matched on its own.
const MinLen = 6

// Redactor replaces known secrets. The zero value and nil redact nothing.
// It is safe for concurrent use; Add and AddURL may run while others
// redact.
type Redactor struct {
	mu    sync.RWMutex
	forms []string // every form of every secret, longest first
	heads []string // the first MinClipped bytes of each longer form
	repl  *strings.Replacer
}

// New returns a Redactor for the given secrets (empty ones are ignored).
func New(secrets ...string) *Redactor {
	r := &Redactor{}
	r.Add(secrets...)
	return r
}

// Add registers secrets.
func (r *Redactor) Add(secrets ...string) {
	var forms []string
	for _, s := range secrets {
		if len(s) < MinLen {
			continue
		}
		forms = append(forms, variants(s)...)
	}
	r.addForms(forms)
}

// AddURL registers the credentials of each URL in a comma-separated list:
// the password (or a token given as the user), "user:password" and its
// HTTP Basic form, and the values of query parameters named for a
// credential (key, token, secret, sig, pass, auth). A URL with neither
// adds nothing.
func (r *Redactor) AddURL(list string) {
	var forms []string
	for _, raw := range strings.Split(list, ",") {
		u, err := url.Parse(strings.TrimSpace(raw))
		if err != nil {
			continue
		}
		// A key carried in the query (?key=..., ?sig=..., a gateway's token).
		for name, values := range u.Query() {
			if secretQuery(name) {
				for _, v := range values {
					if len(v) >= MinLen {
						forms = append(forms, variants(v)...)
					}
				}
			}
		}
		if u.User == nil {
			continue
		}
		user := u.User.Username()
		pass, hasPass := u.User.Password()
		if !hasPass {
			// nats://token@host: the user part is the token.
			if len(user) >= MinLen {
				forms = append(forms, variants(user)...)
			}
			continue
		}
		if len(pass) >= MinLen {
			forms = append(forms, variants(pass)...)
		}
		pair := user + ":" + pass
		forms = append(forms, variants(pair)...)
		forms = append(forms, base64.StdEncoding.EncodeToString([]byte(pair)))
		if esc := u.User.String(); esc != pair {
			forms = append(forms, esc) // as it stands in the URL text
		}
	}
	r.addForms(forms)
}

// secretQuery reports whether a URL query parameter's name says it holds
// a credential.
func secretQuery(name string) bool {
	n := strings.ToLower(name)
	for _, w := range []string{"key", "token", "secret", "sig", "pass", "auth", "credential"} {
		if strings.Contains(n, w) {
			return true
		}
	}
	return false
}

func (r *Redactor) addForms(forms []string) {
	if r == nil || len(forms) == 0 {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, f := range forms {
		if f != "" && !slices.Contains(r.forms, f) {
			r.forms = append(r.forms, f)
		}
	}
	// Longest first, so a form that contains another is replaced whole.
	slices.SortFunc(r.forms, func(a, b string) int { return len(b) - len(a) })
	pairs := make([]string, 0, 2*len(r.forms))
	for _, f := range r.forms {
		pairs = append(pairs, f, Mask)
	}
	// Then a secret cut short where a message clips a long value (the
	// validator's received values, the grounding message): its first
	// characters followed by the clip mark, longest first.
	r.heads = r.heads[:0]
	for _, f := range r.forms {
		if len(f) <= MinClipped {
			continue
		}
		r.heads = append(r.heads, f[:MinClipped])
		for k := len(f) - 1; k >= MinClipped; k-- {
			for _, mark := range clipMarks {
				pairs = append(pairs, f[:k]+mark, Mask+mark)
			}
		}
	}
	r.repl = strings.NewReplacer(pairs...)
}

// MinClipped is the shortest start of a secret masked where a clip mark
// cuts it (shorter starts say too little to mask in every answer).
const MinClipped = 12

// clipMarks end a value a message shortened: "..." (schemas' quoted
// values) and "…" (the received values of diagnostics).
var clipMarks = []string{"...", "…"}

// variants are the forms a secret takes in JSON, URLs and plain text.
func variants(s string) []string {
	out := []string{s}
	if b, err := json.Marshal(s); err == nil {
		out = append(out, string(b[1:len(b)-1]))
	}
	out = append(out, url.QueryEscape(s), url.PathEscape(s))
	return out
}

// Empty reports whether r knows no secret.
func (r *Redactor) Empty() bool {
	if r == nil {
		return true
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return len(r.forms) == 0
}

// String returns s with every secret replaced.
func (r *Redactor) String(s string) string {
	repl := r.replacer()
	if repl == nil {
		return s
	}
	return repl.Replace(s)
}

// Bytes returns b with every secret replaced: b itself when it holds none,
// otherwise a new slice (b is not modified).
func (r *Redactor) Bytes(b []byte) []byte {
	if !r.Contains(b) {
		return b
	}
	return []byte(r.String(string(b)))
}

// Contains reports whether b holds any secret in any form.
func (r *Redactor) Contains(b []byte) bool {
	if r == nil {
		return false
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	for _, f := range r.forms {
		if bytes.Contains(b, []byte(f)) {
			return true
		}
	}
	for _, h := range r.heads {
		if bytes.Contains(b, []byte(h)) { // maybe a secret cut short
			return true
		}
	}
	return false
}

func (r *Redactor) replacer() *strings.Replacer {
	if r == nil {
		return nil
	}
	r.mu.RLock()
	defer r.mu.RUnlock()
	return r.repl
}
