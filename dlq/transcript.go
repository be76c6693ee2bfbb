package dlq

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"
)

// WriteTranscript writes an outcome as `pipeline dlq show` prints it: the
// job, then every attempt with its temperature, finish reason, repairs,
// tokens, latency, raw output and diagnostics, readable in a terminal.
func WriteTranscript(w io.Writer, o Outcome) error {
	b := bufio.NewWriter(w)
	fmt.Fprintf(b, "job       %s (run %d)\n", o.JobID, o.Run)
	fmt.Fprintf(b, "schema    %s version %s\n", o.Schema, o.SchemaVersion)
	status := o.Status
	if o.Class != "" {
		status += " (" + o.Class + ")"
	}
	fmt.Fprintf(b, "status    %s after %d attempt(s), %d deliveries\n", status, o.Attempts, o.Deliveries)
	if o.Reason != "" {
		fmt.Fprintf(b, "reason    %s\n", o.Reason)
	}
	if o.Hint != "" {
		fmt.Fprintf(b, "hint      %s\n", o.Hint)
	}
	if o.Model != "" {
		fmt.Fprintf(b, "model     %s\n", o.Model)
	}
	if !o.FinishedAt.IsZero() {
		fmt.Fprintf(b, "finished  %s (took %s)\n", o.FinishedAt.UTC().Format(time.RFC3339), o.FinishedAt.Sub(o.StartedAt).Round(time.Millisecond))
	}
	if len(o.Job) > 0 {
		b.WriteString("\n--- job\n")
		b.WriteString(indent(pretty(o.Job), "  "))
	}
	for _, a := range o.Trace {
		verdict := "valid"
		if a.Class != "" {
			verdict = a.Class
		}
		fmt.Fprintf(b, "\n--- attempt %d: %s (temperature %.2f, finish %s, %d+%d tokens, %d ms",
			a.N, verdict, a.Temperature, orDash(a.FinishReason), a.PromptTokens, a.CompletionTokens, a.LatencyMS)
		if a.TransportRetries > 0 {
			fmt.Fprintf(b, ", %d transport retries", a.TransportRetries)
		}
		b.WriteString(")\n")
		if len(a.Repairs) > 0 {
			fmt.Fprintf(b, "repairs: %s\n", strings.Join(a.Repairs, ", "))
		}
		b.WriteString("raw output:\n")
		b.WriteString(indent(a.Raw, "  │ "))
		for _, d := range a.Diagnostics {
			path := d.Path
			if path == "" {
				path = "(root)"
			}
			fmt.Fprintf(b, "  ✗ %s [%s] %s", path, d.Keyword, d.Message)
			if d.Expected != "" {
				fmt.Fprintf(b, "; expected %s", d.Expected)
			}
			if d.Received != "" {
				fmt.Fprintf(b, "; received %s", d.Received)
			}
			b.WriteString("\n")
		}
		if a.DiagnosticsOmitted > 0 {
			fmt.Fprintf(b, "  … %d more diagnostics omitted\n", a.DiagnosticsOmitted)
		}
	}
	if err := b.Flush(); err != nil {
		return fmt.Errorf("writing the transcript of job %s: %w", o.JobID, err)
	}
	return nil
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
