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
	"sync"
	"testing"
)

// filesTruthScript is each files job's answers by attempt: the vendor is
// read from the receipt (nowhere in the job's text), the first total of
// f-1 breaks the rule.
var filesTruthScript = map[string][]string{
	"f-1": {`{"vendor":"Globex Receipts","subtotal":100,"tax":19,"total":100}`, `{"vendor":"Globex Receipts","subtotal":100,"tax":19,"total":119}`},
	"t-1": {`{"vendor":"Globex Receipts","subtotal":100,"tax":19,"total":119}`},
}

// TestTruthChecksOnFilesJobs: a job with files is grounded in nothing the
// pipeline can read (the file's text is the model's to read), so its
// x-grounded values are not checked and its outcome records no grounding;
// its x-rules still are, and healed. A files-only job (no input) and a job
// with files and some text whose vendor is read from the file both end as
// results, through `pipeline run` against a provider speaking the OpenAI
// wire format (the receipt goes as an image part).
func TestTruthChecksOnFilesJobs(t *testing.T) {
	t.Parallel()
	wantTestKeys(t)
	dataDir, dir, schemaDir := t.TempDir(), t.TempDir(), t.TempDir()
	if err := os.WriteFile(filepath.Join(schemaDir, "inv.json"), []byte(truthSchemaFile), 0o600); err != nil {
		t.Fatal(err)
	}
	writeFile(t, dir, "receipt.png", receiptPNG(t))
	writeFile(t, dir, "jobs.jsonl", []byte(
		`{"id":"f-1","schema":"inv","instructions":"JOB=f-1","files":["receipt.png"]}`+"\n"+
			`{"id":"t-1","schema":"inv","input":"JOB=t-1 scanned at the front desk","files":["receipt.png"]}`+"\n"))

	var mu sync.Mutex
	calls := map[string]int{}
	images := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req struct {
			Model    string `json:"model"`
			Messages []struct {
				Role string `json:"role"`
			} `json:"messages"`
		}
		g := jobInPrompt.FindStringSubmatch(string(body))
		if err := json.Unmarshal(body, &req); err != nil || g == nil || filesTruthScript[g[1]] == nil {
			http.Error(w, `{"error":{"message":"bad request"}}`, http.StatusBadRequest)
			return
		}
		attempt := 1
		for _, m := range req.Messages {
			if m.Role == "assistant" {
				attempt++
			}
		}
		answers := filesTruthScript[g[1]]
		mu.Lock()
		calls[g[1]]++
		if strings.Contains(string(body), `"image_url"`) && strings.Contains(string(body), "data:image/png;base64,") {
			images++
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": fmt.Sprintf("chatcmpl-%s-%d", g[1], attempt), "object": "chat.completion", "created": 1700000000, "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
				"message": map[string]any{"role": "assistant", "content": answers[min(attempt, len(answers))-1]}}},
			"usage": map[string]any{"prompt_tokens": 100, "completion_tokens": 40, "total_tokens": 140},
		})
	}))
	t.Cleanup(srv.Close)

	mustCLI(t, "", "submit", "--data-dir", dataDir, "--schemas", schemaDir, filepath.Join(dir, "jobs.jsonl"))
	mustCLI(t, "", "run", "--data-dir", dataDir, "--schemas", schemaDir, "--until-idle", "--model", "openai:gpt-4o-mini",
		"--llm-url", srv.URL+"/v1", "--max-attempts", "3", "--concurrency", "2")

	if dead := jsonLines(t, mustCLI(t, "", "dlq", "list", "--data-dir", dataDir, "--json")); len(dead) != 0 {
		t.Fatalf("dead letters %v: a files job's vendor was grounded in its text", dead)
	}
	res := results(t, dataDir)
	if len(res) != 2 {
		t.Fatalf("%d results, want f-1 and t-1", len(res))
	}
	want := map[string]float64{"f-1": 2, "t-1": 1} // f-1's rule healed at the second attempt
	for _, r := range res {
		id := r["job_id"].(string)
		if r["attempts"].(float64) != want[id] {
			t.Errorf("%s: %v attempts, want %v", id, r["attempts"], want[id])
		}
		if _, ok := r["grounding"]; ok {
			t.Errorf("%s: grounding %v recorded for a job with files", id, r["grounding"])
		}
		if v := r["data"].(map[string]any)["vendor"]; v != "Globex Receipts" {
			t.Errorf("%s: vendor %v", id, v)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if calls["f-1"] != 2 || calls["t-1"] != 1 || images != 3 {
		t.Errorf("calls %v with %d image parts, want f-1 twice, t-1 once, the receipt on each", calls, images)
	}
}
