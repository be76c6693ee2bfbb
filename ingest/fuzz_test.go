package ingest

import (
	"encoding/json"
	"errors"
	"reflect"
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
		if !validToken.MatchString(j.ID) || !validToken.MatchString(j.Schema) || j.Input == "" {
			t.Fatalf("accepted job with bad fields: %+v", j)
		}
		if strings.ContainsAny(j.Schema, ".*> ") {
			t.Fatalf("schema %q would break the subject", j.Schema)
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

// FuzzIsToken holds the byte loop to the regexp it replaces.
func FuzzIsToken(f *testing.F) {
	for _, s := range []string{"", "a", "job-1", "a b", "a.b", "x*", "é", strings.Repeat("a", 200), strings.Repeat("a", 201), "k:~@+=_-"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if got, want := isToken(s), validToken.MatchString(s); got != want {
			t.Fatalf("isToken(%q) = %v, regexp says %v", s, got, want)
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
