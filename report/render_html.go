package report

import (
	"embed"
	"fmt"
	"html/template"
	"io"
	"strings"
	"time"

	"github.com/llmpipeline/pipeline/index"
	"github.com/llmpipeline/pipeline/internal/htmlview"
)

// The HTML report is the console's page skeleton, partials and stylesheet
// (internal/htmlview) with the report's own blocks (templates/report.html):
// html/template escapes every value for where it stands, the stylesheet is
// inlined and the charts are inline SVG, so the file loads nothing.

//go:embed templates/*.html
var templates embed.FS

// chart colours
const (
	colHealed  = "#3f9e6a"
	colMasked  = "#e0a526"
	colStuck   = "#c0392b"
	colBarBack = "#eceef2"
)

// htmlPage is what templates/report.html gets.
type htmlPage struct {
	CSS         template.CSS
	Scope       htmlScope
	Fingerprint int
	Rule        string
	Shown       string
	Clusters    []Cluster
	Chart       barChart // of Clusters
	Impossible  []Cluster
	Masked      []Cluster
	Funnel      []funnelRow
	FunnelChart barChart
	Cost        bool
	Lint        []LintFinding
	Evals       []*EvalFigures // the latest eval of each funnel row that has one
	Conflicts   []index.ConflictCount
	Colors      struct{ Healed, Masked, Stuck string }
}

// htmlScope is the header (scope) with its fields where a template reads
// them.
type htmlScope struct {
	Index, Outcomes, Generated, GeneratedISO, Versions, Filter, Totals string
}

// funnelRow is one funnel of the table, in the order of Schemas (Key).
type funnelRow struct {
	Key string
	*Funnel
}

// barChart is an SVG chart of horizontal bars, its coordinates computed.
type barChart struct {
	W, H int
	Rows []barRow
}

// barRow is one bar: its label (Title: the label in full), segments and,
// for the clusters, the counts after it.
type barRow struct {
	Y, LabelX, TextY int
	Label, Title     string
	Back             *barSeg // the funnel's 100% background
	Segs             []barSeg
	CountX, Count    string
}

// barSeg is a segment of a bar, with the text drawn in it when it fits.
type barSeg struct {
	X, W                   string
	Y, H                   int
	Fill, Title            string
	Text, TextX, TextClass string
	TextY                  int
}

func (r *Report) html(w io.Writer) error {
	r = r.escaped() // control characters as escapes (textsafe.go)
	t, err := htmlview.Parse(htmlFuncs(), templates, "templates/report.html")
	if err != nil {
		return err
	}
	sc := r.scope()
	p := htmlPage{
		CSS: htmlview.CSS(),
		Scope: htmlScope{Index: sc.index, Outcomes: sc.outcomes, Generated: sc.generated, GeneratedISO: r.GeneratedAt.UTC().Format(time.RFC3339),
			Versions: sc.versions, Filter: sc.filter, Totals: sc.totals},
		Fingerprint: r.FingerprintVersion, Rule: r.rule(), Shown: r.shown(),
		Clusters: r.Clusters, Impossible: r.Impossible(), Masked: r.Masked(),
		Cost: r.costShown(), Lint: r.Lint, Evals: r.evalRows(), Conflicts: r.Conflicts,
	}
	p.Colors.Healed, p.Colors.Masked, p.Colors.Stuck = colHealed, colMasked, colStuck
	if len(r.Clusters) > 0 {
		p.Chart = clusterChart(r.Clusters)
	}
	for _, s := range r.Schemas() {
		p.Funnel = append(p.Funnel, funnelRow{Key: s, Funnel: r.Funnel[s]})
	}
	if len(p.Funnel) > 0 {
		p.FunnelChart = funnelChart(p.Funnel)
	}
	if err := t.ExecuteTemplate(w, "page", p); err != nil {
		return fmt.Errorf("executing templates/report.html: %w", err)
	}
	return nil
}

// htmlFuncs are the report's helpers for its template, beside the shared
// ones (htmlview.Funcs); pct is the report's (no ".0").
func htmlFuncs() template.FuncMap {
	return template.FuncMap{
		"pct":         pct,
		"rate":        rate,
		"received":    received,
		"allReceived": func(c Cluster) string { return received(c, Received) },
		"orNone":      orNone,
		"day":         day,
		"steps":       steps,
		"classes":     classes,
		"perSuccess":  perSuccess,
		"costRow":     costRow,
		"deadShare":   func(f *Funnel) string { return pct(ratio(f.DeadLettered, f.Jobs)) },
		"join":        strings.Join,
		"split":       strings.Split,
	}
}

// label shortens a chart label to n runes, keeping its end (the field).
func label(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return "…" + string(r[len(r)-n+1:])
}

func f1(v float64) string { return fmt.Sprintf("%.1f", v) }

// clusterChart draws the top clusters as horizontal bars as long as the
// jobs where the fingerprint failed, split into the jobs that healed, the
// dead letters where it had been fixed (masked) and the dead letters where
// it was still failing.
func clusterChart(cs []Cluster) barChart {
	const top, rowH, labelW, barW, countW = 15, 24, 330, 520, 150
	n := min(len(cs), top)
	maxJobs := 1
	for _, c := range cs[:n] {
		maxJobs = max(maxJobs, c.Jobs)
	}
	ch := barChart{W: labelW + barW + countW, H: n*rowH + 8}
	for i, c := range cs[:n] {
		y := i*rowH + 4
		name := c.Schema + " " + path(c.Path) + " (" + c.Keyword + ")"
		row := barRow{Y: y, LabelX: labelW - 8, TextY: y + 13, Title: name, Label: label(name, 44)}
		healed := c.Jobs - c.DeadLetters
		stuck := max(c.Jobs-max(c.Fixed, healed), 0)
		masked := max(c.DeadLetters-stuck, 0)
		x := float64(labelW)
		for _, seg := range []struct {
			n          int
			fill, what string
		}{{healed, colHealed, "healed"}, {masked, colMasked, "dead-lettered for other fields (fixed here)"}, {stuck, colStuck, "dead-lettered, still failing here"}} {
			if seg.n == 0 {
				continue
			}
			wd := float64(seg.n) * barW / float64(maxJobs)
			row.Segs = append(row.Segs, barSeg{X: f1(x), W: f1(wd), Y: y, H: 17, Fill: seg.fill, Title: fmt.Sprintf("%d %s", seg.n, seg.what)})
			x += wd
		}
		flag := ""
		switch {
		case c.Impossible:
			flag = " impossible"
		case c.Masked:
			flag = " masked"
		}
		row.CountX, row.Count = f1(x+6), fmt.Sprintf("%d / %d%s", c.DeadLetters, c.Jobs, flag)
		ch.Rows = append(ch.Rows, row)
	}
	return ch
}

// funnelChart draws one stacked 100% bar per schema version: succeeded at
// attempt 1, 2, ... (greens) then dead-lettered by class (reds).
func funnelChart(fs []funnelRow) barChart {
	const rowH, labelW, barW = 28, 170, 700
	greens := []string{"#1e8449", "#52be80", "#a9dfbf", "#d4efdf"}
	reds := []string{"#c0392b", "#e74c3c", "#f1948a", "#fadbd8"}
	ch := barChart{W: labelW + barW + 10, H: len(fs)*rowH + 8}
	for i, f := range fs {
		y := i*rowH + 4
		row := barRow{Y: y, LabelX: labelW - 8, TextY: y + 14, Label: label(f.Key, 24),
			Back: &barSeg{X: fmt.Sprint(labelW), W: fmt.Sprint(barW), Y: y, H: 20, Fill: colBarBack}}
		x := float64(labelW)
		seg := func(share float64, fill, short, title string, light bool) {
			wd := share * barW
			s := barSeg{X: f1(x), W: f1(wd), Y: y, H: 20, Fill: fill, Title: title}
			if text := short + " " + pct(share); wd >= float64(len(text))*6.5+8 {
				s.Text, s.TextX, s.TextY, s.TextClass = text, f1(x+4), y+14, "in"
				if light {
					s.TextClass = ""
				}
			}
			row.Segs = append(row.Segs, s)
			x += wd
		}
		for k, st := range f.SucceededAt {
			c := min(k, len(greens)-1)
			seg(st.Share, greens[c], fmt.Sprintf("ok@%d", st.Attempt), fmt.Sprintf("succeeded at attempt %d: %d jobs, %s", st.Attempt, st.Jobs, pct(st.Share)), c >= 2)
		}
		for k, c := range f.DeadByClass {
			ci := min(k, len(reds)-1)
			seg(c.Share, reds[ci], string(c.Class), fmt.Sprintf("dead-lettered (%s): %d jobs, %s", c.Class, c.Jobs, pct(c.Share)), ci >= 2)
		}
		ch.Rows = append(ch.Rows, row)
	}
	return ch
}
