package ingest

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"
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

// FuzzParseJobFast holds the one-pass decoder to encoding/json: whatever
// it accepts, json.Unmarshal accepts and decodes to the same Job.
func FuzzParseJobFast(f *testing.F) {
	for _, s := range []string{
		`{"id":"a","schema":"invoice","input":"x"}`,
		` {"id" : "a" , "schema":"invoice","input":"line\nnext \"q\" \\ \/ \b\f\r\t","instructions":""} `,
		`{"id":"a","schema":"invoice","input":"\u00e9\ud83d\ude00 \ud800 \udc00x \u12"}`,
		`{"id":"a","schema":"invoice","input":"x","metadata":{"k":1}}`,
		`{"ID":"a","schema":"invoice","input":"x"}`,
		`{"id":null,"schema":"invoice","input":"x"}`,
		`{"id":"a","id":"b","schema":"invoice","input":"x"}`,
		`{"id":"a","schema":"invoice","input":"x"} {}`,
		"{\"id\":\"a\",\"schema\":\"invoice\",\"input\":\"\xff\"}",
		"{\"id\":\"a\",\"input\":\"é\x01\"}",
		`{}`, `{`, `{"id":"a",}`, `not json`, ``, `null`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		got, ok := parseJobFast(data)
		if !ok {
			return
		}
		var want Job
		if err := json.Unmarshal(data, &want); err != nil {
			t.Fatalf("parseJobFast accepted %q, json.Unmarshal: %v", data, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("parseJobFast(%q) = %+v, json.Unmarshal %+v", data, got, want)
		}
	})
}

// TestParseJobFastCovers: the shapes jobs have in practice take the fast
// path, and decode as encoding/json decodes them.
func TestParseJobFastCovers(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, data string
		fast       bool
	}{
		{"plain", `{"id":"a","schema":"invoice","input":"x"}`, true},
		{"escapes", `{"id":"a","schema":"invoice","input":"a\nb \"c\" \u00e9\ud83d\ude00","instructions":"be brief"}`, true},
		{"spaces", " {\n \"id\" : \"a\",\t\"schema\": \"invoice\", \"input\": \"ünïcode\" }\n", true},
		{"empty object", `{}`, true},
		{"metadata falls back", `{"id":"a","schema":"invoice","input":"x","metadata":{"k":1}}`, false},
		{"other case falls back", `{"Id":"a","schema":"invoice","input":"x"}`, false},
		{"null falls back", `{"id":"a","schema":null,"input":"x"}`, false},
		{"invalid utf8 falls back", "{\"id\":\"a\",\"schema\":\"invoice\",\"input\":\"\xff\"}", false},
		{"lone surrogate", `{"id":"a","schema":"invoice","input":"\ud800x"}`, true},
		{"trailing data", `{"id":"a","schema":"invoice","input":"x"}x`, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			got, ok := parseJobFast([]byte(tc.data))
			if ok != tc.fast {
				t.Fatalf("fast path %v, want %v", ok, tc.fast)
			}
			if !ok {
				return
			}
			var want Job
			if err := json.Unmarshal([]byte(tc.data), &want); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("got %+v, json.Unmarshal %+v", got, want)
			}
		})
	}
}
