package index

import (
	"bytes"
	"compress/flate"
	"database/sql"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/klauspost/compress/s2"
	"github.com/llmpipeline/pipeline/job"
	"github.com/llmpipeline/pipeline/report/cluster"
)

// plainDB opens the index as an operator's tool does: a plain read-only
// connection, no function of ours registered, nothing but SQL.
func plainDB(t *testing.T, path string) *sql.DB {
	t.Helper()
	db, err := sql.Open("sqlite3", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

var isoMillis = regexp.MustCompile(`^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z$`)

func iso(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// viewData writes a dead letter replayed into a success, one replayed
// into another dead letter, one replayed with no run back yet, one never
// replayed, a healed success and a first-pass success.
func viewData(t *testing.T, s *Store) []job.Outcome {
	t.Helper()
	at := t0.Add(123 * time.Millisecond)
	healedDead := realistic(1)
	healedDead.FinishedAt = at
	healedOK := outcome(healedDead.JobID, false, 1, at.Add(time.Hour))
	healedOK.Run = 1
	againDead := realistic(2)
	againDead2 := realistic(2)
	againDead2.Run = 1
	pending := realistic(3)
	never := realistic(4)
	never.Hint = "make /total a number"
	healed := outcome("healed", false, 2, at, diag("/total", "type", `"1"`))
	first := outcome("first", false, 1, at)
	outs := []job.Outcome{healedDead, healedOK, againDead, againDead2, pending, never, healed, first}
	write(t, s, outs...)
	if err := s.MarkReplayed(t.Context(), pending.JobID, 0); err != nil {
		t.Fatal(err)
	}
	// a stored eval, for v_evals
	if _, err := s.SaveEval(t.Context(), Eval{At: at, File: "labels.jsonl", Digest: "sha256:00", Groups: []EvalGroup{{
		Schema: "invoice", Version: "v1", Model: "sim", Records: 2, WithResult: 2, Exact: 1,
		EvalCounts: EvalCounts{Correct: 3, Wrong: 1},
		Fields:     map[string]EvalCounts{"/total": {Correct: 1, Wrong: 1}, "/vendor": {Correct: 2}}}}}); err != nil {
		t.Fatal(err)
	}
	return outs
}

// TestViewsReadPlainly queries the views with plain SQL through a fresh
// connection: ISO 8601 times, words for statuses, the transcript as JSON
// that json_extract reads, every model call in v_attempts.
func TestViewsReadPlainly(t *testing.T) {
	t.Parallel()
	s := openTemp(t)
	outs := viewData(t, s)
	db := plainDB(t, s.Path())

	var raw, failedAt, hint string
	if err := db.QueryRow(`SELECT json_extract(transcript, '$.attempts[0].raw'), failed_at, hint FROM v_dead_letters WHERE job_id = ?`,
		outs[5].JobID).Scan(&raw, &failedAt, &hint); err != nil {
		t.Fatal(err)
	}
	if raw != outs[5].Trace[0].Raw || failedAt != iso(outs[5].FinishedAt) || hint != outs[5].Hint {
		t.Errorf("v_dead_letters: raw %q, failed_at %q, hint %q; want %q, %q, %q", raw, failedAt, hint, outs[5].Trace[0].Raw, iso(outs[5].FinishedAt), outs[5].Hint)
	}
	var jobInput string
	if err := db.QueryRow(`SELECT json_extract(transcript, '$.job.input') FROM v_outcomes WHERE job_id = 'first'`).Scan(&jobInput); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(jobInput, "Invoice INV-1") {
		t.Errorf("v_outcomes transcript job input = %q", jobInput)
	}

	// replay_outcome
	rows, err := db.Query(`SELECT job_id, run, COALESCE(replay_outcome, 'never') FROM v_dead_letters ORDER BY job_id, run`)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for rows.Next() {
		var job, what string
		var run int
		if err := rows.Scan(&job, &run, &what); err != nil {
			t.Fatal(err)
		}
		got[fmt.Sprintf("%s/%d", job, run)] = what
	}
	rows.Close()
	want := map[string]string{
		outs[0].JobID + "/0": "succeeded",
		outs[2].JobID + "/0": "dead_lettered", outs[2].JobID + "/1": "never",
		outs[4].JobID + "/0": "pending",
		outs[5].JobID + "/0": "never",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("v_dead_letters replay_outcome = %v, want %v", got, want)
	}

	// v_outcomes: every run, status as a word, ISO times
	var n int
	if err := db.QueryRow(`SELECT COUNT(*) FROM v_outcomes`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != len(outs) {
		t.Errorf("v_outcomes has %d rows, want %d", n, len(outs))
	}
	rows, err = db.Query(`SELECT job_id, run, status, started_at, finished_at, duration_ms FROM v_outcomes`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var jobID, status, started, finished string
		var run int
		var dur int64
		if err := rows.Scan(&jobID, &run, &status, &started, &finished, &dur); err != nil {
			t.Fatal(err)
		}
		var o *job.Outcome
		for i := range outs {
			if outs[i].JobID == jobID && outs[i].Run == run {
				o = &outs[i]
			}
		}
		if o == nil {
			t.Fatalf("v_outcomes row %s/%d not written", jobID, run)
		}
		if status != o.Status || started != iso(o.StartedAt) || finished != iso(o.FinishedAt) || !isoMillis.MatchString(finished) ||
			dur != o.FinishedAt.Sub(o.StartedAt).Milliseconds() {
			t.Errorf("v_outcomes %s/%d: %s %s %s %d, want %s %s %s", jobID, run, status, started, finished, dur, o.Status, iso(o.StartedAt), iso(o.FinishedAt))
		}
	}
	rows.Close()

	// v_attempts: one row per model call, first-pass successes included
	calls := 0
	for _, o := range outs {
		calls += len(o.Trace)
	}
	if err := db.QueryRow(`SELECT COUNT(*) FROM v_attempts`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != calls {
		t.Errorf("v_attempts has %d rows, want one per model call: %d", n, calls)
	}
	var attN, prompt int
	var repairs, diags, path string
	var class job.Class
	if err := db.QueryRow(`SELECT n, repairs, diagnostics, class, prompt_tokens, json_extract(diagnostics, '$[0].path') FROM v_attempts
		WHERE job_id = ? AND n = 2`, outs[5].JobID).Scan(&attN, &repairs, &diags, &class, &prompt, &path); err != nil {
		t.Fatal(err)
	}
	a := outs[5].Trace[1]
	wantRepairs, _ := json.Marshal(a.Repairs)
	if attN != 2 || repairs != string(wantRepairs) || class != a.Class || prompt != a.PromptTokens || path != a.Diagnostics[0].Path {
		t.Errorf("v_attempts row = %d %s %s %s %d %s, want attempt 2 of %+v", attN, repairs, diags, class, prompt, path, a)
	}
	var firstClass, firstDiags string
	if err := db.QueryRow(`SELECT class, diagnostics FROM v_attempts WHERE job_id = 'first'`).Scan(&firstClass, &firstDiags); err != nil {
		t.Fatal(err)
	}
	if firstClass != "" || firstDiags != "[]" {
		t.Errorf("first-pass success attempt: class %q diagnostics %s, want '' and []", firstClass, firstDiags)
	}

	// v_failures
	var fixed int
	var clusterID, kw string
	if err := db.QueryRow(`SELECT cluster, keyword, fixed, finished_at FROM v_failures WHERE job_id = 'healed'`).Scan(&clusterID, &kw, &fixed, &failedAt); err != nil {
		t.Fatal(err)
	}
	if clusterID != cluster.ID(cluster.Fingerprint{Schema: "invoice", Version: "v1hash", Path: "/total", Keyword: "type"}) || kw != "type" || fixed != 1 || !isoMillis.MatchString(failedAt) {
		t.Errorf("v_failures row = %s %s %d %s", clusterID, kw, fixed, failedAt)
	}

	// v_evals: ISO time, the figures computed as Go computes them (f1 in
	// one division: 6 correct, 1 missing, 2 extra is exactly 0.8)
	evalAt := time.Date(2026, 12, 2, 6, 30, 1, 234e6, time.UTC)
	counts := EvalCounts{Correct: 6, Missing: 1, Extra: 2}
	if _, err := s.SaveEval(t.Context(), Eval{At: evalAt, File: "l2.jsonl", Digest: "sha256:01", Groups: []EvalGroup{{
		Schema: "invoice", Version: "v2", Model: "sim", Records: 3, WithResult: 3, EvalCounts: counts}}}); err != nil {
		t.Fatal(err)
	}
	evalRows, err := db.Query(`SELECT file, at, precision, recall, f1, correct, wrong, missing, extra FROM v_evals ORDER BY eval_id`)
	if err != nil {
		t.Fatal(err)
	}
	var gotEvals []string
	for evalRows.Next() {
		var file, at string
		var p, r, f1 float64
		var c EvalCounts
		if err := evalRows.Scan(&file, &at, &p, &r, &f1, &c.Correct, &c.Wrong, &c.Missing, &c.Extra); err != nil {
			t.Fatal(err)
		}
		wp, wr, wf := c.Figures()
		if p != wp || r != wr || f1 != wf {
			t.Errorf("v_evals %s: precision %.17g recall %.17g f1 %.17g; Go computes %.17g %.17g %.17g", file, p, r, f1, wp, wr, wf)
		}
		gotEvals = append(gotEvals, fmt.Sprintf("%s %s %.2f %.2f %.17g", file, at, p, r, f1))
	}
	evalRows.Close()
	wantEvals := []string{"labels.jsonl " + iso(t0.Add(123*time.Millisecond)) + " 0.75 0.75 0.75", "l2.jsonl 2026-12-02T06:30:01.234Z 0.75 0.86 0.80000000000000004"}
	if !reflect.DeepEqual(gotEvals, wantEvals) {
		t.Errorf("v_evals rows %q, want %q", gotEvals, wantEvals)
	}
}

// TestIndexDocQueriesRun runs every SQL example of docs/INDEX.md through a
// plain connection: the documented queries work on a real index.
func TestIndexDocQueriesRun(t *testing.T) {
	t.Parallel()
	s := openTemp(t)
	viewData(t, s)
	db := plainDB(t, s.Path())
	qs := docQueries(t)
	if len(qs) < 5 {
		t.Fatalf("docs/INDEX.md has %d SQL examples, want at least 5", len(qs))
	}
	for _, q := range qs {
		rows, err := db.Query(q)
		if err != nil {
			t.Errorf("%v\n%s", err, q)
			continue
		}
		n := 0
		for rows.Next() {
			n++
		}
		if err := rows.Err(); err != nil {
			t.Errorf("%v\n%s", err, q)
		}
		rows.Close()
		if n == 0 {
			t.Errorf("no rows on the test index (it has a row for every example):\n%s", q)
		}
	}
}

// docQueries returns the statements of the ```sql blocks of docs/INDEX.md.
func docQueries(t *testing.T) []string {
	t.Helper()
	doc, err := os.ReadFile("../docs/INDEX.md")
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, block := range strings.Split(string(doc), "```sql\n")[1:] {
		body, _, _ := strings.Cut(block, "```")
		for _, q := range strings.Split(body, ";") {
			if q = strings.TrimSpace(q); q != "" && !strings.HasPrefix(q, ".") {
				out = append(out, q)
			}
		}
	}
	return out
}

// TestViewsInSQLiteCLI reads the views with the sqlite3 command-line tool,
// as operators do, when it is installed (the driver test above holds the
// same queries without it).
func TestViewsInSQLiteCLI(t *testing.T) {
	t.Parallel()
	bin, err := exec.LookPath("sqlite3")
	if err != nil {
		t.Skip("no sqlite3 command in PATH")
	}
	s := openTemp(t)
	outs := viewData(t, s)
	out, err := exec.CommandContext(t.Context(), bin, "-readonly", "-json", s.Path(),
		`SELECT job_id, failed_at, json_extract(transcript, '$.attempts[0].raw') AS raw FROM v_dead_letters WHERE job_id = '`+outs[5].JobID+`'`).CombinedOutput()
	if err != nil {
		t.Fatalf("sqlite3: %v: %s", err, out)
	}
	var rows []struct {
		JobID    string `json:"job_id"`
		FailedAt string `json:"failed_at"`
		Raw      string `json:"raw"`
	}
	if err := json.Unmarshal(out, &rows); err != nil {
		t.Fatalf("sqlite3 -json output %s: %v", out, err)
	}
	if len(rows) != 1 || rows[0].Raw != outs[5].Trace[0].Raw || rows[0].FailedAt != iso(outs[5].FinishedAt) {
		t.Errorf("sqlite3 read %+v", rows)
	}
	for _, q := range docQueries(t) {
		cmd := exec.CommandContext(t.Context(), bin, "-readonly", "-bail", s.Path())
		cmd.Stdin = strings.NewReader(q + ";\n")
		if out, err := cmd.CombinedOutput(); err != nil || len(out) == 0 || bytes.Contains(out, []byte("Error")) {
			t.Errorf("sqlite3: %v %s\n%s", err, out, q)
		}
	}
}

// TestMigrationConvertsPayloads builds a file as schema version 4 wrote it
// (payloads S2-compressed, DEFLATE in the oldest, plain JSON as a BLOB for
// small ones, an encoding column), opens it with this binary and reads it:
// Get returns the same transcripts, the views read every row as JSON
// text, and an undecodable body becomes a readable error, not a failure
// to open.
func TestMigrationConvertsPayloads(t *testing.T) {
	t.Parallel()
	cur := openTemp(t)
	tiny := job.Outcome{JobID: "tiny", Schema: "invoice", SchemaVersion: "v1hash", Status: job.StatusDeadLettered, Class: "invalid_job", FinishedAt: t0}
	outs := []job.Outcome{tiny, realistic(1), realistic(2), realistic(3)}
	write(t, cur, outs...)

	path := filepath.Join(t.TempDir(), "v4.db")
	if err := createPrivate(path); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("sqlite3", dsn(path, false))
	if err != nil {
		t.Fatal(err)
	}
	db.SetMaxOpenConns(1)
	stmts := []string{`CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at INTEGER NOT NULL)`}
	ms, err := migrations()
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range ms {
		if m.version <= 4 {
			stmts = append(stmts, m.sql, fmt.Sprintf(`INSERT INTO schema_migrations VALUES (%d, '%s', 0)`, m.version, m.name))
		}
	}
	stmts = append(stmts, `ATTACH DATABASE '`+cur.Path()+`' AS cur`, `INSERT INTO outcomes SELECT `+outcomesV1Columns+` FROM cur.outcomes`)
	for _, q := range stmts {
		if _, err := db.Exec(q); err != nil {
			t.Fatalf("building a version 4 file: %v\n%s", err, q)
		}
	}
	deflate := func(b []byte) []byte {
		var buf bytes.Buffer
		zw, _ := flate.NewWriter(&buf, flate.BestSpeed)
		zw.Write(b)
		zw.Close()
		return buf.Bytes()
	}
	encodings := map[string]int{}
	for i, o := range outs {
		var id int64
		var body string
		if err := db.QueryRow(`SELECT p.outcome_id, p.body FROM cur.payloads p JOIN cur.outcomes o ON o.id = p.outcome_id WHERE o.job_id = ?`, o.JobID).Scan(&id, &body); err != nil {
			t.Fatal(err)
		}
		enc, stored := []int{encJSON, encS2, encDeflate, encS2}[i], []byte(body)
		switch {
		case enc == encS2 && i == 3:
			stored = []byte("not s2 at all") // a corrupt row
		case enc == encS2:
			stored = s2.Encode(nil, stored)
		case enc == encDeflate:
			stored = deflate(stored)
		}
		encodings[o.JobID] = enc
		if _, err := db.Exec(`INSERT INTO payloads (outcome_id, encoding, body) VALUES (?, ?, ?)`, id, enc, stored); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}

	s, err := Open(path)
	if err != nil {
		t.Fatalf("opening a version 4 file: %v", err)
	}
	defer s.Close()
	for _, o := range outs[:3] {
		got, err := s.Get(t.Context(), o.JobID)
		if err != nil {
			t.Fatalf("Get(%s) after the migration: %v", o.JobID, err)
		}
		want, _ := cur.Get(t.Context(), o.JobID)
		if !reflect.DeepEqual(got, want) {
			t.Errorf("Get(%s) (encoding %d before) = %+v, want %+v", o.JobID, encodings[o.JobID], got, want)
		}
	}
	plain := plainDB(t, path)
	var texts, rows int
	if err := plain.QueryRow(`SELECT SUM(typeof(body) = 'text' AND json_valid(body)), COUNT(*) FROM payloads`).Scan(&texts, &rows); err != nil {
		t.Fatal(err)
	}
	if texts != len(outs) || rows != len(outs) {
		t.Errorf("%d of %d payloads are JSON text after the migration, want all %d", texts, rows, len(outs))
	}
	var raw string
	if err := plain.QueryRow(`SELECT json_extract(transcript, '$.attempts[0].raw') FROM v_dead_letters WHERE job_id = ?`, outs[2].JobID).Scan(&raw); err != nil {
		t.Fatal(err)
	}
	if raw != outs[2].Trace[0].Raw {
		t.Errorf("v_dead_letters of a formerly DEFLATE payload: raw %q", raw)
	}
	var unreadable string
	if err := plain.QueryRow(`SELECT json_extract(p.body, '$.unreadable_payload') FROM payloads p JOIN outcomes o ON o.id = p.outcome_id WHERE o.job_id = ?`,
		outs[3].JobID).Scan(&unreadable); err != nil || !strings.Contains(unreadable, "decompressing") {
		t.Errorf("corrupt payload became %q (%v), want the error as JSON text", unreadable, err)
	}
	var cols int
	if err := plain.QueryRow(`SELECT COUNT(*) FROM pragma_table_info('payloads') WHERE name = 'encoding'`).Scan(&cols); err != nil || cols != 0 {
		t.Errorf("payloads still has an encoding column (%v)", err)
	}
}

// TestReplayHealedReads: a dead letter whose job succeeded on a later run
// is counted apart in ClusterCounts and ReplayHealed, and left out of the
// reads behind the flags; one replayed into another dead letter is not.
func TestReplayHealedReads(t *testing.T) {
	t.Parallel()
	s := openTemp(t)
	viewData(t, s)
	counts, err := s.Analytics().ClusterCounts(t.Context(), Filter{})
	if err != nil {
		t.Fatal(err)
	}
	total := cluster.ID(cluster.Fingerprint{Schema: "invoice", Version: "v1hash", Path: "/total", Keyword: "type"})
	var c ClusterCount
	for _, x := range counts {
		if x.ID == total {
			c = x
		}
	}
	// /total failed in: healedDead (replayed, healed), againDead and its
	// replay (both dead), pending, never, and "healed" (a success)
	if c.Jobs != 6 || c.DeadLetters != 5 || c.Replayed != 1 || c.ReplayedFixed != 0 {
		t.Errorf("/total counts %+v, want 6 jobs, 5 dead letters, 1 replayed, healed", c)
	}
	ends, err := s.Analytics().ClusterRecentEnds(t.Context(), total, Filter{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(ends) != 5 {
		t.Errorf("ClusterRecentEnds returned %d runs, want the 5 not replayed and healed", len(ends))
	}
	ex, err := s.Analytics().ClusterExamples(t.Context(), total, Filter{}, 10)
	if err != nil {
		t.Fatal(err)
	}
	for _, id := range ex {
		if id == realistic(1).JobID {
			t.Errorf("examples %v hold the replayed, healed dead letter %s", ex, id)
		}
	}
	healed, err := s.Analytics().ReplayHealed(t.Context(), Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if want := []VersionCount{{Schema: "invoice", Version: "v1hash", N: 1}}; !reflect.DeepEqual(healed, want) {
		t.Errorf("ReplayHealed = %v, want %v", healed, want)
	}
}
