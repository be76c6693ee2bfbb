package faults

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/chunk"
	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/nats-io/nats.go/jetstream"
)

// chunkScenarios are the long documents' guarantees.
func chunkScenarios() []scenario {
	return []scenario{
		{"kill -9 three times while documents' chunks run and documents end", scenarioChunksKill9},
		{"documents' chunks on two processes, the joined one killed -9", scenarioChunksTwoProcesses},
	}
}

// chunkChars splits the scenario's documents into about seven chunks each.
const chunkChars = 300

// longDocs writes n documents, each the inputs of eight example jobs as
// paragraphs, and returns the file and, per document id, its chunk ids.
func longDocs(t *testing.T, dir string, n int) (string, map[string][]string) {
	t.Helper()
	examples := exampleJobs(t, 8*n, "invoice")
	var b bytes.Buffer
	chunks := map[string][]string{}
	for d := range n {
		var paras []string
		for _, e := range examples[8*d : 8*d+8] {
			var j struct{ Input string }
			if err := json.Unmarshal(e.line, &j); err != nil {
				t.Fatal(err)
			}
			paras = append(paras, j.Input)
		}
		id := fmt.Sprintf("doc-%02d", d)
		input := strings.Join(paras, "\n\n")
		line, _ := json.Marshal(map[string]string{"id": id, "schema": "invoice", "input": input})
		b.Write(line)
		b.WriteByte('\n')
		for k := range chunk.Split(input, chunkChars, 0) {
			chunks[id] = append(chunks[id], fmt.Sprintf("%s#%d", id, k+1))
		}
		if len(chunks[id]) < 3 {
			t.Fatalf("document %s: %d chunks, want several", id, len(chunks[id]))
		}
	}
	path := filepath.Join(dir, "docs.jsonl")
	if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, chunks
}

// scenarioChunksKill9: documents split into chunk jobs; the worker is
// killed with kill -9 three times (after a quarter, a half and three
// quarters of the outcomes: chunks in flight, chunks stored and not acked,
// documents between their last chunk's outcome and their own), then a run
// until idle finishes. Every chunk and every document ends exactly once,
// and each document's outcome counts all its chunks.
func scenarioChunksKill9(t *testing.T) row {
	dir := t.TempDir()
	file, chunks := longDocs(t, dir, 12)
	var submitted []string
	for id, cs := range chunks {
		submitted = append(submitted, id)
		submitted = append(submitted, cs...)
	}
	env := childEnv()
	pipeline(t, "submit", env, "submit", "--data-dir", dir, "--chunk-chars", fmt.Sprint(chunkChars), file).mustSucceed(t)

	total := uint64(len(submitted))
	for round, at := range []uint64{total / 4, total / 2, 3 * total / 4} {
		run := pipeline(t, fmt.Sprint("run-", round+1), env, runArgs("--data-dir", dir)...)
		nc, js := connectJS(t, embeddedURL(t, run, dir))
		waitStored(t, run, js, at)
		run.kill9(t)
		nc.Close()
	}
	last := pipeline(t, "run-last", env, runArgs("--data-dir", dir, "--until-idle")...)
	last.mustSucceed(t)

	conn := openEmbedded(t, dir)
	a := collect(t, conn.JetStream(), filepath.Join(dir, "pipeline.db"))
	r := a.check(t, "", submitted)
	docs := documentOutcomes(t, conn.JetStream())
	if err := conn.Close(); err != nil {
		t.Errorf("closing the audit server: %v", err)
	}
	for id, cs := range chunks {
		c, ok := docs[id]
		if !ok {
			continue // a.check named it lost
		}
		if c.Total != len(cs) {
			t.Errorf("document %s: outcome counts %d chunks, %d were submitted", id, c.Total, len(cs))
		}
	}
	r.Note = fmt.Sprintf("%d documents of %d chunks; killed after %d, %d and %d outcomes; restart --until-idle; every document's outcome counts all its chunks%s",
		len(chunks), len(submitted)-len(chunks), total/4, total/2, 3*total/4, stranded(last))
	return r
}

// documentOutcomes reads the chunk counts of every document's outcome on
// RESULTS and DLQ, by job id.
func documentOutcomes(t *testing.T, js jetstream.JetStream) map[string]struct{ Total, Succeeded int } {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	out := map[string]struct{ Total, Succeeded int }{}
	for _, s := range []string{broker.StreamResults, broker.StreamDLQ} {
		err := readStream(ctx, js, s, func(m *jetstream.RawStreamMsg) error {
			var o struct {
				JobID  string `json:"job_id"`
				Chunks *struct {
					Total     int `json:"total"`
					Succeeded int `json:"succeeded"`
				} `json:"chunks"`
			}
			if err := json.Unmarshal(m.Data, &o); err != nil || o.Chunks == nil {
				return nil // a chunk's or an offloaded body: a.check counted it
			}
			out[o.JobID] = struct{ Total, Succeeded int }{o.Chunks.Total, o.Chunks.Succeeded}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	return out
}

// scenarioChunksTwoProcesses: two runs on one data dir take chunks of the
// same documents (the second joins the first's server); the second is
// killed with kill -9 a third of the way. The first finishes, its own
// chunks and the dead one's (after --ack-wait), and a last run indexes
// what the first did not: every chunk and every document ends once, the
// documents concluded by whichever process ended their last chunk.
func scenarioChunksTwoProcesses(t *testing.T) row {
	dir := t.TempDir()
	file, chunks := longDocs(t, dir, 12)
	var submitted []string
	for id, cs := range chunks {
		submitted = append(submitted, id)
		submitted = append(submitted, cs...)
	}
	env := childEnv()
	pipeline(t, "submit", env, "submit", "--data-dir", dir, "--chunk-chars", fmt.Sprint(chunkChars), file).mustSucceed(t)

	run1 := pipeline(t, "run-1", env, embeddedRunArgs(simLatency, "--data-dir", dir, "--until-idle", "--sink=false")...)
	url := embeddedURL(t, run1, dir)
	run2 := pipeline(t, "run-2", env, embeddedRunArgs(simLatency, "--data-dir", dir)...)
	nc, js := connectJS(t, url)
	waitStored(t, run2, js, uint64(len(submitted)/3))
	nc.Close()
	if pid := ownerPID(dir); pid != run1.cmd.Process.Pid {
		t.Fatalf("nats.json names pid %d, not run-1 %d: run-2 did not join", pid, run1.cmd.Process.Pid)
	}
	run2.kill9(t)
	run1.mustSucceed(t)
	last := pipeline(t, "run-last", env, runArgs("--data-dir", dir, "--until-idle")...)
	last.mustSucceed(t)

	conn := openEmbedded(t, dir)
	a := collect(t, conn.JetStream(), filepath.Join(dir, "pipeline.db"))
	r := a.check(t, "", submitted)
	docs := documentOutcomes(t, conn.JetStream())
	if err := conn.Close(); err != nil {
		t.Errorf("closing the audit server: %v", err)
	}
	for id, cs := range chunks {
		if c, ok := docs[id]; ok && c.Total != len(cs) {
			t.Errorf("document %s: outcome counts %d chunks, %d were submitted", id, c.Total, len(cs))
		}
	}
	r.Note = fmt.Sprintf("%d documents of %d chunks on two processes (run-2 joined run-1's server); run-2 killed after %d outcomes; run-1 finished; every document's outcome counts all its chunks%s",
		len(chunks), len(submitted)-len(chunks), len(submitted)/3, stranded(run1, last))
	return r
}
