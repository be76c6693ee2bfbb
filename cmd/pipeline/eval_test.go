package main

import (
	"encoding/json"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// newPerJobServer speaks the OpenAI chat completions wire format (the
// openapi spec's CreateChatCompletionResponse) and answers each call with
// answer(model, job), the job read from the prompt (JOB=<id>).
func newPerJobServer(t *testing.T, answer func(model, job string) string) *httptest.Server {
	t.Helper()
	s := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		model, job, ok := chatRequest(r)
		if !ok {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-" + job, "object": "chat.completion", "created": 1700000000, "model": model,
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "logprobs": nil,
				"message": map[string]any{"role": "assistant", "content": answer(model, job), "refusal": nil}}},
			"usage": map[string]any{"prompt_tokens": 100, "completion_tokens": 40, "total_tokens": 140},
		})
	}))
	t.Cleanup(s.Close)
	return s
}

func labelsFile(t *testing.T, lines ...string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "labels.jsonl")
	if err := os.WriteFile(p, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestEvalEndToEnd: four ticket jobs answered by an httptest provider, one
// of them healed by the fallback model and one dead-lettered, scored
// against labels; --json, --by model, the gate's exit codes, a broken
// labelled file and the stored history.
func TestEvalEndToEnd(t *testing.T) {
	t.Parallel()
	wantTestKeys(t)
	srv := newPerJobServer(t, func(model, job string) string {
		switch {
		case job == "ev-00" && model == "primary":
			return `{"subject": "Cannot log in", "priority": "high", "category": "account", "customer": {"name": "Ana Lima", "email": "ana@example.com"}, "tags": ["Account", "login", "extra"]}`
		case job == "ev-01" && model == "primary":
			return `{"subject": "Cannot log in", "priority": "high", "category": "bug", "customer": {"name": "Ana Lima", "email": "ana@example.com"}}`
		case job == "ev-02" && model == "backup":
			return validTicket
		}
		return invalidTicket
	})
	dir := t.TempDir()
	ticketJobs(t, dir, "ev", 4)
	_, errs, code := runCLI(t, "", "run", "--data-dir", dir, "--until-idle", "--model", "openai:primary", "--llm-url", srv.URL+"/v1",
		"--max-attempts", "2", "--fallback-model", "openai:backup")
	if code != exitOK {
		t.Fatalf("run: exit %d: %s", code, errs)
	}
	want := `{"subject": "  cannot LOG in", "priority": "high", "category": "account", "customer": {"name": "ana lima", "email": "ANA@example.com"}}`
	labels := labelsFile(t,
		`{"id": "ev-00", "expected": {"subject": "Cannot log in", "priority": "high", "category": "account", "customer": {"name": "Ana Lima", "email": "ana@example.com"}, "tags": ["login", "account"]}}`,
		`{"id": "ev-01", "expected": `+want+`}`,
		`{"id": "ev-02", "expected": `+want+`}`,
		`{"id": "ev-03", "expected": `+want+`}`,
		`{"id": "ev-unknown", "expected": {"subject": "x"}}`,
	)

	type evalJSON struct {
		Records    int `json:"records"`
		WithResult int `json:"with_result"`
		NoResult   int `json:"no_result"`
		Exact      int `json:"exact"`
		Overall    map[string]float64
		Fields     map[string]map[string]float64
		By         map[string]struct {
			Records int
			Overall map[string]float64
		}
	}
	var res evalJSON
	out := mustCLI(t, "", "eval", "--data-dir", dir, "--expected", labels, "--json", "--by", "model")
	if strings.Count(out, "\n") != 1 {
		t.Errorf("--json printed %d lines, want one object", strings.Count(out, "\n"))
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatalf("%v: %s", err, out)
	}
	if res.Records != 5 || res.WithResult != 3 || res.NoResult != 2 || res.Exact != 1 {
		t.Errorf("records %d with_result %d no_result %d exact %d, want 5 3 2 1", res.Records, res.WithResult, res.NoResult, res.Exact)
	}
	o := res.Overall
	if o["correct"] != 16 || o["wrong"] != 1 || o["missing"] != 6 || o["extra"] != 1 {
		t.Errorf("overall %v, want correct 16 wrong 1 missing 6 extra 1", o)
	}
	if math.Abs(o["f1"]-32.0/41) > 1e-9 || math.Abs(o["precision"]-16.0/18) > 1e-9 || math.Abs(o["recall"]-16.0/23) > 1e-9 {
		t.Errorf("overall figures %v, want f1 32/41, precision 16/18, recall 16/23", o)
	}
	if f := res.Fields["/tags/*"]; f["correct"] != 2 || f["extra"] != 1 || f["f1"] != 0.8 {
		t.Errorf("/tags/* %v", f)
	}
	if f := res.Fields["/category"]; f["correct"] != 2 || f["wrong"] != 1 || f["missing"] != 1 {
		t.Errorf("/category %v", f)
	}
	// --by model: the model of the final answer; the fallback answered
	// ev-02 and, last, the dead letter ev-03
	if p := res.By["openai:primary"]; p.Records != 2 || p.Overall["correct"] != 11 || p.Overall["wrong"] != 1 || p.Overall["extra"] != 1 {
		t.Errorf("by openai:primary %+v", p)
	}
	if b := res.By["openai:backup"]; b.Records != 2 || b.Overall["correct"] != 5 || b.Overall["missing"] != 5 {
		t.Errorf("by openai:backup %+v", b)
	}
	if n := res.By["(no outcome)"]; n.Records != 1 || n.Overall["missing"] != 1 {
		t.Errorf("by (no outcome) %+v", n)
	}

	// the table: a row per field path, the overall f1 to two decimals, the errors
	table, errs, code := runCLI(t, "", "eval", "--data-dir", dir, "--expected", labels, "--show-errors", "3", "--min-f1", "0.75")
	if code != exitOK {
		t.Errorf("--min-f1 0.75 with f1 0.78: exit %d, want 0: %s", code, errs)
	}
	for _, s := range []string{"/customer/email", "/tags/*", "overall", `0\.78\n`, `ev-01 +/category +wrong +"account" +"bug"`, `ev-03 +/subject +missing +"  cannot LOG in" +-`} {
		if !regexp.MustCompile(s).MatchString(table) {
			t.Errorf("table has no %q:\n%s", s, table)
		}
	}
	// the gate
	table, errs, code = runCLI(t, "", "eval", "--data-dir", dir, "--expected", labels, "--min-f1", "0.8")
	if code != exitNegative || !strings.Contains(errs, "overall f1 0.7805 is below --min-f1 0.8") || !strings.Contains(table, "overall") {
		t.Errorf("--min-f1 0.8 with f1 0.78: exit %d (want 1), stderr %q, stdout %q", code, errs, table)
	}
	// --schema of another schema scores only the id with no run
	out = mustCLI(t, "", "eval", "--data-dir", dir, "--expected", labels, "--json", "--schema", "invoice", "--no-save")
	var inv evalJSON
	if err := json.Unmarshal([]byte(out), &inv); err != nil || inv.Records != 1 || inv.NoResult != 1 || inv.Overall["missing"] != 1 {
		t.Errorf("--schema invoice: %+v, %v", inv, err)
	}

	// a broken labelled file: FILE:LINE, exit 2, nothing scored or stored
	broken := labelsFile(t, `{"id": "ev-00", "expected": {}}`, `{"id": "ev-01", "expected": "high"}`)
	out, errs, code = runCLI(t, "", "eval", "--data-dir", dir, "--expected", broken)
	if code != exitUsage || out != "" || !strings.Contains(errs, broken+`:2: job "ev-01": "expected" is a string, want a JSON object`) {
		t.Errorf("broken file: exit %d, stdout %q, stderr %q", code, out, errs)
	}

	// the history: the three evals saved (json, table, gate), not the others
	hist := jsonLines(t, mustCLI(t, "", "eval", "--data-dir", dir, "--history", "--json"))
	var ticket int
	for _, h := range hist {
		if h["schema"] == "ticket" {
			ticket++
			// both models' groups: correct 16, wrong 1, missing 5, extra 1
			if f1, _ := h["f1"].(float64); math.Abs(f1-0.8) > 1e-9 || h["records"] != 4.0 || h["digest"] == "" {
				t.Errorf("history line %v, want f1 0.8 over 4 records", h)
			}
		}
	}
	if ticket != 3 {
		t.Errorf("history: %d ticket lines, want 3 (the evals scored and saved): %v", ticket, hist)
	}
	if out := mustCLI(t, "", "eval", "--data-dir", dir, "--history", "--schema", "ticket"); strings.Count(out, "\n") != 4 || !strings.Contains(out, labels) {
		t.Errorf("history table:\n%s", out)
	}
	if _, errs, code := runCLI(t, "", "eval", "--data-dir", dir, "--expected", filepath.Join(dir, "nope.jsonl")); code != exitUsage || !strings.Contains(errs, "reading the labelled file") {
		t.Errorf("no such labelled file: exit %d, stderr %q", code, errs)
	}
	if _, errs, code := runCLI(t, "", "eval", "--data-dir", dir); code != exitUsage || !strings.Contains(errs, "--expected") {
		t.Errorf("no --expected: exit %d, stderr %q", code, errs)
	}
}

// TestEvalLoopOfASchemaAuthor is the README's loop: label jobs, run, eval;
// change the schema's description, run the same jobs again (submit
// --rerun), eval again: the eval scores each job's latest run, --by
// version tells the two versions apart, and the history keeps both.
func TestEvalLoopOfASchemaAuthor(t *testing.T) {
	t.Parallel()
	wantTestKeys(t)
	// before the change the model answers the person's name as the company;
	// after it, a server answering right stands in for the model reading the
	// better description
	srv := newPerJobServer(t, func(_, _ string) string { return `{"name": "Ana Silva", "company": "Ana Silva"}` })
	better := newPerJobServer(t, func(_, _ string) string { return `{"name": "Ana Silva", "company": "Acme"}` })
	dir, schemaDir := t.TempDir(), t.TempDir()
	write := func(desc string) {
		t.Helper()
		s := `{"type": "object", "required": ["name"], "properties": {"name": {"type": "string"}, "company": {"type": "string", "description": "` + desc + `"}}}`
		if err := os.WriteFile(filepath.Join(schemaDir, "contact.json"), []byte(s), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("company")
	var jobs, labels []string
	for i := range 3 {
		id := "c-" + string(rune('0'+i))
		jobs = append(jobs, `{"id": "`+id+`", "schema": "contact", "input": "JOB=`+id+` Hi, I'm Ana Silva from Acme."}`)
		labels = append(labels, `{"id": "`+id+`", "expected": {"name": "Ana Silva", "company": "Acme"}}`)
	}
	jobsFile := labelsFile(t, jobs...)
	labelled := labelsFile(t, labels...)
	mustCLI(t, "", "submit", "--data-dir", dir, "--schemas", schemaDir, jobsFile)
	run := func(url string) {
		t.Helper()
		if _, errs, code := runCLI(t, "", "run", "--data-dir", dir, "--until-idle", "--model", "openai:m", "--llm-url", url+"/v1"); code != exitOK {
			t.Fatalf("run: exit %d: %s", code, errs)
		}
	}
	run(srv.URL)
	if _, errs, code := runCLI(t, "", "eval", "--data-dir", dir, "--expected", labelled, "--min-f1", "0.9"); code != exitNegative {
		t.Errorf("first eval: exit %d, want 1 (f1 0.50 < 0.9): %s", code, errs)
	}

	write("the customer's employer, not the person")
	mustCLI(t, "", "submit", "--data-dir", dir, "--rerun", jobsFile)
	run(better.URL)
	out, errs, code := runCLI(t, "", "eval", "--data-dir", dir, "--expected", labelled, "--by", "version", "--min-f1", "0.9", "--json")
	if code != exitOK {
		t.Fatalf("second eval: exit %d: %s", code, errs)
	}
	var res struct {
		Records int `json:"records"`
		Exact   int `json:"exact"`
		By      map[string]json.RawMessage
	}
	if err := json.Unmarshal([]byte(out), &res); err != nil {
		t.Fatal(err)
	}
	if res.Records != 3 || res.Exact != 3 || len(res.By) != 1 {
		t.Errorf("second eval: %d records, %d exact, %d versions; want the 3 latest runs, all exact, one version", res.Records, res.Exact, len(res.By))
	}
	hist := jsonLines(t, mustCLI(t, "", "eval", "--data-dir", dir, "--history", "--json", "--schema", "contact"))
	if len(hist) != 2 || hist[0]["version"] == hist[1]["version"] || hist[0]["f1"] != 0.5 || hist[1]["f1"] != 1.0 {
		t.Errorf("history: %v, want two versions, f1 0.5 then 1", hist)
	}
	rep := mustCLI(t, "", "report", "--data-dir", dir)
	if !regexp.MustCompile(`EVALS[^\n]*\nSCHEMA[^\n]*\ncontact +\S+ +3 +3 +1\.00 +1\.00 +1\.00`).MatchString(rep) {
		t.Errorf("the report does not show the latest version's eval next to its funnel:\n%s", rep)
	}
}
