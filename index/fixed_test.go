package index

import (
	"database/sql"
	"fmt"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/job"
	"github.com/llmpipeline/pipeline/report/cluster"
)

// fixCase is one job run and, per path pattern that failed in it, whether
// the model fixed it before the run ended.
type fixCase struct {
	name  string
	dead  bool
	trace []job.Attempt
	want  map[string]bool
}

func att(class job.Class, diags ...job.Diagnostic) job.Attempt {
	return job.Attempt{Class: class, Raw: "{}", Diagnostics: diags}
}

func fixCases() []fixCase {
	a := diag("/a", "type", `"1"`)
	b := diag("/b", "enum", `"x"`)
	omitted := att("schema", b)
	omitted.DiagnosticsOmitted = 4
	return []fixCase{
		{"healed", false, []job.Attempt{att("schema", a), att("")}, map[string]bool{"/a": true}},
		{"dead of another field", true, []job.Attempt{att("schema", a, b), att("schema", b)}, map[string]bool{"/a": true, "/b": false}},
		{"still failing at the end", true, []job.Attempt{att("schema", a), att("schema", a)}, map[string]bool{"/a": false}},
		{"fixed then broken again", true, []job.Attempt{att("schema", a), att("schema", b), att("schema", a)}, map[string]bool{"/a": false, "/b": true}},
		{"last attempt truncated", true, []job.Attempt{att("schema", a), att("truncated")}, map[string]bool{"/a": false}},
		{"last attempt not JSON", true, []job.Attempt{att("schema", a, b), att("schema", b), att("grammar")}, map[string]bool{"/a": true, "/b": false}},
		{"diagnostics omitted at the end", true, []job.Attempt{att("schema", a, b), omitted}, map[string]bool{"/a": false, "/b": false}},
		{"one attempt", true, []job.Attempt{att("schema", a)}, map[string]bool{"/a": false}},
		{"array indices are one cluster", true, []job.Attempt{
			att("schema", diag("/items/0/p", "type", "1"), diag("/items/1/p", "type", "2")),
			att("schema", diag("/items/2/p", "type", "3")),
		}, map[string]bool{"/items/*/p": false}},
		{"array item fixed", false, []job.Attempt{att("schema", diag("/items/0/p", "type", "1"), diag("/items/1/p", "type", "2")), att("")},
			map[string]bool{"/items/*/p": true}},
	}
}

func (c fixCase) outcome(i int) job.Outcome {
	o := outcome(fmt.Sprintf("fix-%02d", i), c.dead, 0, t0.Add(time.Duration(i)*time.Second))
	o.Attempts = len(c.trace)
	for k, a := range c.trace {
		a.N = k + 1
		o.Trace = append(o.Trace, a)
	}
	return o
}

// fixedByJob reads the fixed flag of every lead failure row, by job id and
// path pattern.
func fixedByJob(t *testing.T, db *sql.DB) map[string]map[string]bool {
	t.Helper()
	rows, err := db.Query(`SELECT o.job_id, c.path, f.fixed FROM failures f
		JOIN outcomes o ON o.id = f.outcome_id JOIN clusters c ON c.id = f.cluster WHERE f.lead = 1`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	got := map[string]map[string]bool{}
	for rows.Next() {
		var job, path string
		var fixed bool
		if err := rows.Scan(&job, &path, &fixed); err != nil {
			t.Fatal(err)
		}
		if got[job] == nil {
			got[job] = map[string]bool{}
		}
		if _, dup := got[job][path]; dup {
			t.Errorf("job %s: two lead rows for %s", job, path)
		}
		got[job][path] = fixed
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return got
}

func TestWriteRecordsFixed(t *testing.T) {
	t.Parallel()
	s := openTemp(t)
	cases := fixCases()
	var outs []job.Outcome
	for i, c := range cases {
		outs = append(outs, c.outcome(i))
	}
	write(t, s, outs...)
	got := fixedByJob(t, s.r)
	for i, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			if g := got[outs[i].JobID]; !reflect.DeepEqual(g, c.want) {
				t.Errorf("fixed by path = %v, want %v", g, c.want)
			}
		})
	}

	// ClusterCounts sums them per cluster.
	counts, err := s.Analytics().ClusterCounts(t.Context(), Filter{})
	if err != nil {
		t.Fatal(err)
	}
	type sums struct{ jobs, dead, fixed, deadFixed int }
	want := map[string]sums{}
	for _, c := range cases {
		for p, fixed := range c.want {
			w := want[p]
			w.jobs++
			if c.dead {
				w.dead++
			}
			if fixed {
				w.fixed++
				if c.dead {
					w.deadFixed++
				}
			}
			want[p] = w
		}
	}
	if len(counts) != len(want) {
		t.Fatalf("%d clusters, want %d", len(counts), len(want))
	}
	for _, cc := range counts {
		if g := (sums{cc.Jobs, cc.DeadLetters, cc.Fixed, cc.DeadFixed}); g != want[cc.Path] {
			t.Errorf("%s: jobs/dead/fixed/dead-fixed = %v, want %v", cc.Path, g, want[cc.Path])
		}
	}
}

func TestClusterBlockersAndRecentEnds(t *testing.T) {
	t.Parallel()
	s := openTemp(t)
	a := diag("/a", "type", `"1"`)
	b := diag("/b", "pattern", `"x"`)
	c := diag("/c", "required", "")
	var outs []job.Outcome
	add := func(dead bool, trace ...job.Attempt) {
		fc := fixCase{dead: dead, trace: trace}
		outs = append(outs, fc.outcome(len(outs)))
	}
	// /a is fixed in every run; 3 runs die of /b, 1 of /c, 1 succeeds
	for i := 0; i < 3; i++ {
		add(true, att("schema", a, b), att("schema", b))
	}
	add(true, att("schema", a, c), att("schema", c))
	add(false, att("schema", a), att(""))
	write(t, s, outs...)

	id := func(d job.Diagnostic) string {
		return cluster.ID(cluster.Fingerprint{Schema: "invoice", Version: "v1hash", Path: d.Path, Keyword: d.Keyword})
	}
	bl, err := s.Analytics().ClusterBlockers(t.Context(), id(a), Filter{}, 5)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, x := range bl {
		got = append(got, fmt.Sprintf("%s %s %d", x.Path, x.Keyword, x.Runs))
	}
	if want := []string{"/b pattern 3", "/c required 1"}; !reflect.DeepEqual(got, want) {
		t.Errorf("blockers of /a = %v, want %v", got, want)
	}
	if bl, err := s.Analytics().ClusterBlockers(t.Context(), id(b), Filter{}, 5); err != nil || len(bl) != 0 {
		t.Errorf("blockers of /b = %v, %v: want none, /b was never fixed", bl, err)
	}

	ends, err := s.Analytics().ClusterRecentEnds(t.Context(), id(a), Filter{}, 3)
	if err != nil {
		t.Fatal(err)
	}
	if want := []RunEnd{{Dead: false, Fixed: true}, {Dead: true, Fixed: true}, {Dead: true, Fixed: true}}; !reflect.DeepEqual(ends, want) {
		t.Errorf("recent ends of /a = %+v, want %+v (newest first)", ends, want)
	}
	ends, err = s.Analytics().ClusterRecentEnds(t.Context(), id(b), Filter{}, 5)
	if err != nil {
		t.Fatal(err)
	}
	if len(ends) != 3 || ends[0] != (RunEnd{Dead: true}) {
		t.Errorf("recent ends of /b = %+v, want 3 dead, not fixed", ends)
	}
}

// TestMigrationBackfillsFixed builds a file as the first schema version
// wrote it (one failures row per diagnostic per attempt, no fixed column),
// opens it with this binary and checks that migration 2 derives the same
// fixed flags Write computes.
func TestMigrationBackfillsFixed(t *testing.T) {
	t.Parallel()
	cases := fixCases()
	var outs []job.Outcome
	for i, c := range cases {
		outs = append(outs, c.outcome(i))
	}
	outs = append(outs, realistic(1), outcome("ok-2", false, 3, t0, diag("/total", "type", `"1"`)))
	cur := openTemp(t)
	write(t, cur, outs...)
	want := fixedByJob(t, cur.r)

	path := filepath.Join(t.TempDir(), "v1.db")
	if err := createPrivate(path); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite3", dsn(path, false))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	v1, err := migrationFS.ReadFile("migrations/0001_init.sql")
	if err != nil {
		t.Fatal(err)
	}
	for _, q := range []string{
		string(v1),
		`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`,
		`INSERT INTO schema_migrations VALUES (1, '0001_init.sql', 0)`,
		`ATTACH DATABASE '` + cur.Path() + `' AS cur`,
		`INSERT INTO outcomes SELECT ` + outcomesV1Columns + ` FROM cur.outcomes`,
		`INSERT INTO payloads SELECT outcome_id, 0, body FROM cur.payloads`,
		`INSERT INTO attempts SELECT ` + attemptsV1Columns + ` FROM cur.attempts`,
		`INSERT INTO clusters SELECT * FROM cur.clusters`,
	} {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("building a version 1 file: %v\n%s", err, q)
		}
	}
	// version 1 failures: every diagnostic of every attempt, lead on the
	// first row of a cluster within a run
	for _, o := range outs {
		var id int64
		if err := db.QueryRow(`SELECT id FROM outcomes WHERE job_id = ?`, o.JobID).Scan(&id); err != nil {
			t.Fatal(err)
		}
		seen := map[string]bool{}
		for k, a := range o.Trace {
			for j, d := range a.Diagnostics {
				c := cluster.ID(cluster.Fingerprint{Schema: o.Schema, Version: o.SchemaVersion, Path: d.Path, Keyword: d.Keyword})
				lead := !seen[c]
				seen[c] = true
				if _, err := db.Exec(`INSERT INTO failures VALUES (?, ?, ?, ?, ?, ?, ?, ?)`, id, k+1, j, c, lead, o.Status == job.StatusDeadLettered,
					o.FinishedAt.UnixMilli(), cut(d.Received, receivedCut)); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s, err := Open(path)
	if err != nil {
		t.Fatalf("opening a version 1 file: %v", err)
	}
	defer s.Close()
	if got := count(t, s, "schema_migrations"); got != embeddedMigrations(t) {
		t.Errorf("%d migrations recorded, want %d", got, embeddedMigrations(t))
	}
	got := fixedByJob(t, s.r)
	for job, w := range want {
		if !reflect.DeepEqual(got[job], w) {
			t.Errorf("job %s: migrated fixed = %v, Write computes %v", job, got[job], w)
		}
	}
	if len(got) != len(want) {
		t.Errorf("%d jobs with failures after the migration, want %d", len(got), len(want))
	}
	// and the report reads agree
	c1, err := cur.Analytics().ClusterCounts(t.Context(), Filter{})
	if err != nil {
		t.Fatal(err)
	}
	c2, err := s.Analytics().ClusterCounts(t.Context(), Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(byID(c1), byID(c2)) {
		t.Errorf("cluster counts after migration = %+v, want %+v", byID(c2), byID(c1))
	}
}

func byID(cs []ClusterCount) map[string]ClusterCount {
	m := map[string]ClusterCount{}
	for _, c := range cs {
		m[c.ID] = c
	}
	return m
}
