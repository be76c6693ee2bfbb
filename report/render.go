package report

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/llmpipeline/pipeline/internal/htmlview"
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

// short and path are the console's own (htmlview): the text renderers
// and the HTML report show versions and paths alike.
var short, path = htmlview.Short, htmlview.Path

func day(t time.Time) string { return t.UTC().Format("2006-01-02 15:04") }

// scope is the report's header in words, one line per item.
type scope struct {
	index, outcomes, generated, versions, filter, totals string
}

func (r *Report) scope() scope {
	sc := scope{index: r.Source, generated: r.GeneratedAt.UTC().Format(htmlview.TimeLayout), outcomes: "none"}
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
	writeEvalsTable(&b, r)
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
	if len(r.Conflicts) > 0 {
		b.WriteString("\nMERGE CONFLICTS (long documents: fields where a later chunk answered another value than the one kept)\n")
		tw := tabwriter.NewWriter(&b, 0, 0, 2, ' ', 0)
		fmt.Fprintln(tw, "SCHEMA\tPATH\tDOCUMENTS\tVALUES")
		for _, c := range r.Conflicts {
			fmt.Fprintf(tw, "%s\t%s\t%d\t%d\n", c.Schema, path(c.Path), c.Documents, c.Values)
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
	writeEvalsMarkdown(&b, r)
	if r.costShown() {
		b.WriteString("\n## Cost and models\n\nCost per success counts the failures paid for; models are the models of the final answers.\n\n")
		b.WriteString("| schema | version | cost | cost per success | cost on healing | healed by fallback | models |\n|---|---|--:|--:|--:|--:|---|\n")
		for _, s := range r.Schemas() {
			f := r.Funnel[s]
			c := costRow(f)
			fmt.Fprintf(&b, "| %s | %s | %s | %s | %s | %s | %s |\n", md(f.Schema), code(short(f.Version)), c[0], c[1], c[2], c[3], md(c[4]))
		}
	}
	if len(r.Conflicts) > 0 {
		b.WriteString("\n## Merge conflicts\n\nLong documents: fields where a later chunk answered another value than the one kept.\n\n| schema | path | documents | values |\n|---|---|--:|--:|\n")
		for _, c := range r.Conflicts {
			fmt.Fprintf(&b, "| %s | %s | %d | %d |\n", md(c.Schema), code(path(c.Path)), c.Documents, c.Values)
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
