package index

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/job"
	"github.com/llmpipeline/pipeline/report/cluster"
)

func count(t *testing.T, s *Store, table string) int {
	t.Helper()
	var n int
	if err := s.r.QueryRow("SELECT COUNT(*) FROM " + table).Scan(&n); err != nil {
		t.Fatalf("counting %s: %v", table, err)
	}
	return n
}

func write(t *testing.T, s *Store, outs ...job.Outcome) {
	t.Helper()
	if err := s.Write(t.Context(), outs); err != nil {
		t.Fatalf("Write: %v", err)
	}
}

func TestOpenCreatesPrivateFile(t *testing.T) {
	t.Parallel()
	s := openTemp(t)
	write(t, s, realistic(1))
	for _, p := range []string{s.Path(), s.Path() + "-wal"} {
		fi, err := os.Stat(p)
		if err != nil {
			t.Fatalf("stat %s: %v", p, err)
		}
		if got := fi.Mode().Perm(); got != 0o600 {
			t.Errorf("%s mode = %o, want 600", filepath.Base(p), got)
		}
	}
}

func TestMigrationsRerunSafely(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "pipeline.db")
	for i := 0; i < 3; i++ {
		s, err := Open(path)
		if err != nil {
			t.Fatalf("Open #%d: %v", i+1, err)
		}
		if i == 0 {
			write(t, s, realistic(1))
		}
		if got := count(t, s, "schema_migrations"); got != embeddedMigrations(t) {
			t.Errorf("Open #%d: %d migrations recorded, want %d", i+1, got, embeddedMigrations(t))
		}
		if got := count(t, s, "outcomes"); got != 1 {
			t.Errorf("Open #%d: %d outcomes, want the 1 written before", i+1, got)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := s.Close(); err != nil {
			t.Errorf("second Close: %v", err)
		}
	}

	// A file migrated by a newer binary is refused, not mangled.
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.w.Exec(`INSERT INTO schema_migrations (version, name, applied_at) VALUES (9999, 'future', 0)`); err != nil {
		t.Fatal(err)
	}
	s.Close()
	if _, err := Open(path); !errors.Is(err, ErrNewerSchema) {
		t.Errorf("Open after a newer migration: err = %v, want ErrNewerSchema", err)
	}
}

func TestWriteIsIdempotent(t *testing.T) {
	t.Parallel()
	s := openTemp(t)
	var batch []job.Outcome
	for i := 0; i < 20; i++ {
		batch = append(batch, realistic(i))
	}
	batch = append(batch, outcome("ok-1", false, 2, t0, diag("/total", "type", `"1"`)))
	tables := []string{"outcomes", "payloads", "attempts", "failures", "clusters"}
	snapshot := func() (map[string]int, Stats) {
		m := map[string]int{}
		for _, tb := range tables {
			m[tb] = count(t, s, tb)
		}
		st, err := s.Stats(t.Context(), Filter{})
		if err != nil {
			t.Fatal(err)
		}
		return m, st
	}
	write(t, s, batch...)
	rows1, st1 := snapshot()
	write(t, s, batch...)
	// also a batch that repeats an outcome within itself
	write(t, s, batch[0], batch[0])
	rows2, st2 := snapshot()
	if !reflect.DeepEqual(rows1, rows2) {
		t.Errorf("rows after rewrite = %v, want %v", rows2, rows1)
	}
	if !reflect.DeepEqual(st1, st2) {
		t.Errorf("stats after rewrite = %+v, want %+v", st2, st1)
	}
	wantFailures := 0
	for _, o := range batch {
		clusters := map[string]bool{}
		for _, a := range o.Trace {
			for _, d := range a.Diagnostics {
				clusters[cluster.ID(cluster.Fingerprint{Schema: o.Schema, Version: o.SchemaVersion, Path: d.Path, Keyword: d.Keyword})] = true
			}
		}
		wantFailures += len(clusters)
	}
	if rows1["failures"] != wantFailures {
		t.Errorf("failures rows = %d, want one per cluster per job run = %d", rows1["failures"], wantFailures)
	}
	if st1.Jobs != len(batch) {
		t.Errorf("jobs = %d, want %d", st1.Jobs, len(batch))
	}
}

func TestWriteRejectsInvalidBatchWhole(t *testing.T) {
	t.Parallel()
	s := openTemp(t)
	bad := realistic(2)
	bad.Status = "maybe"
	err := s.Write(t.Context(), []job.Outcome{realistic(1), bad})
	if !errors.Is(err, job.ErrInvalidOutcome) {
		t.Fatalf("err = %v, want ErrInvalidOutcome", err)
	}
	if n := count(t, s, "outcomes"); n != 0 {
		t.Errorf("%d outcomes stored from a rejected batch, want 0", n)
	}
}

func TestReplayRunsAreNewRows(t *testing.T) {
	t.Parallel()
	first := outcome("job-r", true, 2, t0, diag("/total", "type", `"x"`))
	second := outcome("job-r", false, 1, t0.Add(time.Hour))
	second.Run = 1
	for name, order := range map[string][]job.Outcome{
		"in order":      {first, second},
		"rebuild order": {second, first},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			s := openTemp(t)
			for _, o := range order {
				write(t, s, o)
			}
			if n := count(t, s, "outcomes"); n != 2 {
				t.Fatalf("%d outcome rows, want 2 (one per run)", n)
			}
			got, err := s.Get(t.Context(), "job-r")
			if err != nil {
				t.Fatal(err)
			}
			if got.Run != 1 || got.Status != job.StatusSucceeded {
				t.Errorf("Get = run %d %s, want the latest run 1 succeeded", got.Run, got.Status)
			}
			list, err := s.List(t.Context(), Filter{})
			if err != nil {
				t.Fatal(err)
			}
			if len(list) != 0 {
				t.Errorf("List = %+v, want nothing: the dead run was replayed", list)
			}
			list, err = s.List(t.Context(), Filter{IncludeReplayed: true})
			if err != nil {
				t.Fatal(err)
			}
			if len(list) != 1 || !list[0].Replayed || list[0].Run != 0 {
				t.Errorf("List(IncludeReplayed) = %+v, want run 0 marked replayed", list)
			}
			st, err := s.Stats(t.Context(), Filter{})
			if err != nil {
				t.Fatal(err)
			}
			if st.Jobs != 1 || st.Succeeded != 1 {
				t.Errorf("Stats = %+v, want 1 job, succeeded (the superseded run left out)", st)
			}
		})
	}
}

func TestStatsByAttempt(t *testing.T) {
	t.Parallel()
	s := openTemp(t)
	var outs []job.Outcome
	want := Stats{ByAttempt: map[int]int{}, ByClass: map[job.Class]int{}, BySchema: map[string]SchemaStats{}}
	for i := 0; i < 30; i++ {
		dead := i%5 == 0
		attempts := 1 + i%3
		o := outcome(fmt.Sprintf("j%02d", i), dead, attempts, t0.Add(time.Duration(i)*time.Second), diag("/a", "type", "1"))
		if i%2 == 0 {
			o.Schema = "receipt"
		}
		if dead && i%10 == 0 {
			o.Class = "truncated"
		}
		outs = append(outs, o)
		want.Jobs++
		ss := want.BySchema[o.Schema]
		ss.Jobs++
		if dead {
			want.DeadLettered++
			ss.DeadLettered++
			want.ByClass[o.Class]++
		} else {
			want.Succeeded++
			ss.Succeeded++
			want.ByAttempt[attempts]++
		}
		want.BySchema[o.Schema] = ss
		for k, a := range o.Trace {
			want.Tokens.Prompt += a.PromptTokens
			want.Tokens.Completion += a.CompletionTokens
			if k > 0 {
				want.Tokens.Healing += a.PromptTokens + a.CompletionTokens
			}
		}
	}
	write(t, s, outs...)
	got, err := s.Stats(t.Context(), Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("Stats =\n%+v\nwant\n%+v", got, want)
	}
	js, err := json.Marshal(got)
	if err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{`"jobs"`, `"succeeded"`, `"dead_lettered"`, `"by_attempt":{"1"`, `"by_class"`, `"by_schema"`} {
		if !bytes.Contains(js, []byte(k)) {
			t.Errorf("stats JSON %s lacks %s", js, k)
		}
	}
	only, err := s.Stats(t.Context(), Filter{Schema: "receipt"})
	if err != nil {
		t.Fatal(err)
	}
	if only.Jobs != want.BySchema["receipt"].Jobs {
		t.Errorf("Stats(schema receipt).Jobs = %d, want %d", only.Jobs, want.BySchema["receipt"].Jobs)
	}
}

func TestListFilters(t *testing.T) {
	t.Parallel()
	s := openTemp(t)
	a := outcome("a", true, 2, t0, diag("/items/0/price", "type", `"3"`))
	b := outcome("b", true, 2, t0.Add(time.Minute), diag("/currency", "enum", `"eur"`))
	b.Model, b.Class = "openai:gpt", "truncated"
	c := outcome("c", true, 1, t0.Add(2*time.Minute), diag("/items/7/price", "type", `"x"`), diag("/currency", "enum", `"usd"`))
	c.Schema = "receipt"
	d := outcome("d", false, 2, t0.Add(3*time.Minute), diag("/items/1/price", "type", `"1"`)) // healed: never listed
	write(t, s, a, b, c, d)
	priceInvoice := cluster.ID(cluster.Fingerprint{Schema: "invoice", Version: "v1hash", Path: "/items/*/price", Keyword: "type"})
	tests := []struct {
		name string
		f    Filter
		want []string
	}{
		{"all newest first", Filter{}, []string{"c", "b", "a"}},
		{"schema", Filter{Schema: "invoice"}, []string{"b", "a"}},
		{"class", Filter{Class: "truncated"}, []string{"b"}},
		{"model", Filter{Model: "openai:gpt"}, []string{"b"}},
		{"path pattern", Filter{Path: "/items/*/price"}, []string{"c", "a"}},
		{"concrete path", Filter{Path: "/items/3/price"}, []string{"c", "a"}},
		{"cluster", Filter{Cluster: priceInvoice}, []string{"a"}},
		{"since", Filter{Since: t0.Add(time.Minute)}, []string{"c", "b"}},
		{"until", Filter{Until: t0.Add(time.Minute)}, []string{"a"}},
		{"ids", Filter{IDs: []string{"a", "c", "d"}}, []string{"c", "a"}},
		{"limit", Filter{Limit: 2}, []string{"c", "b"}},
		{"version", Filter{Version: "other"}, nil},
		{"combined", Filter{Schema: "invoice", Path: "/currency"}, []string{"b"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			list, err := s.List(t.Context(), tc.f)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, e := range list {
				got = append(got, e.JobID)
			}
			if !slices.Equal(got, tc.want) {
				t.Errorf("List(%+v) = %v, want %v", tc.f, got, tc.want)
			}
		})
	}
	list, err := s.List(t.Context(), Filter{IDs: []string{"c"}})
	if err != nil || len(list) != 1 {
		t.Fatalf("List c: %v %v", list, err)
	}
	e := list[0]
	if e.FirstPath != "/items/7/price" || e.Attempts != 1 || e.Schema != "receipt" || !e.FailedAt.Equal(c.FinishedAt) {
		t.Errorf("entry = %+v", e)
	}
}

func TestGetReturnsTranscript(t *testing.T) {
	t.Parallel()
	s := openTemp(t)
	small := realistic(1)
	big := realistic(2)
	big.Trace[0].Raw = strings.Repeat(`{"note":"long output"}`, 400) // a large payload
	ok := outcome("ok", false, 1, t0)
	write(t, s, small, big, ok)
	for _, want := range []job.Outcome{small, big, ok} {
		got, err := s.Get(t.Context(), want.JobID)
		if err != nil {
			t.Fatalf("Get(%s): %v", want.JobID, err)
		}
		want.Data = nil // not kept
		gj, _ := json.Marshal(got)
		wj, _ := json.Marshal(want)
		if !bytes.Equal(gj, wj) {
			t.Errorf("Get(%s) =\n%s\nwant\n%s", want.JobID, gj, wj)
		}
	}
	var typ string
	if err := s.r.QueryRow(`SELECT typeof(p.body) FROM payloads p JOIN outcomes o ON o.id = p.outcome_id WHERE o.job_id = ?`, big.JobID).Scan(&typ); err != nil {
		t.Fatal(err)
	}
	if typ != "text" {
		t.Errorf("payload of a %d-byte trace stored as %s, want text", len(big.Trace[0].Raw), typ)
	}
	if _, err := s.Get(t.Context(), "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Get(unknown) err = %v, want ErrNotFound", err)
	}
}

func TestPurgeDryRunThenReal(t *testing.T) {
	t.Parallel()
	s := openTemp(t)
	var outs []job.Outcome
	for i := 0; i < 10; i++ {
		outs = append(outs, realistic(i))
	}
	outs = append(outs, outcome("ok", false, 2, t0, diag("/total", "type", "1")))
	write(t, s, outs...)
	before := t0.Add(5 * time.Millisecond) // realistic(i) finishes at t0+i ms
	f := Filter{Until: before}
	dry, err := s.Purge(t.Context(), f, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(dry) != 5 {
		t.Errorf("dry run would purge %v, want the 5 dead letters before the cutoff", dry)
	}
	if n := count(t, s, "outcomes"); n != len(outs) {
		t.Errorf("dry run deleted rows: %d outcomes left, want %d", n, len(outs))
	}
	real, err := s.Purge(t.Context(), f, false)
	if err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(real, dry) {
		t.Errorf("purged %v, dry run said %v", real, dry)
	}
	if n := count(t, s, "outcomes"); n != len(outs)-5 {
		t.Errorf("%d outcomes left, want %d", n, len(outs)-5)
	}
	// children go with their outcome
	var orphans int
	if err := s.r.QueryRow(`SELECT (SELECT COUNT(*) FROM failures WHERE outcome_id NOT IN (SELECT id FROM outcomes))
		+ (SELECT COUNT(*) FROM attempts WHERE outcome_id NOT IN (SELECT id FROM outcomes))
		+ (SELECT COUNT(*) FROM payloads WHERE outcome_id NOT IN (SELECT id FROM outcomes))`).Scan(&orphans); err != nil {
		t.Fatal(err)
	}
	if orphans != 0 {
		t.Errorf("%d orphan rows after purge", orphans)
	}
	for _, id := range real {
		if _, err := s.Get(t.Context(), id); !errors.Is(err, ErrNotFound) {
			t.Errorf("Get(%s) after purge: %v, want ErrNotFound", id, err)
		}
	}
}

func TestMarkReplayed(t *testing.T) {
	t.Parallel()
	s := openTemp(t)
	write(t, s, realistic(1), realistic(2))
	if err := s.MarkReplayed(t.Context(), realistic(1).JobID, 0); err != nil {
		t.Fatal(err)
	}
	list, err := s.List(t.Context(), Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(list) != 1 || list[0].JobID != realistic(2).JobID {
		t.Errorf("List after marking = %+v, want only %s", list, realistic(2).JobID)
	}
	if err := s.MarkReplayed(t.Context(), realistic(1).JobID, 5); !errors.Is(err, ErrNotFound) {
		t.Errorf("MarkReplayed(unknown run) = %v, want ErrNotFound", err)
	}
}

func TestRetainPlansThenApplies(t *testing.T) {
	t.Parallel()
	s := openTemp(t)
	now := time.Now().UTC()
	var outs []job.Outcome
	for i := 0; i < 10; i++ { // dead letters i hours old
		outs = append(outs, outcome(fmt.Sprintf("d%d", i), true, 1, now.Add(-time.Duration(i)*time.Hour-time.Minute), diag("/a", "type", "1")))
	}
	outs = append(outs, outcome("old-ok", false, 1, now.Add(-100*time.Hour)))
	write(t, s, outs...)

	p, err := s.Retain(t.Context(), 48*time.Hour, 6)
	if err != nil {
		t.Fatal(err)
	}
	// by age: only old-ok; by rows: the 4 oldest dead letters d6..d9
	if p.ByAge != 1 || p.Succeeded != 1 || p.ByRows != 4 {
		t.Errorf("plan = %+v, want 1 by age (the old success) and 4 by rows", p)
	}
	slices.Sort(p.DeadLetters)
	if !slices.Equal(p.DeadLetters, []string{"d6", "d7", "d8", "d9"}) {
		t.Errorf("plan dead letters = %v", p.DeadLetters)
	}
	if n := count(t, s, "outcomes"); n != len(outs) {
		t.Fatalf("Retain deleted rows (%d left): it must only plan", n)
	}
	n, err := s.Apply(t.Context(), p)
	if err != nil {
		t.Fatal(err)
	}
	if n != 5 || count(t, s, "outcomes") != len(outs)-5 {
		t.Errorf("Apply deleted %d, %d left", n, count(t, s, "outcomes"))
	}
	p2, err := s.Retain(t.Context(), 48*time.Hour, 6)
	if err != nil {
		t.Fatal(err)
	}
	if !p2.Empty() {
		t.Errorf("second plan = %+v, want empty", p2)
	}
}

func TestExportAndReset(t *testing.T) {
	t.Parallel()
	s := openTemp(t)
	write(t, s, realistic(1), realistic(2), outcome("ok", false, 1, t0))
	var buf bytes.Buffer
	n, err := s.Export(t.Context(), Filter{}, &buf)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if n != 2 || len(lines) != 2 {
		t.Fatalf("exported %d (%d lines), want the 2 dead letters", n, len(lines))
	}
	for _, l := range lines {
		o, err := job.DecodeOutcome([]byte(l))
		if err != nil {
			t.Fatalf("exported line does not decode: %v", err)
		}
		if o.Status != job.StatusDeadLettered || len(o.Trace) != 2 {
			t.Errorf("exported %+v", o)
		}
	}
	if err := s.Reset(t.Context()); err != nil {
		t.Fatal(err)
	}
	for _, tb := range []string{"outcomes", "payloads", "attempts", "failures", "clusters"} {
		if n := count(t, s, tb); n != 0 {
			t.Errorf("%s has %d rows after Reset", tb, n)
		}
	}
	write(t, s, realistic(1)) // usable after a reset
	if n := count(t, s, "outcomes"); n != 1 {
		t.Errorf("%d outcomes after rewrite", n)
	}
}

func TestDecodeOutcome(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		in   string
		ok   bool
	}{
		{"dead letter", `{"job_id":"a","schema":"s","status":"dead_lettered","class":"schema","attempts":2}`, true},
		{"success", `{"job_id":"a","schema":"s","status":"succeeded","attempts":1,"data":{"x":1}}`, true},
		{"no id", `{"schema":"s","status":"succeeded"}`, false},
		{"bad status", `{"job_id":"a","status":"done"}`, false},
		{"negative run", `{"job_id":"a","status":"succeeded","run":-1}`, false},
		{"not json", `{"job_id":`, false},
		{"array", `[1,2]`, false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			_, err := job.DecodeOutcome([]byte(tc.in))
			if tc.ok && err != nil {
				t.Errorf("DecodeOutcome: %v", err)
			}
			if !tc.ok && !errors.Is(err, job.ErrInvalidOutcome) {
				t.Errorf("DecodeOutcome err = %v, want ErrInvalidOutcome", err)
			}
		})
	}
}

func FuzzDecodeOutcome(f *testing.F) {
	f.Add([]byte(`{"job_id":"a","schema":"s","status":"dead_lettered","trace":[{"n":1,"diagnostics":[{"path":"/x/0","keyword":"type"}]}]}`))
	f.Add([]byte(`{"job_id":"a","status":"succeeded"}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		o, err := job.DecodeOutcome(data)
		if err != nil {
			if !errors.Is(err, job.ErrInvalidOutcome) {
				t.Fatalf("error %v does not wrap ErrInvalidOutcome", err)
			}
			return
		}
		if o.JobID == "" || (o.Status != job.StatusSucceeded && o.Status != job.StatusDeadLettered) {
			t.Fatalf("accepted %+v", o)
		}
	})
}

// TestMigrationMergedBelowTheNewestIsApplied: an index opened by a binary
// that had migration 10 (and later ones) but not 9 records 1..8 and 10 on;
// a binary with 9 applies it when it opens the file.
func TestMigrationMergedBelowTheNewestIsApplied(t *testing.T) {
	t.Parallel()
	path := filepath.Join(t.TempDir(), "pipeline.db")
	s, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	// undo migration 9 (0009_evals.sql) as if the binary never had it
	for _, q := range []string{`DROP VIEW v_evals`, `DROP TABLE evals`, `DROP TABLE result_data`,
		`DELETE FROM schema_migrations WHERE version = 9`} {
		if _, err := s.w.Exec(q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
	var versions string
	if err := s.w.QueryRow(`SELECT group_concat(version) FROM (SELECT version FROM schema_migrations ORDER BY version)`).Scan(&versions); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(versions, "1,2,3,4,5,6,7,8,10") {
		t.Fatalf("schema_migrations %s, want 1..8 then 10", versions)
	}
	s.Close()

	s, err = Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var n int
	if err := s.w.QueryRow(`SELECT COUNT(*) FROM schema_migrations WHERE version = 9`).Scan(&n); err != nil || n != 1 {
		t.Fatalf("migration 9 recorded %d times (%v), want once", n, err)
	}
	if _, err := s.SaveEval(t.Context(), Eval{At: time.Now(), File: "l.jsonl", Digest: "sha256:00",
		Groups: []EvalGroup{{Schema: "s", Records: 1}}}); err != nil {
		t.Errorf("after migration 9: %v", err)
	}
	if got := count(t, s, "schema_migrations"); got != embeddedMigrations(t) {
		t.Errorf("%d migrations recorded, want %d", got, embeddedMigrations(t))
	}
}
