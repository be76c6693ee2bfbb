package htmlview_test

import (
	"bytes"
	"html/template"
	"io/fs"
	"os"
	"strings"
	"testing"

	"github.com/llmpipeline/pipeline/internal/htmlview"
)

type cluster struct {
	Impossible, Masked bool
	Reason             string
}

type hello struct {
	CSS     template.CSS
	Text    string
	Cluster cluster
	Version string
}

// TestPage: a page set's blocks fill the skeleton, the partials draw, and
// text is escaped once where it stands (in the page, in a title attribute).
func TestPage(t *testing.T) {
	tm, err := htmlview.Parse(nil, os.DirFS("testdata"), "hello.html")
	if err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	err = tm.ExecuteTemplate(&b, "page", hello{CSS: "p{color:red}", Text: `</style><script>x</script>`,
		Cluster: cluster{Masked: true, Reason: `"><script>`}, Version: "0123456789ab"})
	if err != nil {
		t.Fatal(err)
	}
	page := b.String()
	for _, want := range []string{"<!doctype html>", "<title>Hello</title>", "<style>p{color:red}</style>", `<header class="top">`,
		"<p>&lt;/style&gt;&lt;script&gt;x&lt;/script&gt;</p>", `<span class="flag masked" title="&#34;&gt;&lt;script&gt;">masked</span>`,
		`<code class="version">01234567</code>`, "<code>(root)</code>", "<main>", "</html>"} {
		if !strings.Contains(page, want) {
			t.Errorf("page lacks %q:\n%s", want, page)
		}
	}
	if strings.Contains(page, "<script") {
		t.Errorf("page has a script element:\n%s", page)
	}
}

// TestStylesheetLoadsNothing: the report inlines the stylesheet into a file
// that must load nothing and must not close its <style> early; the console
// serves the same bytes.
func TestStylesheetLoadsNothing(t *testing.T) {
	css := strings.ToLower(string(htmlview.CSS()))
	for _, bad := range []string{"url(", "@import", "http:", "https:", "</style", "<script", "src="} {
		if strings.Contains(css, bad) {
			t.Errorf("the stylesheet holds %q", bad)
		}
	}
	served, err := fs.ReadFile(htmlview.Files(), "style.css")
	if err != nil || string(served) != string(htmlview.CSS()) {
		t.Errorf("Files' style.css (%v) is not CSS()", err)
	}
}
