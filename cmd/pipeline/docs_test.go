package main

import (
	"bytes"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/urfave/cli/v2"
)

var updateDocs = flag.Bool("update", false, "rewrite docs/configuration.md from the flag definitions")

// configurationDoc is where the generated flag reference lives, from this
// package's directory.
const configurationDoc = "../../docs/configuration.md"

// configurationHead is the hand-written head of docs/configuration.md; the
// rest of the page is generated from the flags of the CLI.
const configurationHead = `# Configuration reference

<!-- Generated from the flag definitions by cmd/pipeline/docs_test.go: do not edit by hand.
     Edit the flags (or the head in docs_test.go), then run
     go test ./cmd/pipeline -run TestConfigurationDoc -update -->

Every setting is a flag; most have an environment variable, and the same settings can be
written in a YAML file given by ` + "`--config FILE`" + ` (or ` + "`PIPELINE_CONFIG`" + `), keyed by the long flag
names: settings of every command at the top level, a command's own under its name. When a
setting is given more than once, **flags win over environment variables, which win over the
config file, which wins over the defaults**. ` + "`pipeline config show`" + ` prints the settings in
effect and where each came from; ` + "`pipeline COMMAND --help`" + ` prints the same table as below for one
command.

Flags go before arguments (` + "`pipeline submit --data-dir d jobs.jsonl`" + `): a flag after an
argument is refused (exit 2). Durations are Go durations (` + "`90s`, `10m`, `720h`" + `); sizes take
` + "`KB`, `MB`, `GB` (powers of 1000), `KiB`, `MiB`, `GiB` (powers of 1024)" + ` or plain bytes.

Environment variables that are not flags:

| variable | what |
| --- | --- |
| ` + "`OPENAI_API_KEY`, `ANTHROPIC_API_KEY`" + ` | the providers' API keys: only ever read from the environment, never from a flag |
| ` + "`OPENAI_BASE_URL`, `ANTHROPIC_BASE_URL`" + ` | a provider's base URL when ` + "`--llm-url`" + ` is not given (and for a fallback model of another provider than ` + "`--model`" + `'s) |
| ` + "`GOMEMLIMIT`" + ` | overrides the soft memory limit of ` + "`run`" + ` (` + "`--memory-limit`" + `) and of ` + "`submit`" + ` |
| ` + "`TMPDIR`" + ` | where ` + "`submit`" + ` spools stdin and keeps the sorted runs of its job ids |
| ` + "`PIPELINE_UI_ARTIFACTS`" + ` | tests only: where ` + "`TestConsoleInBrowser`" + ` keeps its screenshots |

What the settings do, by topic: [running workers](run.md), [providers and models](providers.md),
[batch mode](batch.md), [jobs and schemas](jobs.md), [the console](console.md),
[the embedded server and clusters](cluster.md), [guarantees](guarantees.md).

`

// TestConfigurationDoc holds docs/configuration.md to the flag definitions:
// every command of the CLI main builds, every flag with its aliases, env
// vars, default and usage.
func TestConfigurationDoc(t *testing.T) {
	t.Parallel()
	got := configurationMarkdown(newApp(strings.NewReader(""), io.Discard, io.Discard))
	if *updateDocs {
		if err := os.WriteFile(configurationDoc, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(configurationDoc)
	if err != nil {
		t.Fatalf("reading the configuration reference: %v (run `go test ./cmd/pipeline -run TestConfigurationDoc -update`)", err)
	}
	if string(want) != got {
		t.Errorf("docs/configuration.md does not match the flag definitions (first difference: %s); run `go test ./cmd/pipeline -run TestConfigurationDoc -update`", firstDiff(string(want), got))
	}
}

// firstDiff names the first line where a and b differ.
func firstDiff(a, b string) string {
	al, bl := strings.Split(a, "\n"), strings.Split(b, "\n")
	for i := 0; i < len(al) || i < len(bl); i++ {
		var x, y string
		if i < len(al) {
			x = al[i]
		}
		if i < len(bl) {
			y = bl[i]
		}
		if x != y {
			return fmt.Sprintf("line %d: the file has %q, the flags give %q", i+1, x, y)
		}
	}
	return "none"
}

// configurationMarkdown renders the flag reference of app: the head, an
// index of the commands, then one table per command.
func configurationMarkdown(app *cli.App) string {
	var cmds []cmdDoc
	var walk func(prefix string, cs []*cli.Command)
	walk = func(prefix string, cs []*cli.Command) {
		for _, c := range cs {
			if c.Hidden {
				continue
			}
			path := strings.TrimSpace(prefix + " " + c.Name)
			cmds = append(cmds, cmdDoc{path: path, cmd: c})
			walk(path, c.Subcommands)
		}
	}
	walk("pipeline", app.Commands)

	var b bytes.Buffer
	b.WriteString(configurationHead)
	b.WriteString("## Commands\n\n| command | what it does |\n| --- | --- |\n")
	for _, c := range cmds {
		fmt.Fprintf(&b, "| [`%s`](#%s) | %s |\n", c.path, anchorOf(c.path), cell(c.cmd.Usage))
	}
	b.WriteString("\n")
	for _, c := range cmds {
		fmt.Fprintf(&b, "## %s\n\n", c.path)
		if c.cmd.Usage != "" {
			fmt.Fprintf(&b, "%s\n\n", cell(c.cmd.Usage))
		}
		usage := c.path
		if len(c.cmd.Subcommands) > 0 {
			usage += " COMMAND"
		}
		if a := strings.TrimSpace(c.cmd.ArgsUsage); a != "" {
			usage += " [flags] " + a
		} else if len(visibleFlags(c.cmd.Flags)) > 0 {
			usage += " [flags]"
		}
		fmt.Fprintf(&b, "```\n%s\n```\n\n", usage)
		fl := visibleFlags(c.cmd.Flags)
		if len(fl) == 0 {
			b.WriteString("No flags.\n\n")
			continue
		}
		b.WriteString("| flag | env | default | meaning |\n| --- | --- | --- | --- |\n")
		for _, f := range fl {
			b.WriteString(flagRow(f))
		}
		b.WriteString("\n")
	}
	return strings.TrimRight(b.String(), "\n") + "\n"
}

type cmdDoc struct {
	path string
	cmd  *cli.Command
}

// visibleFlags is what `--help` lists, without the help flag itself.
func visibleFlags(fs []cli.Flag) []cli.Flag {
	var out []cli.Flag
	for _, f := range fs {
		if v, ok := f.(cli.VisibleFlag); ok && !v.IsVisible() {
			continue
		}
		if f.Names()[0] == "help" {
			continue
		}
		out = append(out, f)
	}
	return out
}

// flagRow is one flag as a table row: its names (with the value's
// placeholder), env vars, default and usage, as `--help` shows them.
func flagRow(f cli.Flag) string {
	df, ok := f.(cli.DocGenerationFlag)
	if !ok {
		return fmt.Sprintf("| %s | | | |\n", flagNames(f.Names(), ""))
	}
	placeholder, usage := unquote(df.GetUsage())
	if df.TakesValue() && placeholder == "" {
		placeholder = "value"
	}
	if !df.TakesValue() {
		placeholder = ""
	}
	names := flagNames(df.Names(), placeholder)
	if s, ok := f.(cli.DocGenerationSliceFlag); ok && s.IsSliceFlag() {
		names += " (repeatable)"
	}
	var env []string
	for _, v := range df.GetEnvVars() {
		env = append(env, "`"+v+"`")
	}
	def := df.GetDefaultText()
	if bf, ok := f.(*cli.BoolFlag); ok && bf.DisableDefaultText {
		def = ""
	}
	if def != "" {
		def = "`" + strings.ReplaceAll(def, "`", "'") + "`"
	}
	return fmt.Sprintf("| %s | %s | %s | %s |\n", names, strings.Join(env, ", "), strings.ReplaceAll(def, "|", `\|`), cell(usage))
}

// flagNames is `--name PLACEHOLDER`, `-n`, as the help lists them.
func flagNames(names []string, placeholder string) string {
	var out []string
	for i, n := range names {
		p := "--"
		if len(n) == 1 {
			p = "-"
		}
		s := p + n
		if i == 0 && placeholder != "" {
			s += " " + placeholder
		}
		out = append(out, "`"+s+"`")
	}
	return strings.Join(out, ", ")
}

// unquote splits a usage text into urfave/cli's placeholder (the first
// back-quoted word) and the usage without the quotes.
func unquote(usage string) (string, string) {
	i := strings.IndexByte(usage, '`')
	if i < 0 {
		return "", usage
	}
	j := strings.IndexByte(usage[i+1:], '`')
	if j < 0 {
		return "", usage
	}
	name := usage[i+1 : i+1+j]
	return name, usage[:i] + name + usage[i+2+j:]
}

// cell makes s safe inside a Markdown table cell.
func cell(s string) string {
	s = strings.NewReplacer("|", `\|`, "\n", " ", "<", "&lt;", ">", "&gt;", "*", `\*`).Replace(s)
	return strings.Join(strings.Fields(s), " ")
}

var anchorDrop = regexp.MustCompile(`[^\p{L}\p{N}\- _]`)

// anchorOf is the anchor GitHub gives a heading (without the numbering
// of repeated headings).
func anchorOf(heading string) string {
	h := strings.ToLower(strings.TrimSpace(heading))
	h = anchorDrop.ReplaceAllString(h, "")
	return strings.ReplaceAll(h, " ", "-")
}

// docFiles are the pages of the manual: the README and docs/*.md, from
// this package's directory.
func docFiles(t *testing.T) []string {
	t.Helper()
	pages, err := filepath.Glob("../../docs/*.md")
	if err != nil || len(pages) == 0 {
		t.Fatalf("no pages under docs/: %v", err)
	}
	return append([]string{"../../README.md"}, pages...)
}

// docText is every page of the manual together: what a user can read.
func docText(t *testing.T) string {
	t.Helper()
	var b strings.Builder
	for _, f := range docFiles(t) {
		b.Write(mustRead(t, f))
		b.WriteString("\n")
	}
	return b.String()
}

var (
	mdLink     = regexp.MustCompile(`\[[^\]]*\]\(([^)\s]+)(?:\s+"[^"]*")?\)`)
	codeSpan   = regexp.MustCompile("`[^`\n]*`")
	mdHeading  = regexp.MustCompile(`^#{1,6}\s+(.*?)\s*#*\s*$`)
	linkInText = regexp.MustCompile(`\[([^\]]*)\]\([^)]*\)`)
)

// prose returns the lines of a Markdown page outside fenced code blocks.
func prose(doc string) []string {
	var out []string
	fenced := false
	for _, l := range strings.Split(doc, "\n") {
		if t := strings.TrimSpace(l); strings.HasPrefix(t, "```") || strings.HasPrefix(t, "~~~") {
			fenced = !fenced
			continue
		}
		if !fenced {
			out = append(out, l)
		}
	}
	return out
}

// anchors are the anchors GitHub gives the headings of a page, repeated
// headings numbered -1, -2, ...
func anchors(doc string) map[string]bool {
	seen := map[string]int{}
	out := map[string]bool{}
	for _, l := range prose(doc) {
		m := mdHeading.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		a := anchorOf(linkInText.ReplaceAllString(m[1], "$1"))
		if n := seen[a]; n > 0 {
			out[fmt.Sprintf("%s-%d", a, n)] = true
		} else {
			out[a] = true
		}
		seen[a]++
	}
	return out
}

// TestDocsLinks: every relative link of the README and of docs/ names a
// file that exists, and every #anchor a heading of its page.
func TestDocsLinks(t *testing.T) {
	t.Parallel()
	for _, file := range docFiles(t) {
		doc := string(mustRead(t, file))
		for i, l := range prose(doc) {
			for _, m := range mdLink.FindAllStringSubmatch(codeSpan.ReplaceAllString(l, ""), -1) {
				target := m[1]
				if strings.Contains(target, "://") || strings.HasPrefix(target, "mailto:") {
					continue
				}
				path, anchor, _ := strings.Cut(target, "#")
				dest := file
				if path != "" {
					dest = filepath.Join(filepath.Dir(file), filepath.FromSlash(path))
				}
				where := fmt.Sprintf("%s: line %d of its prose: link %q", strings.TrimPrefix(file, "../../"), i+1, target)
				body, err := os.ReadFile(dest)
				if err != nil {
					if st, serr := os.Stat(dest); serr != nil || !st.IsDir() {
						t.Errorf("%s: no such file %s", where, dest)
					}
					continue
				}
				if anchor != "" && strings.HasSuffix(dest, ".md") && !anchors(string(body))[anchor] {
					t.Errorf("%s: %s has no heading with the anchor #%s", where, dest, anchor)
				}
			}
		}
	}
}

// TestREADMEFrontDoor: the README stays a front door: at most 350 lines,
// the demo and the test command CI runs at its very top, links into at
// least five pages of docs/.
func TestREADMEFrontDoor(t *testing.T) {
	t.Parallel()
	readme := string(mustRead(t, "../../README.md"))
	if n := strings.Count(readme, "\n"); n > 350 {
		t.Errorf("README.md has %d lines, at most 350: move the detail into docs/", n)
	}
	ci := string(mustRead(t, "../../.ci/run"))
	m := regexp.MustCompile(`(?m)^exec (.+)$`).FindStringSubmatch(ci)
	if m == nil {
		t.Fatalf(".ci/run has no exec line:\n%s", ci)
	}
	testCmd := strings.TrimSpace(m[1])
	start := strings.Index(readme, "```")
	end := -1
	if start >= 0 {
		end = strings.Index(readme[start+3:], "```")
	}
	if start < 0 || end < 0 || start > 600 {
		t.Fatalf("README.md does not open with a code block of its two commands")
	}
	first := readme[start : start+3+end]
	for _, want := range []string{"go run ./cmd/pipeline demo", "\n" + testCmd + " "} {
		if !strings.Contains(first, want) {
			t.Errorf("README.md's first code block lacks %q (the test command must be what .ci/run runs: %s):\n%s", strings.TrimSpace(want), testCmd, first)
		}
	}
	pages := map[string]bool{}
	for _, l := range mdLink.FindAllStringSubmatch(readme, -1) {
		if p, _, _ := strings.Cut(l[1], "#"); strings.HasPrefix(p, "docs/") && strings.HasSuffix(p, ".md") {
			pages[p] = true
		}
	}
	if len(pages) < 5 {
		t.Errorf("README.md links %d pages of docs/, want at least 5: %v", len(pages), pages)
	}
}

var metricName = regexp.MustCompile(`(?:Name:\s*|NewDesc\(\s*)"(pipeline_[a-z_]+)"`)

// TestMetricsDocumented: every Prometheus metric the module defines is
// named in the manual.
func TestMetricsDocumented(t *testing.T) {
	t.Parallel()
	manual := docText(t)
	var names []string
	err := filepath.WalkDir("../..", func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(p, ".go") || strings.HasSuffix(p, "_test.go") {
			return nil
		}
		src, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range metricName.FindAllSubmatch(src, -1) {
			names = append(names, string(m[1]))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(names) < 10 {
		t.Fatalf("found %d metric definitions, want the module's (at least 10): %v", len(names), names)
	}
	for _, n := range names {
		if !strings.Contains(manual, "`"+n+"`") {
			t.Errorf("metric %s is named neither in README.md nor in docs/", n)
		}
	}
}
