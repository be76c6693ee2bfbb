package main

import (
	"database/sql"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmpipeline/pipeline/internal/queue"
)

// immutable sets (or clears) the immutable attribute of files; the test is
// skipped where chattr does not work (not root, a file system without it).
func immutable(t *testing.T, on bool, files ...string) {
	t.Helper()
	flag := "-i"
	if on {
		flag = "+i"
	}
	if out, err := exec.Command("chattr", append([]string{flag}, files...)...).CombinedOutput(); err != nil {
		if on {
			t.Skipf("chattr +i: %v %s", err, out)
		}
		t.Errorf("chattr -i: %v %s", err, out)
	}
}

// TestReadOnlyIndex: a run on an index it cannot write (the db with its
// -wal and -shm immutable, or only the db) exits non-zero with an error
// naming the file, and leaves the jobs on JOBS for a run that can.
func TestReadOnlyIndex(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name   string
		walShm bool
	}{{"db, -wal and -shm immutable", true}, {"only the db immutable", false}} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			jobs, _ := jobsFile(t, 10)
			mustCLI(t, "", "submit", "--data-dir", dir, jobs)
			mustCLI(t, "", "run", "--data-dir", dir, "--until-idle", "--sim-latency", "0") // creates the index
			jobs2, _ := jobsFile(t, 10)
			mustCLI(t, "", "submit", "--data-dir", dir, "--rerun", jobs2)
			db := filepath.Join(dir, "pipeline.db")
			files := []string{db}
			if tc.walShm {
				// Another connection keeps -wal and -shm in place, as a
				// crashed process leaves them.
				other, err := sql.Open("sqlite3", "file:"+db+"?_journal_mode=WAL")
				if err != nil {
					t.Fatal(err)
				}
				if _, err := other.Exec(`PRAGMA user_version = user_version`); err != nil {
					t.Fatal(err)
				}
				if _, err := other.Exec(`CREATE TABLE IF NOT EXISTS probe (x)`); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { other.Close() })
				files = append(files, db+"-wal", db+"-shm")
			}
			immutable(t, true, files...)
			t.Cleanup(func() { immutable(t, false, files...) })

			_, errs, code := runCLI(t, "", "run", "--data-dir", dir, "--until-idle", "--sim-latency", "0")
			if code == 0 || !strings.Contains(errs, db) || !strings.Contains(errs, "writ") {
				t.Errorf("run on a read-only index: exit %d, stderr:\n%s\nwant non-zero and an error naming %s", code, errs, db)
			}
			c := connFor(t, []string{"--data-dir", dir})
			defer c.Close()
			p, err := queue.Pending(t.Context(), c)
			if err != nil {
				t.Fatal(err)
			}
			if p.Jobs != 10 {
				t.Errorf("%d jobs left on JOBS, want the 10 the run could not index", p.Jobs)
			}
		})
	}
}
