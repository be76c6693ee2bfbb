package report

import (
	"bytes"
	"fmt"
	"html"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/index"
	"github.com/llmpipeline/pipeline/job"
)

// TestHTMLEscapesModelText: what a model wrote (its raw output, a value
// received, a key that becomes a failing path, a model name) and what a
// job carried (its id) reach the HTML report as text, escaped once: no
// <script> element, no </style> but the one closing the inline stylesheet,
// and the page's text is exactly what was written (nothing double-escaped).
func TestHTMLEscapesModelText(t *testing.T) {
	t.Parallel()
	st, err := index.Open(filepath.Join(t.TempDir(), "pipeline.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	const hostile = `</style><script>alert(1)</script> &lt; & "q" 'a'`
	value := `"` + strings.ReplaceAll(hostile, `"`, `\"`) + `"`
	path := "/</style><script>alert(2)</script>"
	var outs []job.Outcome
	for i := range 4 {
		d := []job.Diagnostic{
			{Path: "/note", Keyword: "maxLength", Message: "too long", Received: value},
			{Path: path, Keyword: "additionalProperties", Message: "additional property </style>", Received: `1`},
		}
		raw := `{"note": ` + value + `, "</style><script>alert(2)</script>": 1}`
		outs = append(outs, job.Outcome{JobID: fmt.Sprintf("<script>j-%d</script>", i), Schema: "note", SchemaVersion: "v1", Status: job.StatusDeadLettered,
			Class: "exhausted", Reason: "heal attempts used up: " + hostile, Model: fmt.Sprintf("sim</style>%d", i%2), Attempts: 2,
			Trace:      []job.Attempt{{N: 1, Raw: raw, Diagnostics: d}, {N: 2, Raw: raw, Diagnostics: d}},
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
	if err := r.Render(&b, "html"); err != nil {
		t.Fatal(err)
	}
	page := b.String()
	if n := strings.Count(strings.ToLower(page), "<script"); n != 0 {
		t.Errorf("the report has %d <script elements:\n%s", n, page)
	}
	if n := strings.Count(strings.ToLower(page), "</style"); n != 1 {
		t.Errorf("the report has %d </style, want the one closing the stylesheet:\n%s", n, page)
	}
	if strings.Contains(page, "&amp;lt;/style") || strings.Contains(page, "&amp;#") {
		t.Errorf("the report escapes model text twice:\n%s", page)
	}
	body := page[strings.Index(page, "</style>")+len("</style>"):]
	text := html.UnescapeString(regexp.MustCompile(`<[^>]*>`).ReplaceAllString(body, ""))
	for _, want := range []string{value, path, "<script>j-3</script>", "sim</style>1"} {
		if !strings.Contains(text, want) {
			t.Errorf("the report's text lacks %q as written:\n%s", want, text)
		}
	}
}
