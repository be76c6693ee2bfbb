package index

import (
	"bytes"
	"strings"
	"testing"
)

func TestWriteTranscript(t *testing.T) {
	t.Parallel()
	o := realistic(3)
	o.Trace[1].DiagnosticsOmitted = 4
	var buf bytes.Buffer
	if err := WriteTranscript(&buf, o); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	for _, want := range []string{
		o.JobID, "dead_lettered (exhausted)", "--- attempt 1: schema (temperature 0.70", "--- attempt 2: schema (temperature 0.50",
		"repairs: code_fence, trailing_comma", "  │ ```json", "/items/3/price [type]", `received "eur"`, "4 more diagnostics omitted",
		"  input:\n    │ Invoice INV-1", "  id      " + o.JobID + "\n",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("transcript lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "--- attempt"); n != len(o.Trace) {
		t.Errorf("%d attempts in the transcript, want %d", n, len(o.Trace))
	}
}

// TestTranscriptJobAsText: the job's input is shown as the text it is,
// with its line breaks and its < > as written, beside the job's other
// fields, not as one line of escaped JSON.
func TestTranscriptJobAsText(t *testing.T) {
	t.Parallel()
	o := realistic(1)
	o.Job = []byte(`{"id":"mail-1","schema":"ticket","input":"From: Ana \u003cana@example.com\u003e\nSubj: printer \u0026 scanner\n\nIt jams.","instructions":"dates as ISO","metadata":{"box":"support","n":1}}`)
	var buf bytes.Buffer
	if err := WriteTranscript(&buf, o); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	want := "--- job\n" +
		"  id            mail-1\n" +
		"  schema        ticket\n" +
		"  instructions  dates as ISO\n" +
		"  metadata      {\"box\":\"support\",\"n\":1}\n" +
		"  input:\n" +
		"    │ From: Ana <ana@example.com>\n" +
		"    │ Subj: printer & scanner\n" +
		"    │ \n" +
		"    │ It jams.\n"
	if !strings.Contains(out, want) {
		t.Errorf("transcript's job section is not\n%s\ngot:\n%s", want, out)
	}
	if strings.Contains(out, `\u003c`) || strings.Contains(out, `\n`) {
		t.Errorf("transcript shows the job as escaped JSON:\n%s", out)
	}
}

// TestTranscriptEscapesControls: ESC, BEL, NUL and CR written by a model
// (in its raw output, a diagnostic's path and received value, the job's
// input) reach the transcript as escapes, never as raw bytes.
func TestTranscriptEscapesControls(t *testing.T) {
	t.Parallel()
	o := realistic(2)
	o.Job = []byte(`{"id":"j","schema":"invoice","input":"line\u001b]0;owned\u0007\r\nnext\u0000"}`)
	o.Trace[0].Raw = "{\"\x1b[2Jkey\": \"v\a\r\x00\"}"
	o.Trace[0].Diagnostics[0].Path = "/\x1b[2Jkey"
	o.Trace[0].Diagnostics[0].Message = "additional property '\x1b[2Jkey' not allowed\r"
	o.Trace[0].Diagnostics[0].Received = "\"v\a\x00\""
	o.Reason = "bad \u202e fields"
	var buf bytes.Buffer
	if err := WriteTranscript(&buf, o); err != nil {
		t.Fatal(err)
	}
	out := buf.String()
	if i := strings.IndexAny(out, "\x1b\a\x00\r\u202e"); i >= 0 {
		t.Errorf("raw control character %q at byte %d of the transcript:\n%q", out[i], i, out)
	}
	for _, want := range []string{`/\x1b[2Jkey [`, `\x1b]0;owned\a\r`, `"v\a\r\x00"`, `bad \u202e fields`} {
		if !strings.Contains(out, want) {
			t.Errorf("transcript lacks %q:\n%s", want, out)
		}
	}
}
