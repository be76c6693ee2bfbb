package index

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/llmpipeline/pipeline/internal/escape"
	"github.com/llmpipeline/pipeline/job"
)

// WriteTranscript writes an outcome as `pipeline dlq show` prints it: the
// job (its input as text, with its line breaks, beside its other fields),
// then every attempt with its temperature, finish reason, repairs, tokens,
// latency, raw output and diagnostics, readable in a terminal. Control
// characters of the stored text (a model's ESC, BEL, CR, a bidi override)
// are printed as escapes (internal/escape), never raw.
func WriteTranscript(w io.Writer, o job.Outcome) error {
	b := bufio.NewWriter(w)
	l := escape.Line
	fmt.Fprintf(b, "job       %s (run %d)\n", l(o.JobID), o.Run)
	fmt.Fprintf(b, "schema    %s version %s\n", l(o.Schema), l(o.SchemaVersion))
	status := o.Status
	if o.Class != "" {
		status += " (" + string(o.Class) + ")"
	}
	fmt.Fprintf(b, "status    %s after %d attempt(s), %d deliveries\n", l(status), o.Attempts, o.Deliveries)
	if o.Reason != "" {
		fmt.Fprintf(b, "reason    %s\n", l(o.Reason))
	}
	if o.Hint != "" {
		fmt.Fprintf(b, "hint      %s\n", l(o.Hint))
	}
	if o.Model != "" {
		fmt.Fprintf(b, "model     %s\n", l(o.Model))
	}
	if !o.FinishedAt.IsZero() {
		fmt.Fprintf(b, "finished  %s (took %s)\n", o.FinishedAt.UTC().Format(time.RFC3339), o.FinishedAt.Sub(o.StartedAt).Round(time.Millisecond))
	}
	for i, f := range o.Files {
		fmt.Fprintf(b, "file %d    %s (%s, %d bytes, sha256 %s)\n", i+1, l(f.Name), l(f.MediaType), f.Bytes, l(f.SHA256))
	}
	if len(o.Job) > 0 {
		b.WriteString("\n--- job\n")
		b.WriteString(escape.Text(JobText(o.Job, "  ")))
	}
	for _, a := range o.Trace {
		verdict := "valid"
		if a.Class != "" {
			verdict = string(a.Class)
		}
		fmt.Fprintf(b, "\n--- attempt %d: %s (temperature %.2f, finish %s, %d+%d tokens, %d ms",
			a.N, l(verdict), a.Temperature, l(orDash(a.FinishReason)), a.PromptTokens, a.CompletionTokens, a.LatencyMS)
		if a.TransportRetries > 0 {
			fmt.Fprintf(b, ", %d transport retries", a.TransportRetries)
		}
		b.WriteString(")\n")
		if len(a.Repairs) > 0 {
			fmt.Fprintf(b, "repairs: %s\n", l(strings.Join(a.Repairs, ", ")))
		}
		b.WriteString("raw output:\n")
		b.WriteString(indent(escape.Text(a.Raw), "  │ "))
		for _, d := range a.Diagnostics {
			path := d.Path
			if path == "" {
				path = "(root)"
			}
			fmt.Fprintf(b, "  ✗ %s [%s] %s", l(path), l(d.Keyword), l(d.Message))
			if d.Expected != "" {
				fmt.Fprintf(b, "; expected %s", l(d.Expected))
			}
			if d.Received != "" {
				fmt.Fprintf(b, "; received %s", l(d.Received))
			}
			b.WriteString("\n")
		}
		if a.DiagnosticsOmitted > 0 {
			fmt.Fprintf(b, "  … %d more diagnostics omitted\n", a.DiagnosticsOmitted)
		}
	}
	if err := b.Flush(); err != nil {
		return fmt.Errorf("writing the transcript of job %s: %w", l(o.JobID), err)
	}
	return nil
}

// JobText is a stored job as a person reads it: one field a line (id,
// schema, then the others by name), a string as its text and any other
// value as compact JSON, and the input last as a block of text with its
// line breaks, each line after prefix. A job that is no JSON object is
// shown indented as it is. Control characters are left as they are: a
// terminal's caller escapes them (escape.Text), a page's its markup.
func JobText(job json.RawMessage, prefix string) string {
	var fields map[string]json.RawMessage
	if json.Unmarshal(job, &fields) != nil || fields == nil {
		return indent(pretty(job), prefix)
	}
	keys := make([]string, 0, len(fields))
	width := 0
	for k := range fields {
		if k != "id" && k != "schema" && k != "input" {
			keys = append(keys, k)
		}
		width = max(width, utf8.RuneCountInString(k))
	}
	sort.Strings(keys)
	for _, k := range []string{"schema", "id"} {
		if _, ok := fields[k]; ok {
			keys = append([]string{k}, keys...)
		}
	}
	if _, ok := fields["input"]; ok {
		keys = append(keys, "input")
	}
	var b strings.Builder
	for _, k := range keys {
		v := fieldText(fields[k])
		if !strings.Contains(v, "\n") && k != "input" {
			fmt.Fprintf(&b, "%s%-*s  %s\n", prefix, width, k, v)
			continue
		}
		// a text of several lines (the input always): a block under its name
		fmt.Fprintf(&b, "%s%s:\n", prefix, k)
		b.WriteString(indent(v, prefix+"  │ "))
	}
	return b.String()
}

// fieldText is a job field's value: a string as its text, anything else as
// compact JSON with < > & as they are.
func fieldText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var v any
	if dec.Decode(&v) != nil {
		return string(raw)
	}
	var out bytes.Buffer
	enc := json.NewEncoder(&out)
	enc.SetEscapeHTML(false)
	if enc.Encode(v) != nil {
		return string(raw)
	}
	return strings.TrimSuffix(out.String(), "\n")
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func pretty(raw json.RawMessage) string {
	var v any
	if json.Unmarshal(raw, &v) != nil {
		return string(raw)
	}
	out, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return string(raw)
	}
	return string(out)
}

func indent(s, prefix string) string {
	if s == "" {
		return prefix + "(empty)\n"
	}
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = prefix + l
	}
	return strings.Join(lines, "\n") + "\n"
}
