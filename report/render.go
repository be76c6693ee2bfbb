package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"html"
	"io"
	"sort"
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

// scope is the report's header in words, one line per item.
type scope struct {
	index, outcomes, generated, versions, filter, totals string
}

func (r *Report) scope() scope {
	sc := scope{index: r.Source, generated: r.GeneratedAt.UTC().Format("2006-01-02 15:04:05 UTC"), outcomes: "none"}
	if r.Range != nil {
		sc.outcomes = fmt.Sprintf("finished %s .. %s UTC", day(r.Range.From), day(r.Range.To))
	}
	var vs []string
	for _, schema := range sortedKeys(r.Versions) {
		for _, v := range r.Versions[schema] {
			vs = append(vs, schema+"@"+short(v))
		}
	}
	list := strings.Join(vs, ", ")
	if list == "" {
		list = "none"
	}
	switch r.Filter.Version {
	case VersionLatest:
		sc.versions = "the latest of each schema (--version all for every version): " + list
	case VersionAll:
		sc.versions = "every version (--version all): " + list
	default:
		sc.versions = "only " + short(r.Filter.Version) + " (--version): " + list
	}
	var f []string
	if r.Filter.Schema != "" {
		f = append(f, "schema "+r.Filter.Schema)
	}
	if r.Filter.Since != nil {
		f = append(f, "since "+r.Filter.Since.UTC().Format(time.RFC3339))
	}
	if r.Filter.Model != "" {
		f = append(f, "model "+r.Filter.Model)
	}
	sc.filter = strings.Join(f, ", ")
	t := r.Totals
	sc.totals = fmt.Sprintf("%d jobs, %d succeeded, %d dead-lettered", t.Jobs, t.Succeeded, t.DeadLettered)
	if t.ReplayedHealed > 0 {
		sc.totals += fmt.Sprintf(" (%d replayed, healed)", t.ReplayedHealed)
	}
	sc.totals += fmt.Sprintf(", %d tokens", t.Tokens)
	if t.CostUSD != nil {
		sc.totals += ", " + dollars(t.CostUSD)
	}
	if t.Batch.Attempts > 0 {
		c := t.Batch.CostUSD
		sc.totals += fmt.Sprintf(" (%d attempts through provider batches, %s)", t.Batch.Attempts, dollars(&c))
	}
	return sc
}

func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// shown says how many clusters the report lists of how many there are.
func (r *Report) shown() string {
	switch {
	case r.ClustersTotal > len(r.Clusters):
		return fmt.Sprintf("%d of %d clusters (--top 0 for all)", len(r.Clusters), r.ClustersTotal)
	case r.ClustersTotal == 1:
		return "1 cluster"
	}
	return fmt.Sprintf("%d clusters", len(r.Clusters))
}

// rate is a cluster's heal or fix rate in words, "-" when every run was
// replayed and healed (nothing is counted).
func rate(c Cluster, r float64) string {
	if c.Jobs == c.ReplayedHealed {
		return "-"
	}
	return pct(r)
}

// perSuccess is a funnel's tokens per succeeded job, "-" when none succeeded.
func perSuccess(f *Funnel) string {
	if f.TokensPerSucceeded == nil {
		return "-"
	}
	return fmt.Sprintf("%.0f", *f.TokensPerSucceeded)
}

// named is a cluster as the flag sections name it: schema@version path (keyword).
func named(c Cluster) string {
	return c.Schema + "@" + short(c.Version) + " " + path(c.Path) + " (" + c.Keyword + ")"
}

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
	r = r.escaped() // control characters as escapes (textsafe.go)
	var b bytes.Buffer
	sc := r.scope()
	tw := tabwriter.NewWriter(&b, 0, 0, 1, ' ', 0)
	fmt.Fprintf(tw, "FAILURE REPORT\n")
	fmt.Fprintf(tw, "index:\t%s\n", sc.index)
	fmt.Fprintf(tw, "outcomes:\t%s\n", sc.outcomes)
	fmt.Fprintf(tw, "generated:\t%s\n", sc.generated)
	fmt.Fprintf(tw, "versions:\t%s\n", sc.versions)
	if sc.filter != "" {
		fmt.Fprintf(tw, "filter:\t%s\n", sc.filter)
	}
	fmt.Fprintf(tw, "totals:\t%s\n", sc.totals)
	tw.Flush()
	fmt.Fprintf(&b, "\nFAILURE CLUSTERS (fingerprint v%d: schema + version + path + keyword)\n", r.FingerprintVersion)
	if len(r.Clusters) == 0 {
		b.WriteString("no failures\n")
	} else {
		b.WriteString(r.shown() + "\n")
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "ID\tSCHEMA\tVERSION\tPATH\tKEYWORD\tDEAD\tJOBS\tREPLAY-HEALED\tHEALED\tFIXED\tFLAG\tTOP RECEIVED")
		for _, c := range r.Clusters {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%d\t%d\t%s\t%s\t%s\t%s\n", c.ID, c.Schema, short(c.Version), path(c.Path), c.Keyword,
				c.DeadLetters, c.Jobs, c.ReplayedHealed, rate(c, c.HealRate), rate(c, c.FixRate), flagWord(c), received(c, 2))
		}
		tw.Flush()
	}
	if imp := r.Impossible(); len(imp) > 0 {
		b.WriteString("\nIMPOSSIBLE FIELDS\n")
		for _, c := range imp {
			fmt.Fprintf(&b, "%s %s\n  why:      %s\n  evidence: jobs %s; received %s; seen %s .. %s\n  try:      %s\n",
				c.ID, named(c), c.Reason, strings.Join(c.Examples, ", "), orNone(received(c, Received)),
				day(c.FirstSeen), day(c.LastSeen), c.Suggestion)
		}
	}
	if m := r.Masked(); len(m) > 0 {
		b.WriteString("\nMASKED (the heal rate blames them, but the model fixed them: their jobs died of other fields)\n")
		for _, c := range m {
			fmt.Fprintf(&b, "%s %s\n  why:      %s\n  try:      %s\n", c.ID, named(c), c.Reason, c.Suggestion)
		}
	}
	b.WriteString("\nHEAL FUNNEL\n")
	if len(r.Funnel) == 0 {
		b.WriteString("no jobs\n")
	} else {
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "SCHEMA\tVERSION\tJOBS\tFIRST PASS\tSUCCEEDED AT\tDEAD\tDEAD BY CLASS\tREPLAY-HEALED\tTOKENS/OK\tHEAL TOKENS")
		for _, s := range r.Schemas() {
			f := r.Funnel[s]
			fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%d\t%s\t%s\n", f.Schema, short(f.Version), f.Jobs, pct(f.FirstPass), steps(f),
				pct(ratio(f.DeadLettered, f.Jobs)), classes(f), f.ReplayedHealed, perSuccess(f), pct(f.HealTokenShare))
		}
		tw.Flush()
	}
	if r.costShown() {
		b.WriteString("\nCOST AND MODELS (cost per success counts the failures paid for; models: the model of the final answer)\n")
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "SCHEMA\tVERSION\tCOST\tCOST/OK\tHEAL COST\tBY FALLBACK\tMODELS")
		for _, s := range r.Schemas() {
			f := r.Funnel[s]
			c := costRow(f)
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", f.Schema, short(f.Version), c[0], c[1], c[2], c[3], c[4])
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

// flagWord is a cluster's verdict in a word: IMPOSSIBLE, masked or nothing.
func flagWord(c Cluster) string {
	switch {
	case c.Impossible:
		return "IMPOSSIBLE"
	case c.Masked:
		return "masked"
	}
	return ""
}

// rule states the verdicts' rules in one sentence.
func (r *Report) rule() string {
	return fmt.Sprintf("Impossible: a fingerprint that failed in at least %d jobs with both its heal rate (jobs that still succeeded) and its fix rate (jobs where a later attempt no longer failed on it) at or below %s, or that was still failing at the end of the last %d jobs, all dead-lettered. Masked: the heal rate alone would flag it, but the model fixed it; its jobs died of other fields.",
		r.Thresholds.MinJobs, pct(r.Thresholds.MaxHealRate), r.Thresholds.Streak)
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// md escapes text quoted into markdown (values and keys the model wrote,
// reasons, file names): HTML's < > & as entities, so no tag the model
// wrote is ever markup; markdown's emphasis, link, code and table
// characters with a backslash; line breaks as spaces (a table row is one
// line).
func md(s string) string {
	var b strings.Builder
	for _, r := range s {
		switch r {
		case '<':
			b.WriteString("&lt;")
		case '>':
			b.WriteString("&gt;")
		case '&':
			b.WriteString("&amp;")
		case '\n', '\r':
			b.WriteByte(' ')
		case '\\', '`', '*', '_', '[', ']', '|', '~':
			b.WriteByte('\\')
			b.WriteRune(r)
		default:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// code quotes s as a code span, where nothing is markup: a backtick in s
// becomes ', and in a table a | is escaped (GFM), a line break a space.
func code(s string) string {
	if s == "" {
		return ""
	}
	s = strings.NewReplacer("`", "'", "|", `\|`, "\n", " ", "\r", " ").Replace(s)
	return "`" + s + "`"
}

func (r *Report) markdown(w io.Writer) error {
	r = r.escaped() // control characters as escapes (textsafe.go)
	var b bytes.Buffer
	b.WriteString("# Failure report\n\n")
	sc := r.scope()
	fmt.Fprintf(&b, "- **Index:** %s\n- **Outcomes:** %s\n- **Generated:** %s\n- **Versions:** %s\n", code(sc.index), sc.outcomes, sc.generated, md(sc.versions))
	if sc.filter != "" {
		fmt.Fprintf(&b, "- **Filter:** %s\n", md(sc.filter))
	}
	fmt.Fprintf(&b, "- **Totals:** %s\n\n", sc.totals)
	fmt.Fprintf(&b, "Fingerprint v%d (schema + version + path + keyword). %s\n\n", r.FingerprintVersion, r.rule())
	b.WriteString("## Clusters\n\n")
	if len(r.Clusters) == 0 {
		b.WriteString("No failures.\n")
	} else {
		b.WriteString(r.shown() + ".\n\n")
		b.WriteString("| id | schema | version | path | keyword | dead letters | jobs | replayed, healed | heal rate | fix rate | verdict | top received | examples |\n")
		b.WriteString("|---|---|---|---|---|--:|--:|--:|--:|--:|---|---|---|\n")
		for _, c := range r.Clusters {
			flag := ""
			switch {
			case c.Impossible:
				flag = "**impossible**"
			case c.Masked:
				flag = "masked"
			}
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %d | %d | %d | %s | %s | %s | %s | %s |\n", code(c.ID), md(c.Schema), code(short(c.Version)),
				code(path(c.Path)), md(c.Keyword), c.DeadLetters, c.Jobs, c.ReplayedHealed, rate(c, c.HealRate), rate(c, c.FixRate), flag, md(received(c, 3)), md(strings.Join(c.Examples, ", ")))
		}
	}
	if imp := r.Impossible(); len(imp) > 0 {
		b.WriteString("\n## Impossible fields\n\n")
		for _, c := range imp {
			fmt.Fprintf(&b, "- **%s %s** (%s, version %s, cluster %s): %s. Seen %s to %s; jobs %s; received %s.  \n  *Try:* %s\n",
				md(c.Schema), md(path(c.Path)), code(c.Keyword), code(short(c.Version)), code(c.ID), md(c.Reason), day(c.FirstSeen), day(c.LastSeen),
				md(strings.Join(c.Examples, ", ")), md(orNone(received(c, Received))), md(c.Suggestion))
		}
	}
	if m := r.Masked(); len(m) > 0 {
		b.WriteString("\n## Masked fields\n\nThe heal rate blames them, but the model fixed them: their jobs died of other fields.\n\n")
		for _, c := range m {
			fmt.Fprintf(&b, "- **%s %s** (%s, version %s, cluster %s): %s.  \n  *Try:* %s\n", md(c.Schema), md(path(c.Path)), code(c.Keyword), code(short(c.Version)), code(c.ID), md(c.Reason), md(c.Suggestion))
		}
	}
	b.WriteString("\n## Heal funnel\n\n")
	if len(r.Funnel) == 0 {
		b.WriteString("No jobs.\n")
	} else {
		b.WriteString("| schema | version | jobs | first pass | succeeded at | dead-lettered | dead by class | replayed, healed | tokens per success | tokens on healing |\n")
		b.WriteString("|---|---|--:|--:|---|--:|---|--:|--:|--:|\n")
		for _, s := range r.Schemas() {
			f := r.Funnel[s]
			fmt.Fprintf(&b, "| %s | %s | %d | %s | %s | %s | %s | %d | %s | %s |\n", md(f.Schema), code(short(f.Version)), f.Jobs, pct(f.FirstPass), steps(f),
				pct(ratio(f.DeadLettered, f.Jobs)), classes(f), f.ReplayedHealed, perSuccess(f), pct(f.HealTokenShare))
		}
	}
	if r.costShown() {
		b.WriteString("\n## Cost and models\n\nCost per success counts the failures paid for; models are the models of the final answers.\n\n")
		b.WriteString("| schema | version | cost | cost per success | cost on healing | healed by fallback | models |\n|---|---|--:|--:|--:|--:|---|\n")
		for _, s := range r.Schemas() {
			f := r.Funnel[s]
			c := costRow(f)
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", md(f.Schema), code(short(f.Version)), c[0], c[1], c[2], c[3], md(c[4]))
		}
	}
	if len(r.Lint) > 0 {
		b.WriteString("\n## Schema lint\n\n| schema | file | path | rule | message | suggestion |\n|---|---|---|---|---|---|\n")
		for _, l := range r.Lint {
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s |\n", md(l.Schema), md(l.File), code(path(l.Path)), md(l.Rule), md(l.Message), md(l.Suggestion))
		}
	}
	_, err := w.Write(b.Bytes())
	return err
}

const css = `body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;margin:2em auto;max-width:80em;padding:0 1em;color:#1d2330}
h1{font-size:1.6em;margin-bottom:.2em}h2{font-size:1.2em;margin-top:2em;border-bottom:1px solid #d8dce4}
.wide{overflow-x:auto}table{border-collapse:collapse;width:100%;margin:.5em 0}
th,td{padding:.3em .5em;border-bottom:1px solid #eceef2;text-align:left;vertical-align:top}
th{font-weight:600;white-space:nowrap;background:#f7f8fa}td.n,th.n{text-align:right;font-variant-numeric:tabular-nums;white-space:nowrap}
td.ex{max-width:16em;overflow-wrap:anywhere}code{font:12px ui-monospace,monospace;background:#f3f4f7;padding:0 .2em;white-space:nowrap}
code.p{white-space:normal}
.flag,.mask{color:#fff;border-radius:3px;padding:0 .4em;font-size:.85em;white-space:nowrap}.flag{background:#c0392b}.mask{background:#b7791f}
.imp,.msk{border-left:4px solid #c0392b;padding:.2em .8em;margin:.8em 0;background:#fdf3f2}.msk{border-color:#b7791f;background:#fdf8ec}
.imp p,.msk p{margin:.3em 0}svg{max-width:100%;height:auto;display:block}
svg text{font:12px system-ui,sans-serif;fill:#1d2330}svg text.in{fill:#fff;font-size:11px}.muted{color:#667}
dl#scope{display:grid;grid-template-columns:max-content 1fr;gap:.1em 1em;margin:.5em 0 1em}dl#scope dt{font-weight:600}dl#scope dd{margin:0}
.legend span{display:inline-block;width:.9em;height:.9em;vertical-align:-.1em;margin:0 .3em 0 1em;border-radius:2px}`

func esc(s string) string { return html.EscapeString(s) }

// breakable escapes a path and lets the browser wrap it after a "/".
func breakable(p string) string { return strings.ReplaceAll(esc(p), "/", "/<wbr>") }

// chart colours
const (
	colHealed  = "#3f9e6a"
	colMasked  = "#e0a526"
	colStuck   = "#c0392b"
	colBarBack = "#eceef2"
)

func (r *Report) html(w io.Writer) error {
	r = r.escaped() // control characters as escapes (textsafe.go)
	var b bytes.Buffer
	b.WriteString("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n<title>Failure report</title>\n<style>\n")
	b.WriteString(css)
	b.WriteString("\n</style>\n</head>\n<body>\n<h1>Failure report</h1>\n")
	sc := r.scope()
	b.WriteString("<dl id=\"scope\">\n")
	fmt.Fprintf(&b, "<dt>index</dt><dd id=\"scope-index\"><code class=\"p\">%s</code></dd>\n", esc(sc.index))
	fmt.Fprintf(&b, "<dt>outcomes</dt><dd id=\"scope-range\">%s</dd>\n", esc(sc.outcomes))
	fmt.Fprintf(&b, "<dt>generated</dt><dd id=\"scope-generated\"><time datetime=\"%s\">%s</time></dd>\n", r.GeneratedAt.UTC().Format(time.RFC3339), esc(sc.generated))
	fmt.Fprintf(&b, "<dt>versions</dt><dd id=\"scope-versions\">%s</dd>\n", esc(sc.versions))
	if sc.filter != "" {
		fmt.Fprintf(&b, "<dt>filter</dt><dd id=\"scope-filter\">%s</dd>\n", esc(sc.filter))
	}
	fmt.Fprintf(&b, "<dt>totals</dt><dd id=\"scope-totals\">%s</dd>\n</dl>\n", esc(sc.totals))
	fmt.Fprintf(&b, "<p class=\"muted\">Fingerprint v%d (schema + version + path + keyword). %s</p>\n", r.FingerprintVersion, esc(r.rule()))

	b.WriteString("<h2 id=\"clusters\">Top clusters</h2>\n")
	if len(r.Clusters) == 0 {
		b.WriteString("<p>No failures.</p>\n")
	} else {
		fmt.Fprintf(&b, "<p id=\"clusters-shown\">%s</p>\n", esc(r.shown()))
		clusterChart(&b, r.Clusters)
		b.WriteString("<div class=\"wide\"><table id=\"cluster-table\">\n<tr><th>id</th><th>schema</th><th>version</th><th>path</th><th>keyword</th><th class=\"n\">dead letters</th><th class=\"n\">jobs</th><th class=\"n\">replayed, healed</th><th class=\"n\">heal rate</th><th class=\"n\">fix rate</th><th>verdict</th><th>top received</th><th>examples</th></tr>\n")
		for _, c := range r.Clusters {
			flag := ""
			switch {
			case c.Impossible:
				flag = `<span class="flag">impossible</span>`
			case c.Masked:
				flag = `<span class="mask" title="` + esc(c.Reason) + `">masked</span>`
			}
			fmt.Fprintf(&b, "<tr><td><code>%s</code></td><td>%s</td><td><code>%s</code></td><td><code class=\"p\">%s</code></td><td>%s</td><td class=\"n\">%d</td><td class=\"n\">%d</td><td class=\"n\">%d</td><td class=\"n\">%s</td><td class=\"n\">%s</td><td>%s</td><td class=\"ex\">%s</td><td class=\"ex\">%s</td></tr>\n",
				esc(c.ID), esc(c.Schema), esc(short(c.Version)), breakable(path(c.Path)), esc(c.Keyword), c.DeadLetters, c.Jobs, c.ReplayedHealed, esc(rate(c, c.HealRate)), esc(rate(c, c.FixRate)), flag,
				esc(received(c, 3)), esc(strings.Join(c.Examples, ", ")))
		}
		b.WriteString("</table></div>\n")
	}
	if imp := r.Impossible(); len(imp) > 0 {
		b.WriteString("<h2 id=\"impossible\">Impossible fields</h2>\n")
		for _, c := range imp {
			fmt.Fprintf(&b, "<div class=\"imp\"><p><b>%s <code>%s</code></b> (%s, version <code class=\"version\">%s</code>, cluster <code>%s</code>): %s.</p><p class=\"muted\">Seen %s to %s; jobs %s; received %s.</p><p><b>Try:</b> %s</p></div>\n",
				esc(c.Schema), esc(path(c.Path)), esc(c.Keyword), esc(short(c.Version)), esc(c.ID), esc(c.Reason), esc(day(c.FirstSeen)), esc(day(c.LastSeen)),
				esc(strings.Join(c.Examples, ", ")), esc(orNone(received(c, Received))), esc(c.Suggestion))
		}
	}
	if m := r.Masked(); len(m) > 0 {
		b.WriteString("<h2 id=\"masked\">Masked fields</h2>\n<p class=\"muted\">The heal rate blames them, but the model fixed them: their jobs died of other fields.</p>\n")
		for _, c := range m {
			fmt.Fprintf(&b, "<div class=\"msk\"><p><b>%s <code>%s</code></b> (%s, version <code class=\"version\">%s</code>, cluster <code>%s</code>): %s.</p><p><b>Try:</b> %s</p></div>\n",
				esc(c.Schema), esc(path(c.Path)), esc(c.Keyword), esc(short(c.Version)), esc(c.ID), esc(c.Reason), esc(c.Suggestion))
		}
	}
	b.WriteString("<h2 id=\"funnel\">Heal funnel</h2>\n")
	if len(r.Funnel) == 0 {
		b.WriteString("<p>No jobs.</p>\n")
	} else {
		funnelChart(&b, r)
		b.WriteString("<div class=\"wide\"><table id=\"funnel-table\">\n<tr><th>schema</th><th>version</th><th class=\"n\">jobs</th><th class=\"n\">first pass</th><th>succeeded at</th><th class=\"n\">dead-lettered</th><th>dead by class</th><th class=\"n\">replayed, healed</th><th class=\"n\">tokens per success</th><th class=\"n\">tokens on healing</th></tr>\n")
		for _, s := range r.Schemas() {
			f := r.Funnel[s]
			fmt.Fprintf(&b, "<tr><td>%s</td><td><code>%s</code></td><td class=\"n\">%d</td><td class=\"n\">%s</td><td>%s</td><td class=\"n\">%s</td><td>%s</td><td class=\"n\">%d</td><td class=\"n\">%s</td><td class=\"n\">%s</td></tr>\n",
				esc(f.Schema), esc(short(f.Version)), f.Jobs, esc(pct(f.FirstPass)), esc(steps(f)), esc(pct(ratio(f.DeadLettered, f.Jobs))), esc(classes(f)), f.ReplayedHealed, esc(perSuccess(f)), esc(pct(f.HealTokenShare)))
		}
		b.WriteString("</table></div>\n")
	}
	if r.costShown() {
		b.WriteString("<h2 id=\"cost\">Cost and models</h2>\n<p>Cost per success counts the failures paid for; models are the models of the final answers.</p>\n")
		b.WriteString("<div class=\"wide\"><table id=\"cost-table\">\n<tr><th>schema</th><th>version</th><th class=\"n\">cost</th><th class=\"n\">cost per success</th><th class=\"n\">cost on healing</th><th class=\"n\">healed by fallback</th><th>models</th></tr>\n")
		for _, s := range r.Schemas() {
			f := r.Funnel[s]
			c := costRow(f)
			fmt.Fprintf(&b, "<tr><td>%s</td><td><code>%s</code></td><td class=\"n\">%s</td><td class=\"n\">%s</td><td class=\"n\">%s</td><td class=\"n\">%s</td><td>%s</td></tr>\n",
				esc(f.Schema), esc(short(f.Version)), esc(c[0]), esc(c[1]), esc(c[2]), esc(c[3]), esc(c[4]))
		}
		b.WriteString("</table></div>\n")
	}
	if len(r.Lint) > 0 {
		b.WriteString("<h2 id=\"lint\">Schema lint</h2>\n<div class=\"wide\"><table>\n<tr><th>schema</th><th>file</th><th>path</th><th>rule</th><th>message</th><th>suggestion</th></tr>\n")
		for _, l := range r.Lint {
			fmt.Fprintf(&b, "<tr><td>%s</td><td>%s</td><td><code>%s</code></td><td>%s</td><td>%s</td><td>%s</td></tr>\n",
				esc(l.Schema), esc(l.File), esc(path(l.Path)), esc(l.Rule), esc(l.Message), esc(l.Suggestion))
		}
		b.WriteString("</table></div>\n")
	}
	b.WriteString("</body>\n</html>\n")
	_, err := w.Write(b.Bytes())
	return err
}

// label shortens a chart label to n runes, keeping its end (the field).
func label(s string, n int) string {
	r := []rune(s)
	if len(r) <= n {
		return s
	}
	return "…" + string(r[len(r)-n+1:])
}

// clusterChart draws the top clusters as horizontal bars as long as the
// jobs where the fingerprint failed, split into the jobs that healed, the
// dead letters where it had been fixed (masked) and the dead letters where
// it was still failing.
func clusterChart(b *bytes.Buffer, cs []Cluster) {
	const top, rowH, labelW, barW, countW = 15, 24, 330, 520, 150
	n := min(len(cs), top)
	maxJobs := 1
	for _, c := range cs[:n] {
		maxJobs = max(maxJobs, c.Jobs)
	}
	width, h := labelW+barW+countW, n*rowH+8
	fmt.Fprintf(b, "<svg id=\"cluster-chart\" role=\"img\" aria-label=\"top failure clusters\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n", width, h, width, h)
	for i, c := range cs[:n] {
		y := i*rowH + 4
		name := c.Schema + " " + path(c.Path) + " (" + c.Keyword + ")"
		fmt.Fprintf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\"><title>%s</title>%s</text>", labelW-8, y+13, esc(name), esc(label(name, 44)))
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
			fmt.Fprintf(b, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"17\" fill=\"%s\"><title>%d %s</title></rect>", x, y, wd, seg.fill, seg.n, esc(seg.what))
			x += wd
		}
		flag := ""
		switch {
		case c.Impossible:
			flag = " impossible"
		case c.Masked:
			flag = " masked"
		}
		fmt.Fprintf(b, "<text x=\"%.1f\" y=\"%d\">%d / %d%s</text>\n", x+6, y+13, c.DeadLetters, c.Jobs, flag)
	}
	b.WriteString("</svg>\n")
	fmt.Fprintf(b, "<p class=\"legend muted\">jobs where it failed at some attempt:<span style=\"background:%s\"></span>healed<span style=\"background:%s\"></span>dead-lettered for other fields (fixed here)<span style=\"background:%s\"></span>dead-lettered, still failing here; numbers: dead letters / jobs</p>\n",
		colHealed, colMasked, colStuck)
}

// funnelChart draws one stacked 100% bar per schema version: succeeded at
// attempt 1, 2, ... (greens) then dead-lettered by class (reds).
func funnelChart(b *bytes.Buffer, r *Report) {
	const rowH, labelW, barW = 28, 170, 700
	schemas := r.Schemas()
	greens := []string{"#1e8449", "#52be80", "#a9dfbf", "#d4efdf"}
	reds := []string{"#c0392b", "#e74c3c", "#f1948a", "#fadbd8"}
	h := len(schemas)*rowH + 8
	fmt.Fprintf(b, "<svg id=\"funnel-chart\" role=\"img\" aria-label=\"heal funnel\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\">\n", labelW+barW+10, h, labelW+barW+10, h)
	for i, s := range schemas {
		f := r.Funnel[s]
		y := i*rowH + 4
		fmt.Fprintf(b, "<text x=\"%d\" y=\"%d\" text-anchor=\"end\">%s</text>", labelW-8, y+14, esc(label(s, 24)))
		fmt.Fprintf(b, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"20\" fill=\"%s\"/>", labelW, y, barW, colBarBack)
		x := float64(labelW)
		seg := func(share float64, fill, short, title string, light bool) {
			wd := share * barW
			fmt.Fprintf(b, "<rect x=\"%.1f\" y=\"%d\" width=\"%.1f\" height=\"20\" fill=\"%s\"><title>%s</title></rect>", x, y, wd, fill, esc(title))
			if text := short + " " + pct(share); wd >= float64(len(text))*6.5+8 {
				cls := "in"
				if light {
					cls = ""
				}
				fmt.Fprintf(b, "<text class=\"%s\" x=\"%.1f\" y=\"%d\">%s</text>", cls, x+4, y+14, esc(text))
			}
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
		b.WriteString("\n")
	}
	b.WriteString("</svg>\n")
	b.WriteString("<p class=\"legend muted\">per schema version, share of its jobs: greens succeeded at attempt 1, 2, …; reds dead-lettered, by class</p>\n")
}
