package htmlview_test

import (
	"fmt"
	"os"
	"strings"

	"github.com/llmpipeline/pipeline/internal/htmlview"
)

// A page set defines the skeleton's blocks and executes "page".
func Example() {
	t, err := htmlview.Parse(nil, os.DirFS("testdata"), "hello.html")
	if err != nil {
		fmt.Println(err)
		return
	}
	var b strings.Builder
	if err := t.ExecuteTemplate(&b, "page", hello{Text: "a < b", Version: "v1"}); err != nil {
		fmt.Println(err)
		return
	}
	page := b.String()
	fmt.Println(page[strings.Index(page, "<main>") : strings.Index(page, "</main>")+len("</main>")])
	// Output:
	// <main>
	// <p>a &lt; b</p>  <code class="version">v1</code> <code>(root)</code>
	// </main>
}
