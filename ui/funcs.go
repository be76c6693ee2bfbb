package ui

import (
	"fmt"
	"github.com/llmpipeline/pipeline/index"
	"html/template"
	"net/url"
	"strings"
	"time"
)

// funcs are the templates' helpers: formatting only, no reads.
func funcs() template.FuncMap {
	return template.FuncMap{
		"pct": func(f float64) string { return fmt.Sprintf("%.1f%%", f*100) },
		"share": func(n, of int) string {
			if of == 0 {
				return "-"
			}
			return fmt.Sprintf("%.1f%%", float64(n)*100/float64(of))
		},
		// width is n as a share of of, for bars (0..100).
		"width": func(n, of int) string {
			if of <= 0 {
				return "0"
			}
			return fmt.Sprintf("%.2f", float64(n)*100/float64(of))
		},
		// jobURL is the page of a job: its id may hold / ? # or spaces,
		// or be "." or "..".
		"jobURL": JobURL,
		"short": func(v string) string {
			if len(v) > 8 {
				return v[:8]
			}
			return v
		},
		"ts": func(t time.Time) string {
			if t.IsZero() {
				return "-"
			}
			return t.UTC().Format("2006-01-02 15:04:05 UTC")
		},
		"iso":  func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
		"join": strings.Join,
		"qs":   func(v url.Values) string { return v.Encode() },
		"with": func(v url.Values, k, val string) string {
			u := url.Values{}
			for kk, vv := range v {
				u[kk] = vv
			}
			u.Set(k, val)
			return u.Encode()
		},
		"path": func(p string) string {
			if p == "" {
				return "(root)"
			}
			return p
		},
		"orDash": func(s string) string {
			if s == "" {
				return "-"
			}
			return s
		},
		// usd prints a known cost in US dollars: four decimals, or
		// six below a cent, so a cheap job does not read as $0.0000.
		"usd": func(v *float64) string {
			if v == nil {
				return "unknown"
			}
			if *v != 0 && *v < 0.01 {
				return fmt.Sprintf("%.6f", *v)
			}
			return fmt.Sprintf("%.4f", *v)
		},
		"deref": func(p any) string {
			switch v := p.(type) {
			case *uint64:
				if v != nil {
					return fmt.Sprint(*v)
				}
			case *int:
				if v != nil {
					return fmt.Sprint(*v)
				}
			case *float64:
				if v != nil {
					return fmt.Sprintf("%.4f", *v)
				}
			}
			return "unknown"
		},
		"plusOne":  func(n int) int { return n + 1 },
		"add":      func(a, b int) int { return a + b },
		"segments": segments,
		"entries":  entries,
		"sub":      func(a, b int) int { return a - b },
	}
}

// segment is one part of a stacked bar: x and width in 0..100.
type segment struct {
	Class, Label string
	X, W         float64
}

// entriesView is what the shared "entries" template (a table of dead
// letters with their selection boxes) gets.
type entriesView struct {
	Entries  []index.Entry
	CSRF     string
	ReadOnly bool
	// Back is the page the table is on, where the action's Cancel leads.
	Back string
}

func entries(es []index.Entry, csrf string, readOnly bool, back string) entriesView {
	return entriesView{Entries: es, CSRF: csrf, ReadOnly: readOnly, Back: back}
}

// JobURL is the path of a job's page. The id is one escaped segment of
// /dead-letters/; an id a browser would resolve as a dot segment ("." or
// "..") goes in the query of /job instead.
func JobURL(id string) string {
	if id == "." || id == ".." {
		return "/job?" + url.Values{"id": {id}}.Encode()
	}
	return "/dead-letters/" + url.PathEscape(id)
}
