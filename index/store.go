package index

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/mattn/go-sqlite3" // also registers the "sqlite3" driver
)

//go:embed migrations/*.sql
var migrationFS embed.FS

// BusyTimeout is how long a statement waits for a lock held by another
// connection or process before it fails with "database is locked".
const BusyTimeout = 15 * time.Second

// ErrNotFound is returned when no outcome matches a job id (and run).
var ErrNotFound = errors.New("dlq: not found")

// ErrNewerSchema is returned by Open when the file was migrated by a newer
// binary than this one.
var ErrNewerSchema = errors.New("dlq: database schema is newer than this binary")

// Store is the SQLite analytics index. It holds one writer connection (all
// writes are serialised through it) and a small pool of read-only
// connections; WAL mode lets readers run while the sink writes. A Store is
// safe for concurrent use.
type Store struct {
	path string
	w    *sql.DB // one connection, BEGIN IMMEDIATE
	r    *sql.DB // read-only pool

	closeOnce sync.Once
	closeErr  error
}

// Open opens (creating it with mode 0600 if needed) the index at path and
// applies the embedded migrations that are not yet applied. It sets WAL
// mode, synchronous=NORMAL (a committed write survives a crash of the
// process; the streams remain the durable record for a power loss),
// a busy timeout of BusyTimeout and foreign keys.
func Open(path string) (*Store, error) {
	if err := createPrivate(path); err != nil {
		return nil, err
	}
	if err := checkWritable(path); err != nil {
		return nil, err
	}
	w, err := sql.Open("sqlite3", dsn(path, false))
	if err != nil {
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	w.SetMaxOpenConns(1)
	w.SetMaxIdleConns(1)
	w.SetConnMaxLifetime(0)
	w.SetConnMaxIdleTime(0)
	s := &Store{path: path, w: w}
	ctx, cancel := context.WithTimeout(context.Background(), 2*BusyTimeout)
	defer cancel()
	if err := w.PingContext(ctx); err != nil {
		w.Close()
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	// Checkpoint the WAL every ~32 MB instead of 4 MB: fewer fsyncs under the
	// sink's steady batch load.
	if _, err := w.ExecContext(ctx, `PRAGMA wal_autocheckpoint = 8000`); err != nil {
		w.Close()
		return nil, fmt.Errorf("opening %s: %w", path, err)
	}
	if err := s.migrate(ctx); err != nil {
		w.Close()
		return nil, fmt.Errorf("migrating %s: %w", path, err)
	}
	r, err := sql.Open("sqlite3", dsn(path, true))
	if err != nil {
		w.Close()
		return nil, fmt.Errorf("opening %s for reading: %w", path, err)
	}
	r.SetMaxOpenConns(4)
	r.SetMaxIdleConns(4)
	s.r = r
	return s, nil
}

// ErrReadOnly is returned by Open when the index file (or its -wal or
// -shm file) cannot be opened for writing: SQLite would open it read-only
// without a word, and fail every write, or crash the process on a shared
// memory file it cannot write (SIGBUS).
var ErrReadOnly = errors.New("dlq: index is not writable")

// checkWritable opens the database file and its -wal and -shm files (those
// that exist) for writing, and closes them: a read-only or immutable one is
// an ErrReadOnly naming it.
func checkWritable(path string) error {
	for _, p := range []string{path, path + "-wal", path + "-shm"} {
		f, err := os.OpenFile(p, os.O_RDWR, 0)
		if errors.Is(err, fs.ErrNotExist) && p != path {
			continue
		}
		if err != nil {
			return fmt.Errorf("%w: %s cannot be opened for writing (%w); make it writable (chmod, chattr -i) or give another --db", ErrReadOnly, p, err)
		}
		if err := f.Close(); err != nil {
			return fmt.Errorf("%w: %s: %w", ErrReadOnly, p, err)
		}
	}
	return nil
}

// createPrivate creates the database file with mode 0600 when it does not
// exist yet; SQLite then gives its -wal and -shm files the same mode.
func createPrivate(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("creating %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("creating %s: %w", path, err)
	}
	return nil
}

func dsn(p string, readOnly bool) string {
	q := url.Values{}
	q.Set("_busy_timeout", strconv.FormatInt(BusyTimeout.Milliseconds(), 10))
	q.Set("_journal_mode", "WAL")
	q.Set("_synchronous", "NORMAL")
	q.Set("_foreign_keys", "on")
	q.Set("_cache_size", "-8000")   // 8 MB page cache per connection
	q.Set("_stmt_cache_size", "64") // the sink's multi-row INSERTs, prepared once
	if readOnly {
		q.Set("_query_only", "on")
	} else {
		q.Set("_txlock", "immediate")
	}
	return "file:" + (&url.URL{Path: p}).EscapedPath() + "?" + q.Encode()
}

// Path returns the file the store was opened on.
func (s *Store) Path() string { return s.path }

// Close closes the store's connections. It is safe to call twice.
func (s *Store) Close() error {
	s.closeOnce.Do(func() {
		var errs []error
		if s.r != nil {
			errs = append(errs, s.r.Close())
		}
		errs = append(errs, s.w.Close())
		if err := errors.Join(errs...); err != nil {
			s.closeErr = fmt.Errorf("closing %s: %w", s.path, err)
		}
	})
	return s.closeErr
}

type migration struct {
	version int
	name    string
	sql     string
}

func migrations() ([]migration, error) {
	entries, err := fs.ReadDir(migrationFS, "migrations")
	if err != nil {
		return nil, fmt.Errorf("reading embedded migrations: %w", err)
	}
	var ms []migration
	for _, e := range entries {
		name := e.Name()
		num, _, ok := strings.Cut(name, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %q: name must start with a positive number and '_'", name)
		}
		body, err := migrationFS.ReadFile(path.Join("migrations", name))
		if err != nil {
			return nil, fmt.Errorf("reading migration %s: %w", name, err)
		}
		ms = append(ms, migration{version: v, name: name, sql: string(body)})
	}
	sort.Slice(ms, func(i, j int) bool { return ms[i].version < ms[j].version })
	for i := 1; i < len(ms); i++ {
		if ms[i].version == ms[i-1].version {
			return nil, fmt.Errorf("migrations %s and %s share version %d", ms[i-1].name, ms[i].name, ms[i].version)
		}
	}
	return ms, nil
}

// SchemaVersion is the highest migration version embedded in this binary.
func SchemaVersion() int {
	ms, err := migrations()
	if err != nil || len(ms) == 0 {
		return 0
	}
	return ms[len(ms)-1].version
}

// migrate applies the pending migrations (every embedded one that
// schema_migrations does not record), each in its own IMMEDIATE
// transaction that re-reads schema_migrations, so two processes opening the
// same file at once apply each migration exactly once.
func (s *Store) migrate(ctx context.Context) error {
	ms, err := migrations()
	if err != nil {
		return err
	}
	if _, err := s.w.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS schema_migrations (
		version    INTEGER PRIMARY KEY,
		name       TEXT    NOT NULL,
		applied_at INTEGER NOT NULL)`); err != nil {
		return fmt.Errorf("creating schema_migrations: %w", err)
	}
	applied := map[int]bool{}
	newest := 0
	rows, err := s.w.QueryContext(ctx, `SELECT version FROM schema_migrations`)
	if err != nil {
		return fmt.Errorf("reading schema_migrations: %w", err)
	}
	for rows.Next() {
		var v int
		if err := rows.Scan(&v); err != nil {
			rows.Close()
			return fmt.Errorf("reading schema_migrations: %w", err)
		}
		applied[v] = true
		newest = max(newest, v)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("reading schema_migrations: %w", err)
	}
	if len(ms) > 0 && newest > ms[len(ms)-1].version {
		return fmt.Errorf("%w: file at version %d, binary knows %d", ErrNewerSchema, newest, ms[len(ms)-1].version)
	}
	// Every migration not recorded is applied, in version order, even one
	// below the newest applied: a migration merged later with a lower
	// number (an index opened by a binary that had 0010 but not 0009) is
	// applied when a binary that has it opens the file.
	for _, m := range ms {
		if applied[m.version] {
			continue
		}
		if err := s.apply(ctx, m); err != nil {
			return err
		}
	}
	return nil
}

func (s *Store) apply(ctx context.Context, m migration) error {
	tx, err := s.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("migration %s: %w", m.name, err)
	}
	defer tx.Rollback() //nolint:errcheck // no-op after Commit
	var done int
	if err := tx.QueryRowContext(ctx, `SELECT COUNT(*) FROM schema_migrations WHERE version = ?`, m.version).Scan(&done); err != nil {
		return fmt.Errorf("migration %s: %w", m.name, err)
	}
	if done > 0 {
		return nil // applied by another process meanwhile
	}
	if err := beforeMigration(ctx, tx, m.version); err != nil {
		return fmt.Errorf("migration %s: %w", m.name, err)
	}
	if _, err := tx.ExecContext(ctx, m.sql); err != nil {
		return fmt.Errorf("migration %s: %w", m.name, err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO schema_migrations (version, name, applied_at) VALUES (?, ?, ?)`,
		m.version, m.name, time.Now().UnixMilli()); err != nil {
		return fmt.Errorf("migration %s: recording: %w", m.name, err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("migration %s: committing: %w", m.name, err)
	}
	return nil
}

// IsStorageError reports whether err, from a write to the index, says the
// file cannot be written at all: the disk is full (SQLITE_FULL, "database
// or disk is full"), an I/O error (SQLITE_IOERR), the file or its journal
// cannot be opened (SQLITE_CANTOPEN) or is read-only (SQLITE_READONLY).
// A lock held by another process (SQLITE_BUSY) is not one: it passes.
func IsStorageError(err error) bool {
	var se sqlite3.Error
	if !errors.As(err, &se) {
		return false
	}
	switch se.Code {
	case sqlite3.ErrFull, sqlite3.ErrIoErr, sqlite3.ErrCantOpen, sqlite3.ErrReadonly:
		return true
	}
	return false
}
