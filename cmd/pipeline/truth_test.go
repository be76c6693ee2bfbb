package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmpipeline/pipeline/llm/batchtest"
)

// truthSchemaFile grounds the vendor and holds the total to a rule.
const truthSchemaFile = `{"type":"object","required":["vendor","subtotal","tax","total"],"additionalProperties":false,
	"properties":{"vendor":{"type":"string","x-grounded":true},"subtotal":{"type":"number"},"tax":{"type":"number"},"total":{"type":"number"}},
	"x-rules":[{"rule":"self.total == self.subtotal + self.tax","message":"total must be subtotal + tax","path":"/total"}]}`

// truthText is every job's input after its JOB= line.
const truthText = "Rechnung von Müller & Söhne GmbH 🧾 — 請求書 Zwischensumme 100, MwSt 19, Gesamt 119."

const (
	truthGood     = `{"vendor":"Müller & Söhne GmbH","subtotal":100,"tax":19,"total":119}`
	truthMadeUp   = `{"vendor":"Mueller and Sons Ltd","subtotal":100,"tax":19,"total":119}`
	truthMadeUp2  = `{"vendor":"Muller Sons AG","subtotal":100,"tax":19,"total":119}`
	truthWrongSum = `{"vendor":"Müller & Söhne GmbH","subtotal":100,"tax":19,"total":100}`
	truthWrong2   = `{"vendor":"Müller & Söhne GmbH","subtotal":100,"tax":19,"total":120}`
)

// truthScript is each job's answers by attempt.
var truthScript = map[string][]string{
	"g-1": {truthMadeUp, truthGood},   // healed ungrounded value
	"r-1": {truthWrongSum, truthGood}, // healed rule
	"n-1": {truthMadeUp, truthMadeUp2}, "n-2": {truthMadeUp2, truthMadeUp}, "n-3": {truthMadeUp, truthMadeUp2},
	"m-1": {truthWrongSum, truthWrong2}, "m-2": {truthWrong2, truthWrongSum}, "m-3": {truthWrongSum, truthWrong2},
}

// truthAnswers answers chat completions in the OpenAI wire format from
// truthScript, by the job named in the prompt and the attempt (assistant
// turns so far + 1): as message content, or, when the request offers a
// tool (--response-format tool), as the forced tool call.
func truthAnswers() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req struct {
			Model    string `json:"model"`
			Messages []struct {
				Role    string `json:"role"`
				Content any    `json:"content"`
			} `json:"messages"`
			Tools []struct {
				Function struct {
					Name string `json:"name"`
				} `json:"function"`
			} `json:"tools"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			http.Error(w, `{"error":{"message":"bad json"}}`, http.StatusBadRequest)
			return
		}
		id, attempt := "", 1
		for _, m := range req.Messages {
			if m.Role == "assistant" {
				attempt++
			}
			if s, ok := m.Content.(string); ok && id == "" {
				if g := jobInPrompt.FindStringSubmatch(s); g != nil {
					id = g[1]
				}
			}
		}
		answers := truthScript[id]
		if len(answers) == 0 {
			http.Error(w, `{"error":{"message":"unknown job"}}`, http.StatusBadRequest)
			return
		}
		content := answers[min(attempt, len(answers))-1]
		msg := map[string]any{"role": "assistant", "content": content}
		if len(req.Tools) > 0 {
			msg = map[string]any{"role": "assistant", "content": nil, "refusal": nil,
				"tool_calls": []any{map[string]any{"id": fmt.Sprintf("call_%s_%d", id, attempt), "type": "function",
					"function": map[string]any{"name": req.Tools[0].Function.Name, "arguments": content}}}}
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-" + id, "object": "chat.completion", "created": 1700000000, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": msg}},
			"usage":   map[string]any{"prompt_tokens": 100, "completion_tokens": 40, "total_tokens": 140},
		})
	})
}

func truthJobs(t *testing.T, dir, schemaDir string, ids ...string) {
	t.Helper()
	var b strings.Builder
	for _, id := range ids {
		line, _ := json.Marshal(map[string]string{"id": id, "schema": "inv", "input": "JOB=" + id + "\n" + truthText})
		b.Write(line)
		b.WriteByte('\n')
	}
	mustCLI(t, b.String(), "submit", "--data-dir", dir, "--schemas", schemaDir, "-")
}

// TestRunHealsTruthFailures runs the truth checks end to end, through
// `pipeline run` against a provider speaking the OpenAI wire format, in
// three modes (message content, --response-format tool, --batch): an
// ungrounded vendor and a wrong total are healed, the result records where
// the vendor is in the input (code points, through accents, emoji and
// CJK); vendors never grounded and totals never right end as dead letters
// (exhausted), and the report clusters them by x-grounded and x-rules/0 at
// their paths and flags both impossible.
func TestRunHealsTruthFailures(t *testing.T) {
	t.Parallel()
	schemaDir := t.TempDir()
	if err := os.WriteFile(filepath.Join(schemaDir, "inv.json"), []byte(truthSchemaFile), 0o600); err != nil {
		t.Fatal(err)
	}
	wantTestKeys(t)
	for _, mode := range []string{"content", "tool", "batch"} {
		t.Run(mode, func(t *testing.T) {
			dir := t.TempDir()
			var url string
			if mode == "batch" {
				srv := batchtest.New(batchtest.Config{Answer: truthAnswers(), Key: "sk-test"})
				t.Cleanup(srv.Close)
				url = srv.URL
			} else {
				srv := httptest.NewServer(truthAnswers())
				t.Cleanup(srv.Close)
				url = srv.URL
			}
			args := []string{"run", "--data-dir", dir, "--schemas", schemaDir, "--until-idle", "--model", "openai:gpt-4o-mini",
				"--llm-url", url + "/v1", "--max-attempts", "2", "--concurrency", "2"}
			switch mode {
			case "tool":
				args = append(args, "--response-format", "tool")
			case "batch":
				args = append(args, "--batch", "--batch-wait", "50ms", "--batch-poll", "50ms")
			}
			// The healed jobs first, so that the never-met ones are the
			// report's latest runs.
			truthJobs(t, dir, schemaDir, "g-1", "r-1")
			mustCLI(t, "", args...)
			truthJobs(t, dir, schemaDir, "n-1", "n-2", "n-3", "m-1", "m-2", "m-3")
			mustCLI(t, "", args...)

			results := jsonLines(t, mustCLI(t, "", "results", "--data-dir", dir))
			if len(results) != 2 {
				t.Fatalf("%d results, want g-1 and r-1", len(results))
			}
			runes := []rune("JOB=g-1\n" + truthText)
			for _, r := range results {
				if r["attempts"].(float64) != 2 {
					t.Errorf("%v: %v attempts, want 2 (healed at the second)", r["job_id"], r["attempts"])
				}
				gr, _ := r["grounding"].([]any)
				if len(gr) != 1 {
					t.Fatalf("%v: grounding %v, want the vendor", r["job_id"], r["grounding"])
				}
				g := gr[0].(map[string]any)
				start, end := int(g["start"].(float64)), int(g["end"].(float64))
				if g["path"] != "/vendor" || g["match"] != "exact" || string(runes[start:end]) != "Müller & Söhne GmbH" {
					t.Errorf("%v: grounding %v slices %q", r["job_id"], g, string(runes[start:end]))
				}
			}
			var o struct {
				Trace []struct {
					Class       string `json:"class"`
					Diagnostics []struct {
						Path, Keyword, Message string
					} `json:"diagnostics"`
				} `json:"trace"`
			}
			if err := json.Unmarshal([]byte(mustCLI(t, "", "dlq", "show", "--data-dir", dir, "--json", "m-1")), &o); err != nil {
				t.Fatal(err)
			}
			if len(o.Trace) != 2 || o.Trace[0].Class != "schema" || len(o.Trace[0].Diagnostics) != 1 ||
				o.Trace[0].Diagnostics[0].Keyword != "x-rules/0" || o.Trace[0].Diagnostics[0].Path != "/total" {
				t.Errorf("m-1's trace %+v, want two attempts failing x-rules/0 at /total", o.Trace)
			}

			var rep struct {
				Clusters []struct {
					Path        string `json:"path"`
					Keyword     string `json:"keyword"`
					Jobs        int    `json:"jobs"`
					DeadLetters int    `json:"dead_letters"`
					Impossible  bool   `json:"impossible"`
					Suggestion  string `json:"suggestion"`
					Received    []struct {
						Value string `json:"value"`
					} `json:"received"`
				} `json:"clusters"`
			}
			if err := json.Unmarshal([]byte(mustCLI(t, "", "report", "--data-dir", dir, "--json")), &rep); err != nil {
				t.Fatal(err)
			}
			found := map[string]bool{}
			for _, c := range rep.Clusters {
				key := c.Path + " " + c.Keyword
				found[key] = true
				if c.Jobs != 4 || c.DeadLetters != 3 || !c.Impossible {
					t.Errorf("cluster %s: %d jobs, %d dead letters, impossible %v; want 4, 3, true", key, c.Jobs, c.DeadLetters, c.Impossible)
				}
				if key == "/vendor x-grounded" && (len(c.Received) == 0 || !strings.Contains(c.Received[0].Value, "Mue") && !strings.Contains(c.Received[0].Value, "Muller")) {
					t.Errorf("x-grounded cluster's received values %v, want the made-up vendors", c.Received)
				}
			}
			if !found["/vendor x-grounded"] || !found["/total x-rules/0"] || len(rep.Clusters) != 2 {
				t.Errorf("clusters %+v, want /vendor x-grounded and /total x-rules/0", rep.Clusters)
			}
		})
	}
}

// TestValidateTruthChecks: `pipeline validate` applies the rules, and the
// grounding when --input is given, with the diagnostics the model sees;
// a rule that does not compile is a schema that cannot be loaded (exit 3),
// naming the file, the rule and CEL's message.
func TestValidateTruthChecks(t *testing.T) {
	t.Parallel()
	schemaDir := t.TempDir()
	bad := `{"type":"object","x-rules":[{"rule":"self.total >> 1"}]}`
	for name, text := range map[string]string{"inv.json": truthSchemaFile, "bad.json": bad} {
		if err := os.WriteFile(filepath.Join(schemaDir, name), []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	input := filepath.Join(t.TempDir(), "input.txt")
	if err := os.WriteFile(input, []byte(truthText), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"validate", "--schemas", schemaDir, "--schema", "inv"}
	with := func(extra ...string) []string { return append(append([]string{}, base...), extra...) }

	out, _, code := runCLI(t, truthMadeUp, base...)
	if code != 0 || !strings.HasPrefix(out, "valid against inv@") {
		t.Errorf("without --input, grounding is skipped: exit %d\n%s", code, out)
	}
	out, _, code = runCLI(t, truthMadeUp, with("--input", input)...)
	if code != exitNegative || !strings.Contains(out, `- /vendor [x-grounded]: "Mueller and Sons Ltd" not found in the input`) {
		t.Errorf("ungrounded with --input: exit %d\n%s", code, out)
	}
	out, _, code = runCLI(t, truthWrongSum, base...)
	if code != exitNegative || !strings.Contains(out, "- /total [x-rules/0]: total must be subtotal + tax (rule: self.total == self.subtotal + self.tax), got 100") {
		t.Errorf("failing rule: exit %d\n%s", code, out)
	}
	out, _, code = runCLI(t, truthGood, with("--input", input, "--json")...)
	var v struct {
		Valid     bool `json:"valid"`
		Grounding []struct {
			Path       string
			Start, End int
			Match      string
		} `json:"grounding"`
	}
	if err := json.Unmarshal([]byte(out), &v); err != nil || code != 0 || !v.Valid || len(v.Grounding) != 1 {
		t.Fatalf("valid --json: exit %d, %v\n%s", code, err, out)
	}
	if g := v.Grounding[0]; string([]rune(truthText)[g.Start:g.End]) != "Müller & Söhne GmbH" || g.Match != "exact" {
		t.Errorf("grounding %+v", g)
	}
	_, errs, code := runCLI(t, "{}", "validate", "--schemas", schemaDir, "--schema", "bad")
	if code != exitRuntime || !strings.Contains(errs, "bad.json") || !strings.Contains(errs, `rule "self.total >> 1" does not compile`) ||
		!strings.Contains(errs, "Syntax error") {
		t.Errorf("a rule that does not compile: exit %d\n%s", code, errs)
	}
	lintDir := t.TempDir()
	typo := strings.Replace(truthSchemaFile, "self.subtotal + self.tax", "self.subtotl + self.tax", 1)
	typo = strings.Replace(typo, `"total":{"type":"number"}`, `"total":{"type":"number","x-grounded":true}`, 1)
	if err := os.WriteFile(filepath.Join(lintDir, "inv.json"), []byte(typo), 0o600); err != nil {
		t.Fatal(err)
	}
	out, _, code = runCLI(t, "", "schemas", "lint", "--schemas", lintDir)
	if code != exitNegative || !strings.Contains(out, "rule_unknown_property") || !strings.Contains(out, "self.subtotl") ||
		!strings.Contains(out, "grounded_non_string") {
		t.Errorf("schemas lint: exit %d\n%s", code, out)
	}
	_, errs, code = runCLI(t, "{}", with("--input", filepath.Join(schemaDir, "missing.txt"))...)
	if code != exitUsage || !strings.Contains(errs, "missing.txt") {
		t.Errorf("a missing --input: exit %d\n%s", code, errs)
	}
}
