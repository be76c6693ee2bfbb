package index

import (
	"bytes"
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/job"
)

// stored returns the payload Write stores for o, decoded as Get and Export
// read it.
func stored(tb testing.TB, o job.Outcome) job.Outcome {
	tb.Helper()
	p := &preparer{}
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

// lessData is what the payload of o reads back as: o without its data, its
// job compacted, its empty slices nil.
func lessData(tb testing.TB, o job.Outcome) job.Outcome {
	tb.Helper()
	o.Data = nil
	o.Job = compacted(tb, o.Job)
	if o.Trace != nil {
		o.Trace = append([]job.Attempt(nil), o.Trace...)
	}
	normalize(&o)
	return o
}

// TestPayloadReadsAsDecoded: the payload stored for a message, whatever its
// spelling, reads back as the message's Outcome less its data.
func TestPayloadReadsAsDecoded(t *testing.T) {
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
	dead.Trace[3].Diagnostics = []job.Diagnostic{diag("/a~1b/0", "pattern", "\"\\ud83d\\ude00\"")}
	invalid := outcome("bad", true, 0, t0)
	invalid.Class = "invalid_job"
	invalid.Job = json.RawMessage(`"not json {\"id\": 1}\n"`)
	spacy := outcome("spacy", false, 1, t0)
	spacy.Job = json.RawMessage("{\"id\": \"spacy\",\n  \"schema\" : \"invoice\", \"input\": \"a  b\\\"  c\", \"n\": [1 , 2]}")
	spacy.Data = json.RawMessage(`{ "total" : 1 }`)

	marshal := func(o job.Outcome) []byte {
		b, err := json.Marshal(o)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	indent := func(o job.Outcome) []byte {
		b, err := json.MarshalIndent(o, "", "  ")
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	tests := []struct {
		name string
		msg  []byte
	}{
		{"success, worker encoding", message(t, ok)},
		{"success, data before job and trace", marshal(ok)},
		{"healed replay", message(t, healed)},
		{"dead letter, 4 attempts, escapes and unicode", message(t, dead)},
		{"dead letter, indented", indent(dead)},
		{"invalid job kept as a string", message(t, invalid)},
		{"job and data with spaces", message(t, spacy)},
		{"job with spaces, indented", indent(spacy)},
		{"data first", []byte(`{"data":{"x":1},"job_id":"a","status":"succeeded","attempts":1,"job":{"id": "a"}}`)},
		{"data only member after the id", []byte(`{"job_id":"a","status":"succeeded",  "data" : [1, 2] ,"attempts":1}`)},
		{"data null", []byte(`{"job_id":"a","status":"succeeded","data":null}`)},
		{"escaped data key", []byte(`{"job_id":"a","status":"succeeded","\u0064ata":{"x":1},"job":{"id":"a"}}`)},
		{"empty arrays", []byte(`{"job_id":"a","status":"dead_lettered","trace":[{"n":1,"repairs":[],"diagnostics":[]}]}`)},
		{"empty trace", []byte(`{"job_id":"a","status":"dead_lettered","trace":[]}`)},
		{"nulls", []byte(`{"job_id":"a","status":"dead_lettered","class":null,"trace":[{"n":1,"raw":null,"repairs":null,"diagnostics":null}],"started_at":null}`)},
		{"lone surrogates", []byte(`{"job_id":"a","status":"dead_lettered","reason":"\ud800\u0041 \udc00 \ud83d\ude00"}`)},
		{"unknown member", []byte(`{"job_id":"a","status":"succeeded","api_key":"secret","data":{"x":1}}`)},
		{"member in another case", []byte(`{"job_id":"a","status":"succeeded","Reason":"r"}`)},
		{"unknown attempt member", []byte(`{"job_id":"a","status":"dead_lettered","trace":[{"n":1,"headers":{"authorization":"Bearer x"}}]}`)},
		{"unknown diagnostic member", []byte(`{"job_id":"a","status":"dead_lettered","trace":[{"n":1,"diagnostics":[{"path":"/x","keyword":"type","secret":"s"}]}]}`)},
		{"data twice", []byte(`{"job_id":"a","status":"succeeded","data":{"x":1},"data":{"x":2}}`)},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o, err := job.DecodeOutcome(tc.msg)
			if err != nil {
				t.Fatalf("DecodeOutcome(%s): %v", tc.msg, err)
			}
			got, want := stored(t, o), lessData(t, o)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("payload reads\n%+v\nwant\n%+v", got, want)
			}
			if got.Data != nil {
				t.Errorf("payload kept the data: %s", got.Data)
			}
		})
	}
}

// TestPayloadOfChangedOutcome: an Outcome changed after job.DecodeOutcome is
// stored as changed, not as its message was.
func TestPayloadOfChangedOutcome(t *testing.T) {
	t.Parallel()
	msg := message(t, realistic(3))
	tests := []struct {
		name   string
		change func(o *job.Outcome)
	}{
		{"job id", func(o *job.Outcome) { o.JobID = "other" }},
		{"run", func(o *job.Outcome) { o.Run = 4 }},
		{"reason", func(o *job.Outcome) { o.Reason = "edited" }},
		{"finished at", func(o *job.Outcome) { o.FinishedAt = o.FinishedAt.Add(time.Second) }},
		{"job", func(o *job.Outcome) { o.Job = json.RawMessage(`{"id":"other"}`) }},
		{"trace", func(o *job.Outcome) { o.Trace = o.Trace[:1] }},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			o, err := job.DecodeOutcome(msg)
			if err != nil {
				t.Fatal(err)
			}
			tc.change(&o)
			want := o
			want.Data = nil
			got := stored(t, o)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("payload reads\n%+v\nwant the changed outcome\n%+v", got, want)
			}
		})
	}
}

// TestWriteStoresDecodedPayload: the sink's path (job.DecodeOutcome, Write)
// and the rebuild's path (an Outcome built in memory) store transcripts
// that Get reads back the same, and no unknown member reaches the file.
func TestWriteStoresDecodedPayload(t *testing.T) {
	t.Parallel()
	sink, mem := openTemp(t), openTemp(t)
	var decoded, built []job.Outcome
	for i := 0; i < 40; i++ {
		o := mixed(i)
		msg := message(t, o)
		if i%10 == 3 { // an unknown member: never stored
			msg = append(bytes.TrimSuffix(msg, []byte("}")), `,"api_key":"sk-secret"}`...)
		}
		d, err := job.DecodeOutcome(msg)
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
		var raw string
		if err := rows.Scan(&raw); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(raw, "sk-secret") || strings.Contains(raw, `"data"`) {
			t.Errorf("stored payload %s holds the secret or the data", raw)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
}

// FuzzPayload: for any message job.DecodeOutcome accepts, the stored payload
// reads back as the decoded Outcome less its data.
func FuzzPayload(f *testing.F) {
	f.Add(message(f, realistic(1)))
	f.Add(message(f, mixed(2)))
	f.Add([]byte(`{"job_id":"a","status":"succeeded","data":{"x":1},"job":{"id": "a"}}`))
	f.Add([]byte(`{"data":[],"job_id":"a","status":"succeeded"}`))
	f.Fuzz(func(t *testing.T, msg []byte) {
		o, err := job.DecodeOutcome(msg)
		if err != nil {
			return
		}
		for _, tm := range []time.Time{o.StartedAt, o.FinishedAt} {
			if tm.Year() < 0 || tm.Year() > 9999 || tm.Location() != time.UTC {
				return // JSON cannot hold it, or zones read back as new pointers
			}
		}
		if got, want := stored(t, o), lessData(t, o); !reflect.DeepEqual(got, want) {
			t.Errorf("payload reads\n%+v\nwant\n%+v", got, want)
		}
	})
}
