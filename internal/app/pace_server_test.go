package app

import (
	"fmt"
	"io"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/brokertest"
	"github.com/llmpipeline/pipeline/internal/memtest"
	"github.com/llmpipeline/pipeline/internal/queue"
	"github.com/llmpipeline/pipeline/schemas"
)

// TestSubmitKeepsTheEmbeddedServersIndexUnderItsBudget: a submit that
// hosts the embedded server publishes 20,000 jobs with a budget of 10,000
// ids per 5 s duplicate window. Right after it, every id is published again
// straight to the stream: the server answers "duplicate" only for the ids
// it still remembers, which is what its index holds (about 94 bytes each).
// Paced, at most the budget; unpaced (the whole file within one window),
// all 20,000.
func TestSubmitKeepsTheEmbeddedServersIndexUnderItsBudget(t *testing.T) {
	const n, budget, window = 20_000, 10_000, 5 * time.Second
	defer func(b int) { dedupeBudget = b }(dedupeBudget)
	dedupeBudget = budget
	reg, err := schemas.Load("")
	if err != nil {
		t.Fatal(err)
	}
	conn := brokertest.NewConn(t, func(c *broker.Config) { c.DuplicateWindow = window })
	if !conn.Embedded() {
		t.Fatal("the fixture's connection does not host the server")
	}
	open := func() (io.ReadCloser, error) { return io.NopCloser(memtest.Lines(n)), nil }
	jc := NewJobCheck(reg, 1<<20)
	defer jc.Close()
	if err := jc.ScanFrom(open, func(line int, reason string) { t.Errorf("line %d: %s", line, reason) }); err != nil {
		t.Fatal(err)
	}
	paced := 0
	jc.OnPace = func() { paced++ }
	stats, err := SubmitChecked(t.Context(), conn, jc, open, RerunNone, nil)
	if err != nil || stats.Published != n {
		t.Fatalf("submit: %+v, %v", stats, err)
	}
	if paced != 1 {
		t.Errorf("OnPace called %d times over %d jobs with a budget of %d, want once", paced, n, budget)
	}

	again := make([]queue.SubmitItem, n)
	for i := range again {
		id := fmt.Sprintf("job-%08d", i)
		again[i] = queue.SubmitItem{Data: fmt.Appendf(nil, `{"id":%q,"schema":"invoice","input":"again"}`, id),
			Schema: "invoice", MsgID: id, JobID: id}
	}
	s, err := queue.Submit(t.Context(), conn, again, nil)
	if err != nil {
		t.Fatal(err)
	}
	if s.Duplicates > budget+submitBatch || s.Duplicates == 0 {
		t.Fatalf("the server remembered %d of the %d ids right after the submit, want between 1 and the budget %d (and one batch, %d, of timer slack)", s.Duplicates, n, budget, submitBatch)
	}
	t.Logf("the server remembered %d of %d ids (budget %d)", s.Duplicates, n, budget)
}
