package job

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/llmpipeline/pipeline/internal/broker"
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
		`{"id":"a","schema":"invoice","files":["r.png",{"path":"c.pdf","name":"C"},{"url":"data:image/png;base64,AA=="}]}`,
		`{"id":"a","schema":"invoice","files":[{"sha256":"x","media_type":"image/png"}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		j, err := Parse(data)
		if err != nil {
			if !errors.Is(err, ErrInvalid) {
				t.Fatalf("error %v does not wrap ErrInvalidJob", err)
			}
			return
		}
		if !isJobID(j.ID) || !ValidSchemaID(j.Schema) || (j.Input == "" && len(j.Files) == 0) {
			t.Fatalf("accepted job with bad fields: %+v", j)
		}
		if tok := broker.SchemaToken(j.Schema); strings.ContainsAny(tok, ".*> \t\r\n") || broker.SchemaOfToken(tok) != j.Schema {
			t.Fatalf("schema %q: token %q would break the subject or not read back", j.Schema, tok)
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
		`{"id":"a","schema":"invoice","files":["r.png",{"Path":"c.pdf","NAME":"C","path":"d.pdf"},{"url":"data:x"},null,3]}`,
		"{\"id\":\"a\",\"schema\":\"s\",\"files\":[\"r\xff.png\",{\"name\":\"\xfe\"}]}",
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
