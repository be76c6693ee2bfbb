package job_test

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"testing"

	"github.com/llmpipeline/pipeline/internal/jobtest"
	"github.com/llmpipeline/pipeline/job"
)

// TestDecodeOutcomeMatchesUnmarshal holds job.DecodeOutcome to what
// json.Unmarshal of the whole outcome gives.
func TestDecodeOutcomeMatchesUnmarshal(t *testing.T) {
	t.Parallel()
	ok := outcome("ok-1", false, 1, t0)
	ok.Data = json.RawMessage(`{"total":12.5,"items":[{"sku":"a\"b"}]}`)
	ok.Job = json.RawMessage(`{"id":"ok-1","schema":"invoice","input":"caf\u00e9 <x>"}`)
	ok.Run = 3
	dead := realistic(7)
	dead.Reason = "quote \" and newline \n and unicode é"
	tests := []struct {
		name string
		o    job.Outcome
	}{
		{"success with data and job", ok},
		{"realistic dead letter", dead},
		{"minimal", outcome("m", true, 0, t0)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			b, err := json.Marshal(tc.o)
			if err != nil {
				t.Fatal(err)
			}
			var want job.Outcome
			if err := json.Unmarshal(b, &want); err != nil {
				t.Fatal(err)
			}
			got, err := job.DecodeOutcome(b)
			if err != nil {
				t.Fatalf("job.DecodeOutcome: %v", err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("job.DecodeOutcome =\n%+v\nwant\n%+v", got, want)
			}
		})
	}
}

func TestDecodeOutcomeRejectsWrongTypes(t *testing.T) {
	t.Parallel()
	for _, in := range []string{
		`{"job_id":1,"status":"succeeded"}`,
		`{"job_id":"a","status":"succeeded","attempts":"2"}`,
		`{"job_id":"a","status":"succeeded","attempts":1.5}`,
		`{"job_id":"a","status":"succeeded","trace":{"n":1}}`,
		`{"job_id":"a","status":"succeeded","started_at":"yesterday"}`,
		`{"job_id":"a","status":"succeeded"} x`,
	} {
		t.Run(in, func(t *testing.T) {
			t.Parallel()
			if _, err := job.DecodeOutcome([]byte(in)); err == nil {
				t.Errorf("job.DecodeOutcome(%s) accepted it", in)
			}
		})
	}
}

func BenchmarkDecodeOutcome(b *testing.B) {
	o := realistic(1)
	o.Status = job.StatusSucceeded
	o.Data = json.RawMessage(`{"invoice_number":"INV-1","total":1250.5,"currency":"EUR","lines":[{"sku":"A-1","qty":2,"price":125.25},{"sku":"B-2","qty":1,"price":1000}]}`)
	msg, err := json.Marshal(o)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := job.DecodeOutcome(msg); err != nil {
			b.Fatal(err)
		}
	}
}

// TestDecodeOutcomeStringsOwnTheirBytes: the strings of a decoded outcome
// (escaped or not) do not change when the message's buffer is reused.
func TestDecodeOutcomeStringsOwnTheirBytes(t *testing.T) {
	t.Parallel()
	msg := []byte(`{"job_id":"plain","status":"dead_lettered","reason":"esc\"aped","trace":[{"n":1,"raw":"r\naw","repairs":["plain","e\tsc"],"diagnostics":[{"path":"/p","keyword":"k\u00e9"}]}]}`)
	o, err := job.DecodeOutcome(msg)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"plain", "esc\"aped", "r\naw", "plain", "e\tsc", "/p", "ké"}
	for i := range msg {
		msg[i] = 'x'
	}
	a := o.Trace[0]
	got := []string{o.JobID, o.Reason, a.Raw, a.Repairs[0], a.Repairs[1], a.Diagnostics[0].Path, a.Diagnostics[0].Keyword}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("after the buffer was overwritten: %q, want %q", got, want)
	}
}

// TestEncodeOutcomeCompact: whatever the model and the producer wrote, the
// encoding is one compact line, data and job spelled as they came (numbers
// too) less their whitespace, and it reads back (with encoding/json too)
// as the job.Outcome encoding/json's own encoding reads back as.
func TestEncodeOutcomeCompact(t *testing.T) {
	t.Parallel()
	pretty := outcome("pretty-1", false, 1, t0)
	pretty.Data = json.RawMessage("{\n  \"total\": 1.50,\n  \"big\": 1e400,\n  \"note\": \"line\\nbreak \u2028 <&>\",\n  \"items\": [\n    1,\n    2\n  ]\n}\n")
	pretty.Job = json.RawMessage("{\r\n\t\"id\": \"pretty-1\",\r\n\t\"schema\": \"invoice\",\r\n\t\"input\": \"a\\n  b\"\r\n}")
	pretty.Trace[0].Raw = "```json\n" + string(pretty.Data) + "```"
	dead := realistic(4)
	dead.Reason = "bad utf8 \xff and U+2029 \u2029"
	dead.Trace[0].Temperature = 1e-7
	for _, o := range []job.Outcome{pretty, dead, outcome("m", true, 0, t0)} {
		t.Run(o.JobID, func(t *testing.T) {
			t.Parallel()
			got, err := job.EncodeOutcome(&o)
			if err != nil {
				t.Fatal(err)
			}
			var compact bytes.Buffer
			if err := json.Compact(&compact, got); err != nil {
				t.Fatalf("not JSON: %v\n%s", err, got)
			}
			if !bytes.Equal(compact.Bytes(), got) || bytes.ContainsAny(got, "\n\r") || bytes.Contains(got, []byte("\u2028")) || bytes.Contains(got, []byte("\u2029")) {
				t.Errorf("not one compact line:\n%s", got)
			}
			if len(o.Data) > 0 && !bytes.Contains(got, []byte(`"total":1.50,"big":1e400`)) {
				t.Errorf("numbers of the data not kept as spelled:\n%s", got)
			}
			ref, err := json.Marshal(o)
			if err != nil {
				t.Fatal(err)
			}
			var a, b job.Outcome
			if err := json.Unmarshal(got, &a); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(ref, &b); err != nil {
				t.Fatal(err)
			}
			// encoding/json escapes <, > and & in the data too: the data
			// and the job are compared as the values they spell
			for _, raw := range [][2]*json.RawMessage{{&a.Data, &b.Data}, {&a.Job, &b.Job}} {
				if !reflect.DeepEqual(value(t, *raw[0]), value(t, *raw[1])) {
					t.Errorf("reads back %s, encoding/json's encoding %s", *raw[0], *raw[1])
				}
				*raw[0], *raw[1] = nil, nil
			}
			if !reflect.DeepEqual(a, b) {
				t.Errorf("reads back as\n%+v\nencoding/json's encoding as\n%+v", a, b)
			}
		})
	}
	bad := outcome("nan", true, 1, t0)
	bad.Trace[0].Temperature = math.NaN()
	if _, err := job.EncodeOutcome(&bad); err == nil {
		t.Errorf("job.EncodeOutcome encoded a NaN temperature")
	}
}

// value decodes raw as a JSON value, numbers as their text.
func value(tb testing.TB, raw json.RawMessage) any {
	tb.Helper()
	if raw == nil {
		return nil
	}
	d := json.NewDecoder(bytes.NewReader(raw))
	d.UseNumber()
	var v any
	if err := d.Decode(&v); err != nil {
		tb.Fatalf("decoding %s: %v", raw, err)
	}
	return v
}

var (
	t0        = jobtest.T0
	outcome   = jobtest.Outcome
	realistic = jobtest.Realistic
)
