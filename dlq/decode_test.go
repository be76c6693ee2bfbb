package dlq

import (
	"encoding/json"
	"reflect"
	"testing"
	"time"
	"unicode/utf8"
)

// TestDecodeOutcomeMatchesUnmarshal holds DecodeOutcome's in-place reading
// to what json.Unmarshal of the whole outcome gives.
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
			if got.src == nil {
				t.Errorf("DecodeOutcome kept no source of a message the Outcome fully holds")
			}
			got.src = nil
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

// FuzzDecodeOutcomeMatchesUnmarshal: a message DecodeOutcome accepts and
// keeps (every member one of the Outcome's, none twice), in valid UTF-8,
// decodes as json.Unmarshal decodes it.
func FuzzDecodeOutcomeMatchesUnmarshal(f *testing.F) {
	f.Add(message(f, realistic(1)))
	f.Add(message(f, mixed(2)))
	f.Add([]byte(`{"job_id":"a\u00e9\ud83d\ude00\ud800x","status":"succeeded","data":{"x":[1,{"y":"}"}]},"job":"q\"","run":2}`))
	f.Add([]byte(`{"job_id":"a","status":"dead_lettered","trace":[{"n":1,"temperature":-0.5e-3,"repairs":[],"diagnostics":[{"path":"/\\\"","keyword":null}]},{}],"started_at":"2025-03-01T12:00:00.5+02:00"}`))
	f.Fuzz(func(t *testing.T, msg []byte) {
		got, err := DecodeOutcome(msg)
		if err != nil || got.src == nil || !utf8.Valid(msg) {
			return
		}
		var want Outcome
		if err := json.Unmarshal(msg, &want); err != nil {
			t.Fatalf("DecodeOutcome accepted what json.Unmarshal rejects (%v): %s", err, msg)
		}
		got.src = nil
		for _, p := range [][2]*time.Time{{&got.StartedAt, &want.StartedAt}, {&got.FinishedAt, &want.FinishedAt}} {
			if !p[0].Equal(*p[1]) {
				t.Fatalf("time %v, json.Unmarshal %v", *p[0], *p[1])
			}
			*p[0] = *p[1] // zones read twice are equal, not the same pointer
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("DecodeOutcome =\n%+v\njson.Unmarshal =\n%+v", got, want)
		}
	})
}
