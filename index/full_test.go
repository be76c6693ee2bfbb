package index

import (
	"database/sql"
	"fmt"
	"strings"
	"testing"

	"github.com/llmpipeline/pipeline/job"
)

// TestWriteDiskFull makes the index file unable to grow (max_page_count,
// which SQLite reports exactly as a full disk: SQLITE_FULL) and checks that
// the failed write is classified as a storage error, that it stores
// nothing of its batch, and that the same batch is written once there is
// room again.
func TestWriteDiskFull(t *testing.T) {
	t.Parallel()
	s := openTemp(t)
	ctx := t.Context()
	if err := s.Write(ctx, []job.Outcome{realistic(1)}); err != nil {
		t.Fatal(err)
	}
	var pages int
	if err := s.w.QueryRowContext(ctx, `PRAGMA page_count`).Scan(&pages); err != nil {
		t.Fatal(err)
	}
	// The writer is one connection that is never closed: the limit holds
	// for every write that follows.
	if _, err := s.w.ExecContext(ctx, fmt.Sprintf(`PRAGMA max_page_count = %d`, pages)); err != nil {
		t.Fatal(err)
	}
	batch := make([]job.Outcome, 200)
	for i := range batch {
		batch[i] = realistic(i + 2)
	}
	err := s.Write(ctx, batch)
	if err == nil {
		t.Fatal("Write succeeded on a file that cannot grow")
	}
	if !strings.Contains(err.Error(), "database or disk is full") {
		t.Errorf("error %q does not say the disk is full", err)
	}
	if !IsStorageError(err) {
		t.Errorf("IsStorageError(%q) = false, want true", err)
	}
	if n := count(t, s, "outcomes"); n != 1 {
		t.Fatalf("%d outcomes after the failed write, want 1 (nothing of the batch)", n)
	}

	if _, err := s.w.ExecContext(ctx, `PRAGMA max_page_count = 1073741823`); err != nil {
		t.Fatal(err)
	}
	if err := s.Write(ctx, batch); err != nil {
		t.Fatalf("Write once there is room: %v", err)
	}
	if n := count(t, s, "outcomes"); n != 1+len(batch) {
		t.Errorf("%d outcomes after the retry, want %d", n, 1+len(batch))
	}
}

// TestIsStorageErrorLocked checks that a lock held by another connection
// (SQLITE_BUSY), which passes, is not taken for a storage error.
func TestIsStorageErrorLocked(t *testing.T) {
	t.Parallel()
	s := openTemp(t)
	holder, err := sql.Open("sqlite3", dsn(s.Path(), false))
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	tx, err := holder.BeginTx(t.Context(), nil) // BEGIN IMMEDIATE: takes the write lock
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback() //nolint:errcheck // the test only needed the lock
	impatient, err := sql.Open("sqlite3", "file:"+s.Path()+"?_busy_timeout=0&_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer impatient.Close()
	_, err = impatient.BeginTx(t.Context(), nil)
	if err == nil {
		t.Fatal("a second writer took the lock")
	}
	if IsStorageError(err) {
		t.Errorf("IsStorageError(%q) = true for a held lock", err)
	}
	if IsStorageError(nil) || IsStorageError(fmt.Errorf("x: %w", ErrNotFound)) {
		t.Error("IsStorageError is true for nil or a non-SQLite error")
	}
}
