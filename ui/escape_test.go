package ui_test

import (
	"html"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/job"
)

// TestPagesEscapeModelText: a dead letter whose raw output, failing path,
// received value, reason and model hold <script> and </style> shows them
// as text on every page that quotes them, escaped once: the only script
// element is the console's own, there is no </style, and the page's text
// is what was written.
func TestPagesEscapeModelText(t *testing.T) {
	f := newFixture(t, nil)
	const hostile = `</style><script>alert(1)</script> &lt; & "q"`
	value := `"` + strings.ReplaceAll(hostile, `"`, `\"`) + `"`
	path := "/</style><script>alert(2)</script>"
	raw := `{"note": ` + value + `, "</style><script>alert(2)</script>": 1}`
	d := []job.Diagnostic{
		{Path: "/note", Keyword: "maxLength", Message: "too long </style>", Received: value},
		{Path: path, Keyword: "additionalProperties", Message: "additional property <script>", Received: `1`},
	}
	o := job.Outcome{JobID: "xss-1", Schema: "invoice", SchemaVersion: "v1aaaaaaaaaa", Status: job.StatusDeadLettered,
		Class: "exhausted", Reason: "heal attempts used up: " + hostile, Model: "sim</style>", Attempts: 2, Job: jobJSON("xss-1", "invoice"),
		Trace:     []job.Attempt{{N: 1, Raw: raw, Class: "schema", Diagnostics: d}, {N: 2, Raw: raw, Class: "schema", Diagnostics: d}},
		StartedAt: t0.Add(5 * time.Minute), FinishedAt: t0.Add(6 * time.Minute)}
	if err := f.st.Write(t.Context(), []job.Outcome{o}); err != nil {
		t.Fatal(err)
	}
	tags := regexp.MustCompile(`<[^>]*>`)
	for p, wants := range map[string][]string{
		"/dead-letters/xss-1":   {raw, path, value, "heal attempts used up: " + hostile, "sim</style>", "additional property <script>"},
		"/dead-letters":         {"heal attempts used up: " + hostile, "sim</style>"},
		"/clusters?version=all": {path, value},
	} {
		page := f.get(t, p, 200)
		lower := strings.ToLower(page)
		if n, own := strings.Count(lower, "<script"), strings.Count(lower, `<script src="/static/app.js" defer></script>`); n != own || own != 1 {
			t.Errorf("%s: %d <script elements, want only the console's own:\n%s", p, n, page)
		}
		if strings.Contains(lower, "</style") {
			t.Errorf("%s: a </style in the page:\n%s", p, page)
		}
		if strings.Contains(page, "&amp;lt;/style") || strings.Contains(page, "&amp;#") {
			t.Errorf("%s: model text escaped twice:\n%s", p, page)
		}
		text := html.UnescapeString(tags.ReplaceAllString(page, ""))
		for _, w := range wants {
			if !strings.Contains(text, w) {
				t.Errorf("%s: the page's text lacks %q as written", p, w)
			}
		}
	}
}
