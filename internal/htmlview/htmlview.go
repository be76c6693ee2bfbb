package htmlview

import (
	"embed"
	"fmt"
	"html/template"
	"io/fs"
	"time"
)

//go:embed style.css templates/*.html
var files embed.FS

// Files holds the shared stylesheet at "style.css" (beside the shared
// templates), for a server to serve.
func Files() fs.FS { return files }

// CSS is the shared stylesheet, for a page that inlines it in <style>.
func CSS() template.CSS {
	b, _ := files.ReadFile("style.css") // embedded above
	return template.CSS(b)
}

// Funcs are the formatting helpers the shared templates use; a page set
// may add its own (Parse).
func Funcs() template.FuncMap {
	return template.FuncMap{
		// short is a version hash (or any id) cut to its first 8 bytes.
		"short": Short,
		// path is a failing instance path, "(root)" for the empty one.
		"path": Path,
		// ts is a time as a reader reads it, in UTC; "-" when unset.
		"ts": func(t time.Time) string {
			if t.IsZero() {
				return "-"
			}
			return t.UTC().Format(TimeLayout)
		},
		// iso is a time as a machine reads it (a datetime attribute).
		"iso": func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	}
}

// TimeLayout is how the pages print a time for a reader.
const TimeLayout = "2006-01-02 15:04:05 UTC"

// Short cuts a version hash (or any id) to its first 8 bytes.
func Short(v string) string {
	if len(v) > 8 {
		return v[:8]
	}
	return v
}

// Path is a failing instance path as the pages show it: "(root)" for the
// document itself.
func Path(p string) string {
	if p == "" {
		return "(root)"
	}
	return p
}

// Parse returns a template set holding the shared templates (the "page"
// skeleton, the partials "flag" and "version") and the files of fsys that
// match patterns, which define the skeleton's blocks. funcs are added to
// Funcs (a name in both: funcs wins).
func Parse(funcs template.FuncMap, fsys fs.FS, patterns ...string) (*template.Template, error) {
	fm := Funcs()
	for k, f := range funcs {
		fm[k] = f
	}
	t, err := template.New("page.html").Funcs(fm).ParseFS(files, "templates/*.html")
	if err != nil {
		return nil, fmt.Errorf("htmlview: parsing the shared templates: %w", err)
	}
	if len(patterns) == 0 {
		return t, nil
	}
	if t, err = t.ParseFS(fsys, patterns...); err != nil {
		return nil, fmt.Errorf("htmlview: parsing %v: %w", patterns, err)
	}
	return t, nil
}
