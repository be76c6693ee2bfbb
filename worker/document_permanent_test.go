package worker

import (
	"strings"
	"testing"

	"github.com/llmpipeline/pipeline/heal"
	"github.com/llmpipeline/pipeline/internal/queue"
	"github.com/llmpipeline/pipeline/job"
	"github.com/llmpipeline/pipeline/schemas"
)

// TestDocumentMergePermanentFailures: conditions that retrying never
// changes end the document as a dead letter naming them, never a retry
// (which handed the last chunk back until max-deliver): an unknown schema
// (class merge, every chunk's answer kept), and a chunk outcome that
// cannot be read or is gone (a failed chunk: class partial).
func TestDocumentMergePermanentFailures(t *testing.T) {
	t.Parallel()
	reg, err := schemas.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	loop, err := heal.New(&countingModel{}, heal.Config{})
	if err != nil {
		t.Fatal(err)
	}
	h, err := New(Config{Schemas: reg, Loop: loop, Model: "test"})
	if err != nil {
		t.Fatal(err)
	}
	ds := h.Documents()
	text := strings.Repeat("A sentence of the document. ", 30)
	check := func(name, schema string, ends []queue.ChunkEnd, class job.Class, reason string) {
		t.Helper()
		got := ds.Merge(t.Context(), queue.DocumentEnd{ID: "d", MsgID: "d", Schema: schema, Chunks: ends})
		rec, ok := got.Record.(*job.Outcome)
		if got.Action != queue.ActionDeadLetter || !ok {
			t.Errorf("%s: action %d (%s), want a dead letter", name, got.Action, got.Reason)
			return
		}
		if rec.Class != class || !strings.Contains(rec.Reason, reason) {
			t.Errorf("%s: class %q reason %q, want class %q naming %q", name, rec.Class, rec.Reason, class, reason)
		}
		if got.Schema != schema || rec.Chunks == nil || rec.Chunks.Total != len(ends) {
			t.Errorf("%s: schema %q chunks %+v", name, got.Schema, rec.Chunks)
		}
	}
	// schema "s" is not among the built-in schemas
	ends := chunkEnds(t, "d", text, 200, 0)
	check("unknown schema", "s", ends, job.ClassMerge, `schema "s" is not among the workers' schemas`)

	bad := chunkEnds(t, "d", text, 200, 0)
	bad[1].Payload = []byte("not json")
	check("undecodable chunk", "s", bad, job.ClassPartial, "d#2 (its stored outcome cannot be read")

	gone := chunkEnds(t, "d", text, 200, 0)
	for i := range gone {
		gone[i].Payload = []byte(strings.ReplaceAll(string(gone[i].Payload), `"schema":"s"`, `"schema":"invoice"`))
	}
	gone[0].Payload, gone[0].Gone = nil, "its outcome was removed"
	check("a gone chunk", "invoice", gone, job.ClassPartial, "d#1 (its outcome was removed)")
}
