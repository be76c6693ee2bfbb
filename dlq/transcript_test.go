package dlq

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
		`"input": "Invoice INV-1`,
	} {
		if !strings.Contains(out, want) {
			t.Errorf("transcript lacks %q:\n%s", want, out)
		}
	}
	if n := strings.Count(out, "--- attempt"); n != len(o.Trace) {
		t.Errorf("%d attempts in the transcript, want %d", n, len(o.Trace))
	}
}
