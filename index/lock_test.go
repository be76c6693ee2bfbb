package index

import (
	"database/sql"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/job"
)

// TestWriteWaitsForLock holds the write lock from another connection (as
// another process would) and checks that Write waits for it instead of
// failing with "database is locked", so the sink never drops a batch.
func TestWriteWaitsForLock(t *testing.T) {
	t.Parallel()
	s := openTemp(t)
	other, err := sql.Open("sqlite3", dsn(s.Path(), false))
	if err != nil {
		t.Fatal(err)
	}
	defer other.Close()
	tx, err := other.BeginTx(t.Context(), nil) // BEGIN IMMEDIATE: takes the write lock
	if err != nil {
		t.Fatal(err)
	}
	if _, err := tx.Exec(`INSERT INTO clusters (id, fp_version, schema_id, version, path, keyword) VALUES ('x', 1, 's', 'v', '/p', 'k')`); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Write(t.Context(), []job.Outcome{realistic(1)}) }()
	select {
	case err := <-done:
		t.Fatalf("Write returned while another connection held the lock: %v", err)
	case <-time.After(300 * time.Millisecond): // the lock holder's hold time, not a wait for a result
	}
	if err := tx.Commit(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatalf("Write after the lock was released: %v", err)
	}
	if n := count(t, s, "outcomes"); n != 1 {
		t.Errorf("%d outcomes, want 1", n)
	}
}
