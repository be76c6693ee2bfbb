package report

import (
	"bytes"
	"fmt"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/index"
)

// TestMarkdownEscapesModelText: what the model wrote (a value received, a
// key that becomes a failing path) reaches the markdown report as text,
// never as markup: no <script> outside a code span, and a backtick in a
// key cannot close its code span.
func TestMarkdownEscapesModelText(t *testing.T) {
	st, err := index.Open(filepath.Join(t.TempDir(), "pipeline.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	const value = `"<script>alert(1)</script> **bold** [x](http://evil.example)"`
	path := "/`</code><script>alert(2)</script>"
	var outs []job.Outcome
	for i := range 4 {
		d := []job.Diagnostic{
			{Path: "/note", Keyword: "maxLength", Message: "too long", Received: value},
			{Path: path, Keyword: "additionalProperties", Message: "additional property <script>", Received: `1`},
		}
		outs = append(outs, job.Outcome{JobID: fmt.Sprintf("j-%d", i), Schema: "note", SchemaVersion: "v1", Status: job.StatusDeadLettered,
			Class: "exhausted", Reason: "heal attempts used up", Model: "sim", Attempts: 2,
			Trace:      []job.Attempt{{N: 1, Diagnostics: d}, {N: 2, Diagnostics: d}},
			FinishedAt: time.Unix(1_700_000_000+int64(i), 0)})
	}
	if err := st.Write(t.Context(), outs); err != nil {
		t.Fatal(err)
	}
	r, err := Build(t.Context(), st, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	if err := r.Render(&b, "markdown"); err != nil {
		t.Fatal(err)
	}
	md := b.String()
	if !strings.Contains(md, "alert(1)") || !strings.Contains(md, "alert(2)") {
		t.Fatalf("the report does not quote the values and paths at all:\n%s", md)
	}
	outside := regexp.MustCompile("`[^`\n]*`").ReplaceAllString(md, "")
	for _, bad := range []string{"<script", "</code", "**bold**", "[x](http"} {
		if strings.Contains(outside, bad) {
			t.Errorf("the markdown has %q outside code spans:\n%s", bad, md)
		}
	}
}
