package ingest

import (
	"encoding/json"
	"errors"
	"reflect"
	"regexp"
	"strings"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
)

func FuzzParseJob(f *testing.F) {
	for _, s := range []string{
		`{"id":"a","schema":"invoice","input":"x"}`,
		`{"id":"a","schema":"invoice","input":"x","metadata":{"k":1}}`,
		`{"id":"a b","schema":"invoice","input":"x"}`,
		`{"id":"a","schema":"in.voice","input":"x"}`,
		`{"id":"a","schema":"invoice","input":"x"} {}`,
		`{"id":"a","schema":"invoice","input":"x","metadata":[1]}`,
		`not json`, ``, `null`, `{}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		j, err := ParseJob(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidJob) {
				t.Fatalf("error %v does not wrap ErrInvalidJob", err)
			}
			return
		}
		if !isJobID(j.ID) || !ValidSchemaID(j.Schema) || j.Input == "" {
			t.Fatalf("accepted job with bad fields: %+v", j)
		}
		if tok := SchemaToken(j.Schema); strings.ContainsAny(tok, ".*> \t\r\n") || SchemaOfToken(tok) != j.Schema {
			t.Fatalf("schema %q: token %q would break the subject or not read back", j.Schema, tok)
		}
	})
}

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

// FuzzParseJobMatchesUnmarshal holds ParseJob's decoding to
// encoding/json's: a job either decodes with both to the same Job, or is
// rejected by both.
func FuzzParseJobMatchesUnmarshal(f *testing.F) {
	for _, s := range []string{
		`{"id":"a","schema":"invoice","input":"x"}`,
		` {"id" : "a" , "schema":"invoice","input":"line\nnext \"q\" \\ \/ \b\f\r\t","instructions":""} `,
		`{"id":"a","schema":"invoice","input":"\u00e9\ud83d\ude00 \ud800 \udc00x \u12"}`,
		`{"id":"a","schema":"invoice","input":"x","metadata":{"k":1}}`,
		`{"id":"a","schema":"invoice","input":"x","metadata":null}`,
		`{"ID":"a","schema":"invoice","input":"x"}`,
		`{"i_d":"a","schema":"invoice","input":"x"}`,
		`{"id":null,"schema":"invoice","input":"x"}`,
		`{"id":"a","id":"b","schema":"invoice","input":"x"}`,
		`{"id":"a","Id":"b","schema":"invoice","input":"x"}`,
		`{"id":"a","schema":"invoice","input":"x"} {}`,
		"{\"id\":\"a\",\"schema\":\"invoice\",\"input\":\"\xff\"}",
		"{\"id\":\"a\",\"input\":\"é\x01\"}",
		`{}`, `{`, `{"id":"a",}`, `not json`, ``, `null`, `[1]`, `"s"`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var got Job
		gotErr := jsonv2.Unmarshal(data, &got, jobOptions())
		var want Job
		wantErr := json.Unmarshal(data, &want)
		if (gotErr == nil) != (wantErr == nil) {
			t.Fatalf("%q: ParseJob's decoding: %v, json.Unmarshal: %v", data, gotErr, wantErr)
		}
		if gotErr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("%q: ParseJob's decoding %+v, json.Unmarshal %+v", data, got, want)
		}
	})
}
