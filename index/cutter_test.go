package index

import (
	"bytes"
	"encoding/json"
	"reflect"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/job"
)

// FuzzOutcomeRoundTrip: a message job.DecodeOutcome accepts encodes to one compact
// line that decodes to the same Outcome (data and job compacted).
func FuzzOutcomeRoundTrip(f *testing.F) {
	f.Add(message(f, realistic(1)))
	f.Add(message(f, mixed(2)))
	f.Add([]byte(`{"job_id":"a\u00e9\ud83d\ude00\ud800x","status":"succeeded","data":{"x":[1,{"y":"}"}]},"job":"q\"","run":2}`))
	f.Add([]byte(`{"job_id":"a","status":"dead_lettered","trace":[{"n":1,"temperature":-0.5e-3,"repairs":[],"diagnostics":[{"path":"/\\\"","keyword":null}]},{}],"started_at":"2025-03-01T12:00:00.5+02:00"}`))
	f.Add([]byte("{\"job_id\":\"a\",\"status\":\"succeeded\",\"data\":{\n \"x\" : 1.0 },\"job\" : [ 1 ,\n 2 ]}"))
	f.Fuzz(func(t *testing.T, msg []byte) {
		o, err := job.DecodeOutcome(msg)
		if err != nil {
			return
		}
		for _, tm := range []time.Time{o.StartedAt, o.FinishedAt} {
			if tm.Year() < 0 || tm.Year() > 9999 {
				return // JSON cannot hold it
			}
		}
		b, err := job.EncodeOutcome(&o)
		if err != nil {
			t.Fatalf("EncodeOutcome of a decoded outcome: %v", err)
		}
		if bytes.ContainsAny(b, "\n\r") {
			t.Fatalf("encoding spans lines: %s", b)
		}
		var cut memberCutter
		noData := o
		noData.Data = nil
		if wb, err := job.EncodeOutcome(&noData); err != nil {
			t.Fatalf("EncodeOutcome without data: %v", err)
		} else if cut, ok := cut.without(b, "data"); !ok || cut != string(wb) {
			t.Fatalf("payload cut from the message %v\n%s\nencoded\n%s", ok, cut, wb)
		}
		back, err := job.DecodeOutcome(b)
		if err != nil {
			t.Fatalf("DecodeOutcome(job.EncodeOutcome): %v\n%s", err, b)
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

// TestPayloadCutFromTheMessage: the payload the index cuts from a worker's
// message is, byte for byte, the one it would encode from the outcome, for
// data anywhere in the object or absent; what is not an object is not cut.
func TestPayloadCutFromTheMessage(t *testing.T) {
	t.Parallel()
	var cut memberCutter
	succeeded := outcome("job-1", false, 1, t0)
	succeeded.Data = json.RawMessage(`{"total":120.5,"note":"a\u2028b","items":[{"q":"}"}]}`)
	outs := []job.Outcome{realistic(1), mixed(2), succeeded, outcome("job-2", false, 3, t0, diag("/total", "type", `"1"`))}
	for _, o := range outs {
		msg, err := job.EncodeOutcome(&o)
		if err != nil {
			t.Fatal(err)
		}
		want := o
		want.Data = nil
		wantBody, err := job.EncodeOutcome(&want)
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
