package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"strings"
	"text/tabwriter"
	"time"
)

// ErrFormat is returned by Render for an unknown format.
var ErrFormat = errors.New("report: unknown format")

// Formats returns the formats Render accepts.
func Formats() []string { return []string{"table", "json", "markdown", "html"} }

// Render writes the report as "table" (a terminal), "json" (stable, see the
// package doc), "markdown" or "html" (one self-contained file: inline CSS
// and SVG, no script, nothing fetched from a network).
func (r *Report) Render(w io.Writer, format string) error {
	var err error
	switch format {
	case "table", "":
		err = r.table(w)
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		enc.SetEscapeHTML(false)
		err = enc.Encode(r)
	case "markdown", "md":
		err = r.markdown(w)
	case "html":
		err = r.html(w)
	default:
		return fmt.Errorf("%w %q (want one of %s)", ErrFormat, format, strings.Join(Formats(), ", "))
	}
	if err != nil {
		return fmt.Errorf("rendering the report as %s: %w", format, err)
	}
	return nil
}

func short(v string) string {
	if len(v) > 8 {
		return v[:8]
	}
	return v
}

func day(t time.Time) string { return t.UTC().Format("2006-01-02 15:04") }

func received(c Cluster, n int) string {
	var parts []string
	for i, v := range c.Received {
		if i == n {
			break
		}
		parts = append(parts, fmt.Sprintf("%s ×%d", v.Value, v.Count))
	}
	return strings.Join(parts, ", ")
}

func path(p string) string {
	if p == "" {
		return "(root)"
	}
	return p
}

func steps(f *Funnel) string {
	var parts []string
	for _, s := range f.SucceededAt {
		parts = append(parts, fmt.Sprintf("@%d %s", s.Attempt, pct(s.Share)))
	}
	return strings.Join(parts, " ")
}

func classes(f *Funnel) string {
	var parts []string
	for _, c := range f.DeadByClass {
		parts = append(parts, fmt.Sprintf("%s %s", c.Class, pct(c.Share)))
	}
	if len(parts) == 0 {
		return "-"
	}
	return strings.Join(parts, " ")
}

func (r *Report) table(w io.Writer) error {
	var b bytes.Buffer
	fmt.Fprintf(&b, "FAILURE CLUSTERS (fingerprint v%d: schema + version + path + keyword)\n", r.FingerprintVersion)
	if len(r.Clusters) == 0 {
		b.WriteString("no failures\n")
	} else {
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tSCHEMA\tVERSION\tPATH\tKEYWORD\tDEAD\tJOBS\tHEALED\tFLAG\tTOP RECEIVED")
		for _, c := range r.Clusters {
			flag := ""
			if c.Impossible {
				flag = "IMPOSSIBLE"
			}
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%s\t%s\t%s\n", c.ID, c.Schema, short(c.Version), path(c.Path), c.Keyword,
				c.DeadLetters, c.Jobs, pct(c.HealRate), flag, received(c, 2))
		}
		tw.Flush()
	}
	if imp := r.Impossible(); len(imp) > 0 {
		b.WriteString("\nIMPOSSIBLE FIELDS\n")
		for _, c := range imp {
			fmt.Fprintf(&b, "%s %s %s (%s)\n  why:      %s\n  evidence: jobs %s; received %s; seen %s .. %s\n  try:      %s\n",
				c.ID, c.Schema, path(c.Path), c.Keyword, c.Reason, strings.Join(c.Examples, ", "), orNone(received(c, Received)),
				day(c.FirstSeen), day(c.LastSeen), c.Suggestion)
		}
	}
	b.WriteString("\nHEAL FUNNEL\n")
	if len(r.Funnel) == 0 {
		b.WriteString("no jobs\n")
	} else {
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "SCHEMA\tJOBS\tFIRST PASS\tSUCCEEDED AT\tDEAD\tDEAD BY CLASS\tTOKENS/OK\tHEAL TOKENS")
		for _, s := range r.Schemas() {
			f := r.Funnel[s]
			fmt.Fprintf(tw, "%s\t%d\t%s\t%s\t%s\t%s\t%.0f\t%s\n", s, f.Jobs, pct(f.FirstPass), steps(f),
				pct(ratio(f.DeadLettered, f.Jobs)), classes(f), f.TokensPerSucceeded, pct(f.HealTokenShare))
		}
		tw.Flush()
	}
	if len(r.Lint) > 0 {
		b.WriteString("\nSCHEMA LINT\n")
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "SCHEMA\tFILE\tPATH\tRULE\tMESSAGE\tSUGGESTION")
		for _, l := range r.Lint {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", l.Schema, l.File, path(l.Path), l.Rule, l.Message, l.Suggestion)
		}
		tw.Flush()
	}
	_, err := w.Write(b.Bytes())
	return err
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// md escapes a markdown table cell.
func md(s string) string {
	s = strings.ReplaceAll(s, "|", `\|`)
	return strings.ReplaceAll(s, "\n", " ")
}

func code(s string) string {
	if s == "" {
		return ""
	}
	return "`" + strings.ReplaceAll(s, "`", "'") + "`"
}

func (r *Report) markdown(w io.Writer) error {
	var b bytes.Buffer
	b.WriteString("# Failure report\n\n")
	fmt.Fprintf(&b, "Fingerprint v%d (schema + version + path + keyword). Impossible when a fingerprint failed in at least %d jobs with a heal rate at or below %s, or in %d consecutive dead letters.\n\n",
		r.FingerprintVersion, r.Thresholds.MinJobs, pct(r.Thresholds.MaxHealRate), r.Thresholds.Streak)
	b.WriteString("## Clusters\n\n")
	if len(r.Clusters) == 0 {
		b.WriteString("No failures.\n")
	} else {
		b.WriteString("| id | schema | version | path | keyword | dead letters | jobs | heal rate | impossible | top received | examples |\n")
		b.WriteString("|---|---|---|---|---|--:|--:|--:|---|---|---|\n")
		for _, c := range r.Clusters {
			flag := ""
			if c.Impossible {
				flag = "**yes**"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %d | %d | %s | %s | %s | %s |\n", code(c.ID), md(c.Schema), code(short(c.Version)),
				code(md(path(c.Path))), md(c.Keyword), c.DeadLetters, c.Jobs, pct(c.HealRate), flag, md(received(c, 3)), md(strings.Join(c.Examples, ", ")))
		}
	}
	if imp := r.Impossible(); len(imp) > 0 {
		b.WriteString("\n## Impossible fields\n\n")
		for _, c := range imp {
			fmt.Fprintf(&b, "- **%s %s** (`%s`, cluster `%s`): %s. Seen %s to %s; jobs %s; received %s.  \n  *Try:* %s\n",
				md(c.Schema), md(path(c.Path)), c.Keyword, c.ID, c.Reason, day(c.FirstSeen), day(c.LastSeen),
				md(strings.Join(c.Examples, ", ")), md(orNone(received(c, Received))), md(c.Suggestion))
		}
	}
	b.WriteString("\n## Heal funnel\n\n")
	if len(r.Funnel) == 0 {
		b.WriteString("No jobs.\n")
	} else {
		b.WriteString("| schema | jobs | first pass | succeeded at | dead-lettered | dead by class | tokens per success | tokens on healing |\n")
		b.WriteString("|---|--:|--:|---|--:|---|--:|--:|\n")
		for _, s := range r.Schemas() {
			f := r.Funnel[s]
			fmt.Fprintf(&b, "| %s | %d | %s | %s | %s | %s | %.0f | %s |\n", md(s), f.Jobs, pct(f.FirstPass), steps(f),
				pct(ratio(f.DeadLettered, f.Jobs)), classes(f), f.TokensPerSucceeded, pct(f.HealTokenShare))
		}
	}
	if len(r.Lint) > 0 {
		b.WriteString("\n## Schema lint\n\n| schema | file | path | rule | message | suggestion |\n|---|---|---|---|---|---|\n")
		for _, l := range r.Lint {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", md(l.Schema), md(l.File), code(md(path(l.Path))), md(l.Rule), md(l.Message), md(l.Suggestion))
		}
	}
	_, err := w.Write(b.Bytes())
	return err
}

const css = `body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:2em auto;max-width:72em;padding:0 1em;color:#1d2330}
h1{font-size:1.6em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #d8dce4}
table{border-collapse:collapse;width:100%;margin:.5em 0}th,td{padding:.3em .5em;border-bottom:1px solid #eceef2;text-align:left;vertical-align:top}
td.n{text-align:right;font-variant-numeric:tabular-nums}code{font:12px ui-monospace,monospace;background:#f3f4f7;padding:0 .2em}
.flag{color:#fff;background:#c0392b;border-radius:3px;padding:0 .4em;font-size:.85em}
.imp{border-left:4px solid #c0392b;padding:.2em .8em;margin:.8em 0;background:#fdf3f2}
svg text{font:12px system-ui,sans-serif;fill:#1d2330}.muted{color:#667}`

func esc(s string) string { return html.EscapeString(s) }

func (r *Report) html(w io.Writer) error {
	var b bytes.Buffer
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>Failure report</title>\n<style>\n")
	b.WriteString(css)
	b.WriteString("\n</style>\n</head>\n<body>\n<h1>Failure report</h1>\n")
	fmt.Fprintf(&b, "<p class=\"muted\">Fingerprint v%d (schema + version + path + keyword). Impossible: at least %d jobs with a heal rate at or below %s, or %d consecutive dead letters.</p>\n",
		r.FingerprintVersion, r.Thresholds.MinJobs, esc(pct(r.Thresholds.MaxHealRate)), r.Thresholds.Streak)

	b.WriteString("<h2>Top clusters</h2>\n")
	if len(r.Clusters) == 0 {
		b.WriteString("<p>No failures.</p>\n")
	} else {
		clusterChart(&b, r.Clusters)
		b.WriteString("<table>\n<tr><th>id</th><th>schema</th><th>version</th><th>path</th><th>keyword</th><th>dead letters</th><th>jobs</th><th>heal rate</th><th></th><th>top received</th><th>examples</th></tr>\n")
		for _, c := range r.Clusters {
			flag := ""
			if c.Impossible {
				flag = `<span class="flag">impossible</span>`
			}
			fmt.Fprintf(&b, "<tr><td><code>%s</code></td><td>%s</td><td><code>%s</code></td><td><code>%s</code></td><td>%s</td><td class=\"n\">%d</td><td class=\"n\">%d</td><td class=\"n\">%s</td><td>%s</td><td>%s</td><td>%s</td></tr>\n",
				esc(c.ID), esc(c.Schema), esc(short(c.Version)), esc(path(c.Path)), esc(c.Keyword), c.DeadLetters, c.Jobs, esc(pct(c.HealRate)), flag,
				esc(received(c, 3)), esc(strings.Join(c.Examples, ", ")))
		}
		b.WriteString("</table>\n")
	}
	if imp := r.Impossible(); len(imp) > 0 {
		b.WriteString("<h2>Impossible fields</h2>\n")
		for _, c := range imp {
			fmt.Fprintf(&b, "<div class=\"imp\"><p><b>%s <code>%s</code></b> (%s, cluster <code>%s</code>): %s.</p><p class=\"muted\">Seen %s to %s; jobs %s; received %s.</p><p><b>Try:</b> %s</p></div>\n",
				esc(c.Schema), esc(path(c.Path)), esc(c.Keyword), esc(c.ID), esc(c.Reason), esc(day(c.FirstSeen)), esc(day(c.LastSeen)),
				esc(strings.Join(c.Examples, ", ")), esc(orNone(received(c, Received))), esc(c.Suggestion))
		}
	}
	b.WriteString("<h2>Heal funnel</h2>\n")
	if len(r.Funnel) == 0 {
		b.WriteString("<p>No jobs.</p>\n")
	} else {
		funnelChart(&b, r)
		b.WriteString("<table>\n<tr><th>schema</th><th>jobs</th><th>first pass</th><th>succeeded at</th><th>dead-lettered</th><th>dead by class</th><th>tokens per success</th><th>tokens on healing</th></tr>\n")
		for _, s := range r.Schemas() {
			f := r.Funnel[s]
			fmt.Fprintf(&b, "<tr><td>%s</td><td class=\"n\">%d</td><td class=\"n\">%s</td><td>%s</td><td class=\"n\">%s</td><td>%s</td><td class=\"n\">%.0f</td><td class=\"n\">%s</td></tr>\n",
				esc(s), f.Jobs, esc(pct(f.FirstPass)), esc(steps(f)), esc(pct(ratio(f.DeadLettered, f.Jobs))), esc(classes(f)), f.TokensPerSucceeded, esc(pct(f.HealTokenShare)))
		}
		b.WriteString("</table>\n")
	}
	if len(r.Lint) > 0 {
		b.WriteString("<h2>Schema lint</h2>\n<table>\n<tr><th>schema</th><th>file</th><th>path</th><th>rule</th><th>message</th><th>suggestion</th></tr>\n")
		for _, l := range r.Lint {
			fmt.Fprintf(&b, "<tr><td>%s</td><td>%s</td><td><code>%s</code></td><td>%s</td><td>%s</td><td>%s</td></tr>\n",
				esc(l.Schema), esc(l.File), esc(path(l.Path)), esc(l.Rule), esc(l.Message), esc(l.Suggestion))
		}
		b.WriteString("</table>\n")
	}
	b.WriteString("</body>\n</html>\n")
	_, err := w.Write(b.Bytes())
	return err
}

// clusterChart draws the top clusters as horizontal bars: jobs where the
// fingerprint failed (light) and the dead letters among them (dark).
func clusterChart(b *bytes.Buffer, cs []Cluster) {
	const top, rowH, labelW, barW = 15, 22, 300, 420
	n := min(len(cs), top)
	maxJobs := 1
	for _, c := range cs[:n] {
		maxJobs = max(maxJobs, c.Jobs)
	}
	h := n*rowH + 30
	fmt.Fprintf(b, "<svg role=\"img\" aria-label=\"top failure clusters\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" xmlns=\"http://www.w3.org/2000/svg\">\n", labelW+barW+80, h, labelW+barW+80, h)
	for i, c := range cs[:n] {
		y := i*rowH + 4
		jw := c.Jobs * barW / maxJobs
		dw := c.DeadLetters * barW / maxJobs
		fill := "#2c6fbb"
		if c.Impossible {
			fill = "#c0392b"
		}
		fmt.Fprintf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%s %s (%s)</text>", labelW-6, y+14, esc(c.Schema), esc(path(c.Path)), esc(c.Keyword))
		fmt.Fprintf(b, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"16\" fill=\"#c9d8ec\"/>", labelW, y+2, jw)
		fmt.Fprintf(b, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"16\" fill=\"%s\"/>", labelW, y+2, dw, fill)
		fmt.Fprintf(b, "<text x=\"%d\" y=\"%d\">%d / %d</text>\n", labelW+jw+6, y+14, c.DeadLetters, c.Jobs)
	}
	fmt.Fprintf(b, "<text x=\"%d\" y=\"%d\" class=\"muted\">dark: dead letters, light: jobs where it failed at some attempt</text>\n</svg>\n", labelW, n*rowH+22)
}

// funnelChart draws one stacked 100% bar per schema: succeeded at attempt
// 1, 2, ... (greens) then dead-lettered by class (reds).
func funnelChart(b *bytes.Buffer, r *Report) {
	const rowH, labelW, barW = 26, 140, 560
	schemas := r.Schemas()
	greens := []string{"#1e8449", "#52be80", "#a9dfbf", "#d4efdf"}
	reds := []string{"#c0392b", "#e74c3c", "#f1948a", "#fadbd8"}
	h := len(schemas)*rowH + 10
	fmt.Fprintf(b, "<svg role=\"img\" aria-label=\"heal funnel\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" xmlns=\"http://www.w3.org/2000/svg\">\n", labelW+barW+20, h, labelW+barW+20, h)
	for i, s := range schemas {
		f := r.Funnel[s]
		y := i*rowH + 4
		fmt.Fprintf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%s</text>", labelW-6, y+14, esc(s))
		x := float64(labelW)
		seg := func(share float64, fill, title string) {
			wd := share * barW
			fmt.Fprintf(b, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"18\" fill=\"%s\"><title>%s</title></rect>", x, y, wd, fill, esc(title))
			x += wd
		}
		for k, st := range f.SucceededAt {
			seg(st.Share, greens[min(k, len(greens)-1)], fmt.Sprintf("succeeded at attempt %d: %s", st.Attempt, pct(st.Share)))
		}
		for k, c := range f.DeadByClass {
			seg(c.Share, reds[min(k, len(reds)-1)], fmt.Sprintf("dead-lettered (%s): %s", c.Class, pct(c.Share)))
		}
		b.WriteString("\n")
	}
	b.WriteString("</svg>\n")
}
