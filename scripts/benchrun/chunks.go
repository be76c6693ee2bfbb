package main

// The long-documents case (--only chunks): documents of --doc-bytes split at
// --chunk-chars into chunk jobs, the simulator at L and K, the documents
// merged by the last chunk to end. It measures the chunks' throughput
// against the ideal K/L, the share of the process's CPU spent merging, and
// the peak RSS, and splices its own section into the results file.

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"runtime"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/llmpipeline/pipeline/internal/app"
	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/queue"
	"github.com/llmpipeline/pipeline/job"
	"github.com/llmpipeline/pipeline/schemas"
)

// The case's shape, as issue 27 asks for it.
const (
	chunkDocs      = 20
	chunkDocBytes  = 2 << 20
	chunkChars     = 8000
	chunkK         = 256
	chunkLatency   = 500 * time.Millisecond
	chunksHeading  = "## Long documents"
	quickChunkDocs = 2
)

// timedDocs adds up the time spent merging documents.
type timedDocs struct {
	inner queue.Documents
	busy  atomic.Int64
	n     atomic.Int64
}

// Merge runs the merge on a thread of its own and counts that thread's
// CPU time (RUSAGE_THREAD), not the wall time: on a shared machine the
// wall time includes the waits for a CPU.
func (t *timedDocs) Merge(ctx context.Context, end queue.DocumentEnd) queue.Outcome {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	before := threadCPU()
	out := t.inner.Merge(ctx, end)
	t.busy.Add(int64(threadCPU() - before))
	t.n.Add(1)
	return out
}

// rusageThread is Linux's RUSAGE_THREAD (the calling thread's usage).
const rusageThread = 1

func threadCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(rusageThread, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// submitDocuments submits spec.Docs documents of spec.DocBytes, built of
// the example invoices as paragraphs, each split at spec.ChunkChars, one
// document at a time (so only one is in memory). It returns the chunk jobs
// published.
func submitDocuments(ctx context.Context, conn *broker.Conn, spec caseSpec) (int, error) {
	items, _, err := benchJobs("bench", 64)
	if err != nil {
		return 0, err
	}
	var paras []string
	for _, it := range items {
		j, err := job.Parse(it.Data)
		if err != nil {
			return 0, err
		}
		paras = append(paras, j.Input)
	}
	chunks := 0
	for d := range spec.Docs {
		var b strings.Builder
		b.Grow(spec.DocBytes + 1024)
		for i := 0; b.Len() < spec.DocBytes; i++ {
			if i > 0 {
				b.WriteString("\n\n")
			}
			b.WriteString(paras[(i+d)%len(paras)])
		}
		doc := job.Job{ID: fmt.Sprintf("doc-%03d", d), Schema: benchSchema, Input: b.String()}
		its, err := app.ChunkJobs(doc, job.Chunking{Chars: spec.ChunkChars}, app.RerunNone)
		if err != nil {
			return chunks, err
		}
		st, err := queue.Submit(ctx, conn, its, nil)
		if err != nil {
			return chunks, fmt.Errorf("submitting document %s: %w", doc.ID, err)
		}
		chunks += st.Chunks
	}
	return chunks, nil
}

// runChunkSection runs the long-documents case in a child process.
func runChunkSection(ctx context.Context, o options, self string, stdout, stderr io.Writer) caseResult {
	docs := chunkDocs
	if o.Quick {
		docs = quickChunkDocs
	}
	chunks := docs * (chunkDocBytes/chunkChars + 1)
	fmt.Fprintf(stdout, "\n== chunks: %d documents of %d MiB at --chunk-chars %d, simulator L=%s, K=%d\n", docs, chunkDocBytes>>20, chunkChars, chunkLatency, chunkK)
	r := runChild(ctx, self, []string{"-kind", "chunks", "-k", itoa(chunkK), "-latency", chunkLatency.String(),
		"-docs", itoa(docs), "-doc-bytes", itoa(chunkDocBytes), "-chunk-chars", itoa(chunkChars)},
		caseTimeout(chunks, chunkK, chunkLatency), stderr)
	withIdeal(&r, chunkK, chunkLatency)
	r.Section, r.Name = "chunks", "documents"
	printCase(stdout, r)
	fmt.Fprintf(stdout, "  %d documents, %d chunks; merges %.2fs = %.1f%% of the process's CPU\n", r.Documents, r.Chunks, r.MergeSeconds, 100*r.MergeShare)
	return r
}

// renderChunks is the section of the results file.
func renderChunks(r caseResult, when time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (from the run of %s with `--only chunks`): %d documents of %d MiB at `--chunk-chars %d`, simulator L = %s, K = %d\n\n",
		chunksHeading, when.UTC().Format("2006-01-02 15:04"), r.Documents, chunkDocBytes>>20, chunkChars, chunkLatency, chunkK)
	if r.Err != "" {
		fmt.Fprintf(&b, "The case failed: %s\n", oneLine(r.Err))
		return b.String()
	}
	b.WriteString("| goal | target | measured | verdict |\n|---|---|---|---|\n")
	fmt.Fprintf(&b, "| chunk throughput | >= 0.90 of the ideal K/L = %.0f chunks/s | %.1f chunks/s = %.3f | %s |\n", r.Ideal, r.JobsPerSec, r.Efficiency, verdict(true, r.Efficiency >= 0.90, fmt.Sprintf("%+.3f", r.Efficiency-0.90)))
	fmt.Fprintf(&b, "| merges' share of the process's CPU | < 5%% | %.2f s of %.1f s = %.2f%% (%d merges) | %s |\n", r.MergeSeconds, r.CPUSeconds, 100*r.MergeShare, r.Documents, verdict(true, r.MergeShare < 0.05, fmt.Sprintf("%.2f points to spare", 5-100*r.MergeShare)))
	fmt.Fprintf(&b, "| peak RSS | < 256 MB | %.0f MB | %s |\n", r.PeakRSSMB, verdict(true, r.PeakRSSMB < 256, fmt.Sprintf("%.0f MB to spare", 256-r.PeakRSSMB)))
	fmt.Fprintf(&b, "\n%d chunk jobs and %d documents (%d results, %d dead letters in all) in %.1f s from the workers' start to the last outcome; CPU %.1f s (%.2f ms per chunk), waiting for a CPU %.1f s. ",
		r.Chunks, r.Documents, r.Succeeded, r.DeadLettered, r.Seconds, r.CPUSeconds, 1000*r.CPUSeconds/float64(max(r.Chunks, 1)), r.CPUWait)
	b.WriteString("The merges' time is the CPU time (RUSAGE_THREAD, the merging goroutine locked to its thread) of the documents' merger: decoding every chunk's outcome, merging, validating, encoding; reading the chunks' outcomes back from the streams and storing the document is the queue's, counted in the process's CPU. Submit (splitting 2 MiB documents) is before the measured phase. The built-in invoice schema runs with its line items unbounded (its maxItems 200 removed): a 2 MiB document is not an invoice of at most 200 lines, and the case measures documents that end as results.\n")
	return b.String()
}

// spliceHeading replaces the section of path that starts with heading by
// section (appending it when absent), leaving the rest as it is.
func spliceHeading(path, heading, section string) string {
	old, err := os.ReadFile(path)
	if err != nil {
		return section
	}
	return spliceAt(string(old), heading, section)
}

func spliceAt(text, heading, section string) string {
	if text == "" {
		return section
	}
	start := strings.Index(text, heading)
	if start < 0 {
		return strings.TrimRight(text, "\n") + "\n\n" + section
	}
	end := len(text)
	if i := strings.Index(text[start+len(heading):], "\n## "); i >= 0 {
		end = start + len(heading) + i + 1
	}
	return text[:start] + section + text[end:]
}

// documentSchemas is reg with the invoice schema's line items unbounded:
// a document of 2 MiB is not an invoice of at most 200 lines, and the
// case measures documents that end as results (their merge validated by
// the fast path), not ones the schema refuses.
func documentSchemas(reg *schemas.Registry) (*schemas.Registry, error) {
	sc, ok := reg.Get(benchSchema)
	if !ok {
		return nil, fmt.Errorf("no built-in %s schema", benchSchema)
	}
	var doc map[string]any
	if err := json.Unmarshal(sc.Raw, &doc); err != nil {
		return nil, err
	}
	props, _ := doc["properties"].(map[string]any)
	items, _ := props["line_items"].(map[string]any)
	if items == nil {
		return nil, fmt.Errorf("the %s schema has no line_items", benchSchema)
	}
	delete(items, "maxItems")
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	unbounded, err := schemas.Compile(benchSchema, raw)
	if err != nil {
		return nil, fmt.Errorf("compiling the unbounded %s schema: %w", benchSchema, err)
	}
	return schemas.NewRegistry(unbounded)
}
