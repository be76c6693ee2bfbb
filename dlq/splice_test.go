package dlq

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"
)

// payloads returns the payload Write stores for the message (spliced from
// it when DecodeOutcome kept it) and the payload of the same Outcome
// encoded with encoding/json (what Write stored before it spliced), both
// decoded as Get and Export read them.
func payloads(tb testing.TB, msg []byte) (spliced, encoded Outcome, kept bool) {
	tb.Helper()
	o, err := DecodeOutcome(msg)
	if err != nil {
		tb.Fatalf("DecodeOutcome(%s): %v", msg, err)
	}
	kept = o.src != nil
	read := func(o Outcome) Outcome {
		p := &preparer{ids: make(map[fpKey]fpVal)}
		p.enc = json.NewEncoder(&p.buf)
		p.enc.SetEscapeHTML(false)
		var r row
		if err := p.payload(&o, &r); err != nil {
			tb.Fatalf("payload: %v", err)
		}
		got, err := readPayload([]byte(r.body))
		if err != nil {
			tb.Fatalf("readPayload: %v", err)
		}
		return got
	}
	spliced = read(o)
	o.src = nil
	encoded = read(o)
	return spliced, encoded, kept
}

// TestPayloadSplicedMatchesEncoded holds the payload spliced from a message
// to the payload encoded from its Outcome: the same Outcome reads back.
func TestPayloadSplicedMatchesEncoded(t *testing.T) {
	t.Parallel()
	ok := outcome("ok-1", false, 1, t0)
	ok.Data = json.RawMessage(`{"total":12.5,"items":[{"sku":"a\"b","note":"caf\u00e9 \u2028 <&>"}]}`)
	healed := mixed(1)
	healed.Run = 2
	dead := realistic(7)
	dead.Reason = "quote \" and newline \n and unicode é, 日本, 🙂, nul-ish \u0001 and <html>&"
	dead.Hint = `back\slash \\ and \u escapes`
	dead.Trace = append(dead.Trace, dead.Trace[0], dead.Trace[1])
	dead.Trace[2].N, dead.Trace[3].N = 3, 4
	dead.Trace[3].Raw = "{\"total\": \"12\u00a0€\",\n\t\"x\": [1, 2]}\r\n"
	dead.Trace[3].DiagnosticsOmitted = 7
	dead.Trace[3].Diagnostics = []Diagnostic{diag("/a~1b/0", "pattern", "\"\\ud83d\\ude00\"")}
	invalid := outcome("bad", true, 0, t0)
	invalid.Class = "invalid_job"
	invalid.Job = json.RawMessage(`"not json {\"id\": 1}\n"`)
	spacy := outcome("spacy", false, 1, t0)
	spacy.Job = json.RawMessage("{\"id\": \"spacy\",\n  \"schema\" : \"invoice\", \"input\": \"a  b\\\"  c\", \"n\": [1 , 2]}")
	spacy.Data = json.RawMessage(`{ "total" : 1 }`)

	marshal := func(o Outcome) []byte {
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	indent := func(o Outcome) []byte {
		b, err := json.MarshalIndent(o, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tests := []struct {
		name string
		msg  []byte
		kept bool // whether the message itself is stored
	}{
		{"success, worker encoding", message(t, ok), true},
		{"success, data before job and trace", marshal(ok), true},
		{"healed replay", message(t, healed), true},
		{"dead letter, 4 attempts, escapes and unicode", message(t, dead), true},
		{"dead letter, indented", indent(dead), true},
		{"invalid job kept as a string", message(t, invalid), true},
		{"job and data with spaces", message(t, spacy), true},
		{"job with spaces, indented", indent(spacy), true},
		{"data first", []byte(`{"data":{"x":1},"job_id":"a","status":"succeeded","attempts":1,"job":{"id": "a"}}`), true},
		{"data only member after the id", []byte(`{"job_id":"a","status":"succeeded",  "data" : [1, 2] ,"attempts":1}`), true},
		{"data null", []byte(`{"job_id":"a","status":"succeeded","data":null}`), true},
		{"escaped data key", []byte(`{"job_id":"a","status":"succeeded","\u0064ata":{"x":1},"job":{"id":"a"}}`), true},
		{"empty arrays", []byte(`{"job_id":"a","status":"dead_lettered","trace":[{"n":1,"repairs":[],"diagnostics":[]}]}`), true},
		{"empty trace", []byte(`{"job_id":"a","status":"dead_lettered","trace":[]}`), true},
		{"nulls", []byte(`{"job_id":"a","status":"dead_lettered","class":null,"trace":[{"n":1,"raw":null,"repairs":null,"diagnostics":null}],"started_at":null}`), true},
		{"lone surrogates", []byte(`{"job_id":"a","status":"dead_lettered","reason":"\ud800\u0041 \udc00 \ud83d\ude00"}`), true},
		{"unknown member", []byte(`{"job_id":"a","status":"succeeded","api_key":"secret","data":{"x":1}}`), false},
		{"member in another case", []byte(`{"job_id":"a","status":"succeeded","Reason":"r"}`), false},
		{"unknown attempt member", []byte(`{"job_id":"a","status":"dead_lettered","trace":[{"n":1,"headers":{"authorization":"Bearer x"}}]}`), false},
		{"unknown diagnostic member", []byte(`{"job_id":"a","status":"dead_lettered","trace":[{"n":1,"diagnostics":[{"path":"/x","keyword":"type","secret":"s"}]}]}`), false},
		{"data twice", []byte(`{"job_id":"a","status":"succeeded","data":{"x":1},"data":{"x":2}}`), false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			spliced, encoded, kept := payloads(t, tc.msg)
			if kept != tc.kept {
				t.Errorf("message kept as the payload: %v, want %v", kept, tc.kept)
			}
			if !reflect.DeepEqual(spliced, encoded) {
				t.Errorf("spliced payload reads\n%+v\nencoded payload reads\n%+v", spliced, encoded)
			}
			if spliced.Data != nil {
				t.Errorf("payload kept the data: %s", spliced.Data)
			}
		})
	}
}

// TestPayloadOfChangedOutcome: an Outcome changed after DecodeOutcome is
// encoded, not spliced from its stale message.
func TestPayloadOfChangedOutcome(t *testing.T) {
	t.Parallel()
	msg := message(t, realistic(3))
	tests := []struct {
		name   string
		change func(o *Outcome)
	}{
		{"job id", func(o *Outcome) { o.JobID = "other" }},
		{"run", func(o *Outcome) { o.Run = 4 }},
		{"reason", func(o *Outcome) { o.Reason = "edited" }},
		{"finished at", func(o *Outcome) { o.FinishedAt = o.FinishedAt.Add(time.Second) }},
		{"job", func(o *Outcome) { o.Job = json.RawMessage(`{"id":"other"}`) }},
		{"trace", func(o *Outcome) { o.Trace = o.Trace[:1] }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o, err := DecodeOutcome(msg)
			if err != nil {
				t.Fatal(err)
			}
			tc.change(&o)
			want := o
			want.Data, want.src = nil, nil
			p := &preparer{ids: make(map[fpKey]fpVal)}
			p.enc = json.NewEncoder(&p.buf)
			p.enc.SetEscapeHTML(false)
			var r row
			if err := p.payload(&o, &r); err != nil {
				t.Fatal(err)
			}
			got, err := readPayload([]byte(r.body))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("payload reads\n%+v\nwant the changed outcome\n%+v", got, want)
			}
		})
	}
}

// TestWriteStoresSplicedPayload: the sink's path (DecodeOutcome, Write)
// and the rebuild's path (an Outcome built in memory) store transcripts
// that Get reads back the same, and no unknown member reaches the file.
func TestWriteStoresSplicedPayload(t *testing.T) {
	t.Parallel()
	sink, mem := openTemp(t), openTemp(t)
	var decoded, built []Outcome
	for i := 0; i < 40; i++ {
		o := mixed(i)
		msg := message(t, o)
		if i%10 == 3 { // an unknown member: encoded, not kept
			msg = append(bytes.TrimSuffix(msg, []byte("}")), `,"api_key":"sk-secret"}`...)
		}
		d, err := DecodeOutcome(msg)
		if err != nil {
			t.Fatal(err)
		}
		decoded = append(decoded, d)
		built = append(built, o)
	}
	write(t, sink, decoded...)
	write(t, mem, built...)
	for _, o := range built {
		a, err := sink.Get(t.Context(), o.JobID)
		if err != nil {
			t.Fatal(err)
		}
		b, err := mem.Get(t.Context(), o.JobID)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(a, b) {
			t.Errorf("%s: sink stored\n%+v\nrebuild stored\n%+v", o.JobID, a, b)
		}
	}
	rows, err := sink.r.Query(`SELECT body FROM payloads`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	for rows.Next() {
		var raw []byte
		if err := rows.Scan(&raw); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(raw), "sk-secret") || strings.Contains(string(raw), `"data"`) {
			t.Errorf("stored payload %s holds the secret or the data", raw)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}

// FuzzPayloadSplice: for any message DecodeOutcome accepts, the spliced
// payload reads back as the encoded one.
func FuzzPayloadSplice(f *testing.F) {
	f.Add(message(f, realistic(1)))
	f.Add(message(f, mixed(2)))
	f.Add([]byte(`{"job_id":"a","status":"succeeded","data":{"x":1},"job":{"id": "a"}}`))
	f.Add([]byte(`{"data":[],"job_id":"a","status":"succeeded"}`))
	f.Fuzz(func(t *testing.T, msg []byte) {
		o, err := DecodeOutcome(msg)
		if err != nil {
			return
		}
		for _, tm := range []time.Time{o.StartedAt, o.FinishedAt} {
			if tm.Year() < 0 || tm.Year() > 9999 || tm.Location() != time.UTC {
				return // encoding/json cannot encode it, or zones read back as new pointers
			}
		}
		spliced, encoded, _ := payloads(t, msg)
		if !reflect.DeepEqual(spliced, encoded) {
			t.Errorf("spliced payload reads\n%+v\nencoded payload reads\n%+v", spliced, encoded)
		}
	})
}
