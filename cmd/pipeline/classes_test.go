package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestFailureClasses drives one job per case through submit and run
// against an OpenAI-compatible server, and checks the calls the model got
// and the outcome recorded in the index (class, attempts, trace).
func TestFailureClasses(t *testing.T) {
	t.Parallel()
	valid := `{"subject": "Cannot log in", "priority": "high", "category": "account", "customer": {"name": "Ana", "email": "ana@example.com"}}`
	// Invalid in a new way each time (other output, other diagnostics), so
	// the loop makes progress and uses up its attempts.
	missing := func(i int) string {
		fields := []string{`"priority": "high"`, `"category": "account"`, `"customer": {"name": "Ana", "email": "ana@example.com"}`}
		fields = append(fields[:i%3:i%3], fields[i%3+1:]...)
		return fmt.Sprintf(`{"subject": "Try %d", %s}`, i, strings.Join(fields, ", "))
	}
	cases := []struct {
		name      string
		replies   []reply
		args      []string
		calls     int       // HTTP requests the server got
		class     string    // "" for success
		attempts  int       // model calls in the trace
		temps     []float64 // temperatures of the requests
		reasonHas string
	}{
		{name: "healed after a grammar failure", replies: []reply{{content: "I'm sorry, I can't do that."}, {content: valid}},
			calls: 2, attempts: 2, temps: []float64{0.7, 0.5}},
		{name: "exhausted", replies: []reply{{content: missing(1)}, {content: missing(2)}, {content: missing(3)}},
			args: []string{"--max-attempts", "3"}, calls: 3, class: "exhausted", attempts: 3, temps: []float64{0.7, 0.5, 0.3}, reasonHas: "still failing: /priority"},
		{name: "no progress stops early", replies: []reply{{content: missing(1)}},
			args: []string{"--max-attempts", "5"}, calls: 2, class: "no_progress", attempts: 2, temps: []float64{0.7, 0.5}},
		{name: "truncated is never retried", replies: []reply{{content: `{"subject": "Cannot log in", "priority": "hi`, finish: "length"}},
			args: []string{"--max-attempts", "3"}, calls: 1, class: "truncated", attempts: 1, temps: []float64{0.7}, reasonHas: ""},
		{name: "request error is not retried", replies: []reply{{status: http.StatusBadRequest, content: "The model `nope` does not exist"}},
			calls: 1, class: "request_error", attempts: 0, reasonHas: "does not exist"},
		{name: "transport on the last delivery", replies: []reply{{status: http.StatusServiceUnavailable, content: "overloaded"}},
			args: []string{"--transport-retries", "1", "--max-deliver", "1"}, calls: 2, class: "transport", attempts: 0},
	}
	// Not parallel: urfave/cli applies its shared help flag on every Run,
	// which races when two commands parse flags at once.
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			srv := newScriptedServer(t, tc.replies...)
			dir := t.TempDir()
			mustCLI(t, `{"id":"j1","schema":"ticket","input":"From: Ana <ana@example.com>: I cannot log in."}`+"\n", "submit", "--data-dir", dir, "-")
			args := append([]string{"run", "--data-dir", dir, "--until-idle", "--model", "openai:m", "--llm-url", srv.URL + "/v1"}, tc.args...)
			mustCLI(t, "", args...)

			if srv.calls() != tc.calls {
				t.Errorf("%d HTTP calls, want %d", srv.calls(), tc.calls)
			}
			for i, want := range tc.temps {
				if i < len(srv.requests) && srv.requests[i]["temperature"] != want {
					t.Errorf("request %d temperature %v, want %v", i+1, srv.requests[i]["temperature"], want)
				}
			}
			var o struct {
				Status   string `json:"status"`
				Class    string `json:"class"`
				Reason   string `json:"reason"`
				Hint     string `json:"hint"`
				Attempts int    `json:"attempts"`
				Trace    []struct {
					N           int     `json:"n"`
					Temperature float64 `json:"temperature"`
					Class       string  `json:"class"`
					Raw         string  `json:"raw"`
				} `json:"trace"`
			}
			if err := json.Unmarshal([]byte(mustCLI(t, "", "dlq", "show", "--data-dir", dir, "--json", "j1")), &o); err != nil {
				t.Fatal(err)
			}
			if o.Class != tc.class || o.Attempts != tc.attempts || len(o.Trace) != tc.attempts {
				t.Fatalf("outcome class %q attempts %d trace %d; want %q, %d", o.Class, o.Attempts, len(o.Trace), tc.class, tc.attempts)
			}
			for i, a := range o.Trace {
				if a.N != i+1 || a.Temperature != tc.temps[i] {
					t.Errorf("trace[%d] = n %d temperature %v, want n %d temperature %v", i, a.N, a.Temperature, i+1, tc.temps[i])
				}
			}
			if !strings.Contains(o.Reason, tc.reasonHas) {
				t.Errorf("reason %q lacks %q", o.Reason, tc.reasonHas)
			}
			if tc.class == "truncated" && !strings.Contains(o.Hint, "max-tokens") {
				t.Errorf("truncation hint %q should point at --max-tokens", o.Hint)
			}
			if tc.class == "" && (o.Status != "succeeded" || o.Trace[0].Class != "grammar") {
				t.Errorf("status %q, first attempt class %q; want succeeded after a grammar failure", o.Status, o.Trace[0].Class)
			}
		})
	}
}

// TestUnknownSchemaNeverCallsTheModel: a job whose schema the workers do
// not have is dead-lettered at once, without a model call.
func TestUnknownSchemaNeverCallsTheModel(t *testing.T) {
	t.Parallel()
	srv := newOpenAIServer(t, http.StatusOK, `{}`)
	dir := t.TempDir()
	mustCLI(t, `{"id":"j1","schema":"ticket","input":"text"}`+"\n", "submit", "--data-dir", dir, "-")
	other := t.TempDir()
	if err := os.WriteFile(filepath.Join(other, "invoice.json"), []byte(`{"type":"object"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	mustCLI(t, "", "run", "--data-dir", dir, "--until-idle", "--schemas", other, "--model", "openai:m", "--llm-url", srv.URL+"/v1")
	if srv.calls() != 0 {
		t.Errorf("%d model calls for a job of an unknown schema, want 0", srv.calls())
	}
	dead := jsonLines(t, mustCLI(t, "", "dlq", "list", "--data-dir", dir, "--json"))
	if len(dead) != 1 || dead[0]["class"] != "unknown_schema" {
		t.Errorf("dead letters %v, want one unknown_schema", dead)
	}
}
