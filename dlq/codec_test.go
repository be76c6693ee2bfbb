package dlq

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"testing"
	"time"
)

// TestDecodeOutcomeMatchesUnmarshal holds DecodeOutcome to what
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
		o    Outcome
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
			var want Outcome
			if err := json.Unmarshal(b, &want); err != nil {
				t.Fatal(err)
			}
			got, err := DecodeOutcome(b)
			if err != nil {
				t.Fatalf("DecodeOutcome: %v", err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("DecodeOutcome =\n%+v\nwant\n%+v", got, want)
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
			if _, err := DecodeOutcome([]byte(in)); err == nil {
				t.Errorf("DecodeOutcome(%s) accepted it", in)
			}
		})
	}
}

func BenchmarkDecodeOutcome(b *testing.B) {
	o := realistic(1)
	o.Status = StatusSucceeded
	o.Data = json.RawMessage(`{"invoice_number":"INV-1","total":1250.5,"currency":"EUR","lines":[{"sku":"A-1","qty":2,"price":125.25},{"sku":"B-2","qty":1,"price":1000}]}`)
	msg, err := json.Marshal(o)
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(msg)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeOutcome(msg); err != nil {
			b.Fatal(err)
		}
	}
}

// TestDecodeOutcomeStringsOwnTheirBytes: the strings of a decoded outcome
// (escaped or not) do not change when the message's buffer is reused.
func TestDecodeOutcomeStringsOwnTheirBytes(t *testing.T) {
	t.Parallel()
	msg := []byte(`{"job_id":"plain","status":"dead_lettered","reason":"esc\"aped","trace":[{"n":1,"raw":"r\naw","repairs":["plain","e\tsc"],"diagnostics":[{"path":"/p","keyword":"k\u00e9"}]}]}`)
	o, err := DecodeOutcome(msg)
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
// as the Outcome encoding/json's own encoding reads back as.
func TestEncodeOutcomeCompact(t *testing.T) {
	t.Parallel()
	pretty := outcome("pretty-1", false, 1, t0)
	pretty.Data = json.RawMessage("{\n  \"total\": 1.50,\n  \"big\": 1e400,\n  \"note\": \"line\\nbreak \u2028 <&>\",\n  \"items\": [\n    1,\n    2\n  ]\n}\n")
	pretty.Job = json.RawMessage("{\r\n\t\"id\": \"pretty-1\",\r\n\t\"schema\": \"invoice\",\r\n\t\"input\": \"a\\n  b\"\r\n}")
	pretty.Trace[0].Raw = "```json\n" + string(pretty.Data) + "```"
	dead := realistic(4)
	dead.Reason = "bad utf8 \xff and U+2029 \u2029"
	dead.Trace[0].Temperature = 1e-7
	for _, o := range []Outcome{pretty, dead, outcome("m", true, 0, t0)} {
		t.Run(o.JobID, func(t *testing.T) {
			t.Parallel()
			got, err := EncodeOutcome(&o)
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
			var a, b Outcome
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
	if _, err := EncodeOutcome(&bad); err == nil {
		t.Errorf("EncodeOutcome encoded a NaN temperature")
	}
}

// FuzzOutcomeRoundTrip: a message DecodeOutcome accepts encodes to one compact
// line that decodes to the same Outcome (data and job compacted).
func FuzzOutcomeRoundTrip(f *testing.F) {
	f.Add(message(f, realistic(1)))
	f.Add(message(f, mixed(2)))
	f.Add([]byte(`{"job_id":"a\u00e9\ud83d\ude00\ud800x","status":"succeeded","data":{"x":[1,{"y":"}"}]},"job":"q\"","run":2}`))
	f.Add([]byte(`{"job_id":"a","status":"dead_lettered","trace":[{"n":1,"temperature":-0.5e-3,"repairs":[],"diagnostics":[{"path":"/\\\"","keyword":null}]},{}],"started_at":"2025-03-01T12:00:00.5+02:00"}`))
	f.Add([]byte("{\"job_id\":\"a\",\"status\":\"succeeded\",\"data\":{\n \"x\" : 1.0 },\"job\" : [ 1 ,\n 2 ]}"))
	f.Fuzz(func(t *testing.T, msg []byte) {
		o, err := DecodeOutcome(msg)
		if err != nil {
			return
		}
		for _, tm := range []time.Time{o.StartedAt, o.FinishedAt} {
			if tm.Year() < 0 || tm.Year() > 9999 {
				return // JSON cannot hold it
			}
		}
		b, err := EncodeOutcome(&o)
		if err != nil {
			t.Fatalf("EncodeOutcome of a decoded outcome: %v", err)
		}
		if bytes.ContainsAny(b, "\n\r") {
			t.Fatalf("encoding spans lines: %s", b)
		}
		var cut memberCutter
		noData := o
		noData.Data = nil
		if wb, err := EncodeOutcome(&noData); err != nil {
			t.Fatalf("EncodeOutcome without data: %v", err)
		} else if cut, ok := cut.without(b, "data"); !ok || cut != string(wb) {
			t.Fatalf("payload cut from the message %v\n%s\nencoded\n%s", ok, cut, wb)
		}
		back, err := DecodeOutcome(b)
		if err != nil {
			t.Fatalf("DecodeOutcome(EncodeOutcome): %v\n%s", err, b)
		}
		o.Data, o.Job = compacted(t, o.Data), compacted(t, o.Job)
		normalize(&o)
		if !o.StartedAt.Equal(back.StartedAt) || !o.FinishedAt.Equal(back.FinishedAt) {
			t.Fatalf("times %v %v, read back %v %v", o.StartedAt, o.FinishedAt, back.StartedAt, back.FinishedAt)
		}
		back.StartedAt, back.FinishedAt = o.StartedAt, o.FinishedAt
		if !reflect.DeepEqual(o, back) {
			t.Errorf("decoded\n%+v\nread back\n%+v", o, back)
		}
	})
}

// compacted is raw without its whitespace (nil stays nil).
func compacted(tb testing.TB, raw json.RawMessage) json.RawMessage {
	tb.Helper()
	if raw == nil {
		return nil
	}
	var b bytes.Buffer
	if err := json.Compact(&b, raw); err != nil {
		tb.Fatalf("compacting %s: %v", raw, err)
	}
	return b.Bytes()
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

// TestPayloadCutFromTheMessage: the payload the index cuts from a worker's
// message is, byte for byte, the one it would encode from the outcome, for
// data anywhere in the object or absent; what is not an object is not cut.
func TestPayloadCutFromTheMessage(t *testing.T) {
	t.Parallel()
	var cut memberCutter
	succeeded := outcome("job-1", false, 1, t0)
	succeeded.Data = json.RawMessage(`{"total":120.5,"note":"a\u2028b","items":[{"q":"}"}]}`)
	outs := []Outcome{realistic(1), mixed(2), succeeded, outcome("job-2", false, 3, t0, diag("/total", "type", `"1"`))}
	for _, o := range outs {
		msg, err := EncodeOutcome(&o)
		if err != nil {
			t.Fatal(err)
		}
		want := o
		want.Data = nil
		wantBody, err := EncodeOutcome(&want)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := cut.without(msg, "data")
		if !ok || got != string(wantBody) {
			t.Errorf("job %s: cut %v\n%s\nwant\n%s", o.JobID, ok, got, wantBody)
		}
	}
	for _, tc := range []struct{ msg, want string }{
		{`{"data":{"a":1},"job_id":"x"}`, `{"job_id":"x"}`},
		{`{"data":[1,2]}`, `{}`},
		{`{"job_id":"x","data":"d"}`, `{"job_id":"x"}`},
		{`{"job_id":"x"}`, `{"job_id":"x"}`},
		{`{"job_id":"x","trace":[{"data":1}],"data":2,"run":1}`, `{"job_id":"x","trace":[{"data":1}],"run":1}`},
	} {
		got, ok := cut.without([]byte(tc.msg), "data")
		if !ok || got != tc.want {
			t.Errorf("without(%s) = %q, %v; want %q", tc.msg, got, ok, tc.want)
		}
		var v map[string]any
		if err := json.Unmarshal([]byte(got), &v); err != nil {
			t.Errorf("without(%s) = %s: not JSON: %v", tc.msg, got, err)
		}
	}
	for _, bad := range []string{``, `[1]`, `"data"`, `{"data":}`} {
		if got, ok := cut.without([]byte(bad), "data"); ok {
			t.Errorf("without(%q) = %q, ok; want not ok", bad, got)
		}
	}
}
