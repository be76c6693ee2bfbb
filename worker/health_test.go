package worker

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/llmpipeline/pipeline/index"
	"github.com/llmpipeline/pipeline/internal/broker"
)

// syncBuffer is a log sink safe for the watch goroutine and the test.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// sqliteFull returns the error a real SQLite file gives when it cannot
// grow (max_page_count reached: SQLITE_FULL, as on a full disk).
func sqliteFull(t *testing.T, path string) error {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(1) // the page limit is the connection's
	for _, q := range []string{`CREATE TABLE t (b BLOB)`, `PRAGMA max_page_count = 3`} {
		if _, err := db.Exec(q); err != nil {
			t.Fatal(err)
		}
	}
	_, err = db.Exec(`INSERT INTO t VALUES (zeroblob(1000000))`)
	if err == nil {
		t.Fatal("a 1 MB row fitted in 3 pages")
	}
	return fmt.Errorf("writing 3 outcomes: %w", err)
}

func TestStoreHealth(t *testing.T) {
	ctx := t.Context()
	conn, err := broker.Connect(ctx, broker.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	var logs syncBuffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	m := NewMetrics(prometheus.NewRegistry())
	h := newStoreHealth(conn, m, log)
	gate := h.gate(nil)
	gateOpen := func() bool {
		ctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
		defer cancel()
		return gate(ctx) == nil
	}
	errorLines := func() int { return strings.Count(logs.String(), "level=ERROR") }

	t.Run("sqlite full: logged once with the path, every failure counted, workers go on", func(t *testing.T) {
		db := filepath.Join(t.TempDir(), "pipeline.db")
		full := sqliteFull(t, db)
		if !index.IsStorageError(full) {
			t.Fatalf("index.IsStorageError(%v) = false", full)
		}
		h.indexWritten(db, full)
		h.indexWritten(db, full)
		if got := testutil.ToFloat64(m.StoreErrors.WithLabelValues(broker.StoreSQLite)); got != 2 {
			t.Errorf("sqlite store errors = %v, want 2", got)
		}
		if got := testutil.ToFloat64(m.StoreFailing.WithLabelValues(broker.StoreSQLite)); got != 1 {
			t.Errorf("sqlite failing = %v, want 1", got)
		}
		out := logs.String()
		if errorLines() != 1 || !strings.Contains(out, `store="sqlite index" path=`+db) || !strings.Contains(out, "database or disk is full") {
			t.Errorf("want one error line naming the sqlite index, %s and the cause; logs:\n%s", db, out)
		}
		if !gateOpen() {
			t.Error("the workers' gate closed for an index that cannot write")
		}
		h.indexWritten(db, nil)
		if got := testutil.ToFloat64(m.StoreFailing.WithLabelValues(broker.StoreSQLite)); got != 0 {
			t.Errorf("sqlite failing = %v after a good write, want 0", got)
		}
		if !strings.Contains(logs.String(), "sqlite index can be written again") {
			t.Errorf("no recovery line; logs:\n%s", logs.String())
		}
	})

	t.Run("a publish timeout is counted, not an episode", func(t *testing.T) {
		before := errorLines()
		h.publishFailed(fmt.Errorf("publishing to pipeline.results.x: %w", context.DeadlineExceeded))
		if got := testutil.ToFloat64(m.StoreErrors.WithLabelValues(broker.StoreNATS)); got != 1 {
			t.Errorf("nats store errors = %v, want 1", got)
		}
		if errorLines() != before || !gateOpen() {
			t.Error("a publish timeout was taken for a store that cannot write")
		}
	})

	t.Run("nats out of storage: gate closed until the store answers", func(t *testing.T) {
		h.publishFailed(fmt.Errorf("publishing: %w", &jetstream.APIError{
			ErrorCode: jetstream.ErrorCode(server.JSInsufficientResourcesErr), Code: 503, Description: "insufficient resources"}))
		if gateOpen() {
			t.Fatal("the workers' gate is open while the nats store cannot write")
		}
		if !strings.Contains(logs.String(), `store="nats store" path=`+conn.Store().Dir()) {
			t.Errorf("no error line names the nats store and %s; logs:\n%s", conn.Store().Dir(), logs.String())
		}
		// The embedded store is sound: the watch finds it so and opens
		// the gate again.
		wctx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() { defer close(done); h.watch(wctx) }()
		defer func() { stop(); <-done }()
		gctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		if err := gate(gctx); err != nil {
			t.Fatalf("the gate stayed closed after the store answered: %v", err)
		}
		if got := testutil.ToFloat64(m.StoreFailing.WithLabelValues(broker.StoreNATS)); got != 0 {
			t.Errorf("nats failing = %v after recovery, want 0", got)
		}
		if !strings.Contains(logs.String(), "nats store can be written again") {
			t.Errorf("no recovery line; logs:\n%s", logs.String())
		}
	})
}
