package worker

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/llmpipeline/pipeline/internal/queue"
	"github.com/llmpipeline/pipeline/job"
	"github.com/llmpipeline/pipeline/schemas"

	jsonv2 "github.com/go-json-experiment/json"
)

// maxMergeDiagnostics bounds the diagnostics a document's dead letter of
// class merge records.
const maxMergeDiagnostics = 50

// checkTruth runs the schema's truth checks (x-grounded, x-rules) on a
// document's merged data, which satisfies the JSON Schema, against the
// whole document's text, reassembled from its chunks' jobs. On success it
// records where each grounded value is in out.Grounding (code points of the
// document) and returns ok; on a failing check it records the diagnostics
// in out.MergeDiagnostics and returns the dead letter's reason.
func checkTruth(end queue.DocumentEnd, sc *schemas.Schema, merged []byte, out *job.Outcome) (reason string, ok bool) {
	if !sc.HasChecks() {
		return "", true
	}
	text, err := documentText(end)
	if err != nil {
		return fmt.Sprintf("the document's text cannot be reassembled from its chunks for the truth checks: %v", err), false
	}
	diags, omitted, gs, err := sc.Check(merged, schemas.NewInput(text), maxMergeDiagnostics)
	if err != nil {
		return "the merge of the chunks is not valid JSON for the truth checks: " + err.Error(), false
	}
	if len(diags) == 0 {
		out.Grounding = grounding(gs)
		return "", true
	}
	for _, d := range diags {
		out.MergeDiagnostics = append(out.MergeDiagnostics, job.Diagnostic{Path: d.Path, Keyword: d.Keyword, Message: d.Message, Expected: d.Expected, Received: d.Received})
	}
	return fmt.Sprintf("the merge of the %d chunks fails the schema's truth checks: %d problems, first %s [%s] %s",
		len(end.Chunks), len(diags)+omitted, diags[0].Path, diags[0].Keyword, diags[0].Message), false
}

// documentText is the whole document's text: each chunk's job holds its
// input, characters [Start, End) of the document (job.ChunkOf);
// consecutive chunks overlap, and each adds what lies past the text so far.
func documentText(end queue.DocumentEnd) (string, error) {
	type part struct {
		k, start, end, chars int
		input                string
	}
	parts := make([]part, 0, len(end.Chunks))
	for _, c := range end.Chunks {
		// Only the job's input and range are read: Merge decoded the rest.
		var co struct {
			Job struct {
				Input string       `json:"input"`
				Chunk *job.ChunkOf `json:"chunk"`
			} `json:"job"`
		}
		if err := jsonv2.Unmarshal(c.Payload, &co, job.DecodeOptions()); err != nil {
			return "", fmt.Errorf("chunk %d: %w", c.K, err)
		}
		j := co.Job
		if j.Chunk == nil {
			return "", fmt.Errorf("chunk %d's job is not a chunk", c.K)
		}
		if n := utf8.RuneCountInString(j.Input); n != j.Chunk.End-j.Chunk.Start {
			return "", fmt.Errorf("chunk %d's input is %d characters, its range [%d, %d)", c.K, n, j.Chunk.Start, j.Chunk.End)
		}
		parts = append(parts, part{k: c.K, start: j.Chunk.Start, end: j.Chunk.End, chars: j.Chunk.Chars, input: j.Input})
	}
	slices.SortFunc(parts, func(a, b part) int { return a.start - b.start })
	var b strings.Builder
	size := 0
	for _, p := range parts {
		size += len(p.input)
	}
	b.Grow(size) // the chunks' inputs, overlaps included: a bound
	at := 0      // code points written
	for _, p := range parts {
		switch {
		case p.start > at:
			return "", fmt.Errorf("characters %d to %d are in no chunk (chunk %d starts at %d)", at, p.start, p.k, p.start)
		case p.end <= at:
			continue
		}
		rest := p.input
		for skip := at - p.start; skip > 0; skip-- {
			_, size := utf8.DecodeRuneInString(rest)
			rest = rest[size:]
		}
		b.WriteString(rest)
		at = p.end
	}
	if len(parts) == 0 {
		return "", errors.New("no chunks")
	}
	if chars := parts[0].chars; chars > 0 && at != chars {
		return "", fmt.Errorf("the chunks cover %d of the document's %d characters", at, chars)
	}
	return b.String(), nil
}
