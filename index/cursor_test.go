package index

import (
	"maps"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/job"
)

// TestCursorsCommitWithTheRows: the sink's stream cursors are stored in the
// batch's transaction, so a failed batch leaves both the rows and the
// cursors as they were, and Reset forgets them.
func TestCursorsCommitWithTheRows(t *testing.T) {
	t.Parallel()
	s := openTemp(t)
	cursors := func() map[string]uint64 {
		t.Helper()
		c, err := s.Cursors(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	if c := cursors(); len(c) != 0 {
		t.Fatalf("new index has cursors %v", c)
	}
	at := time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC)
	if err := s.WriteWithCursors(t.Context(), []job.Outcome{outcome("a", false, 1, at)}, map[string]uint64{"RESULTS": 7}); err != nil {
		t.Fatal(err)
	}
	// Cursors alone (only absent messages passed) and a cursor moved back
	// (a second sink on the file) are stored as given.
	if err := s.WriteWithCursors(t.Context(), nil, map[string]uint64{"DLQ": 3}); err != nil {
		t.Fatal(err)
	}
	if err := s.WriteWithCursors(t.Context(), []job.Outcome{outcome("a", false, 1, at)}, map[string]uint64{"RESULTS": 5}); err != nil {
		t.Fatal(err)
	}
	if c, want := cursors(), map[string]uint64{"RESULTS": 5, "DLQ": 3}; !maps.Equal(c, want) {
		t.Fatalf("cursors %v, want %v", c, want)
	}

	// A write that fails inside its transaction (here a trigger stands for
	// a full disk) stores neither its rows nor its cursors.
	if _, err := s.w.Exec(`CREATE TRIGGER fail_payloads BEFORE INSERT ON payloads BEGIN SELECT RAISE(ABORT, 'disk full'); END`); err != nil {
		t.Fatal(err)
	}
	err := s.WriteWithCursors(t.Context(), []job.Outcome{outcome("b", true, 2, at, diag("/x", "type", "1"))}, map[string]uint64{"RESULTS": 9, "DLQ": 4})
	if err == nil {
		t.Fatal("write succeeded through the failing trigger")
	}
	if c, want := cursors(), map[string]uint64{"RESULTS": 5, "DLQ": 3}; !maps.Equal(c, want) {
		t.Errorf("after a failed write: cursors %v, want %v", c, want)
	}
	if n := count(t, s, "outcomes"); n != 1 {
		t.Errorf("after a failed write: %d outcomes, want 1", n)
	}
	if _, err := s.w.Exec(`DROP TRIGGER fail_payloads`); err != nil {
		t.Fatal(err)
	}

	if err := s.Reset(t.Context()); err != nil {
		t.Fatal(err)
	}
	if c := cursors(); len(c) != 0 {
		t.Errorf("after Reset: cursors %v", c)
	}
}
