// Package htmlview is what the operators' console (ui) and the static
// report (report's "html" format) share to make HTML: one page skeleton,
// the partials both draw (a cluster's flag, a schema version), the
// formatting helpers, and one stylesheet. Both render through html/template,
// so whatever a model, a job or a schema wrote reaches a page as text,
// escaped for where it stands.
//
// A page set starts from Parse, which holds the shared templates, and adds
// its own files. The skeleton ("page") calls the blocks a page set defines:
//
//	"title"   the text of <title>
//	"head"    what <head> loads or holds (the console links the
//	          stylesheet and its script; the report inlines CSS())
//	"top"     the header bar: brand, navigation, badges
//	"main"    the page's content
//	"footer"  below <main> (default: nothing)
//
//	t, err := htmlview.Parse(funcs, pages, "templates/layout.html", "templates/overview.html")
//	...
//	err = t.ExecuteTemplate(w, "page", data)
//
// The console serves the stylesheet as a file (Files, "style.css"); the
// report, one self-contained file that loads nothing, inlines it (CSS).
package htmlview
