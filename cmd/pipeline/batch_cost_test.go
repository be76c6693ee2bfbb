package main

import (
	"encoding/json"
	"io"
	"math"
	"net/http"
	"strings"
	"testing"

	"github.com/llmpipeline/pipeline/llm/batchtest"
)

// ticketAnswers answers the chat completions of ticketJobs: a valid
// ticket for a job whose id ends in an even digit, an invalid one (healed,
// then dead-lettered) for the others; 100 prompt and 40 completion tokens
// a call.
func ticketAnswers() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req struct {
			Model    string `json:"model"`
			Messages []struct {
				Content string `json:"content"`
			} `json:"messages"`
		}
		if err := json.Unmarshal(body, &req); err != nil {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		job := ""
		for _, m := range req.Messages {
			if g := jobInPrompt.FindStringSubmatch(m.Content); g != nil {
				job = g[1]
				break
			}
		}
		content := validTicket
		if job == "" || strings.ContainsAny(job[len(job)-1:], "13579") {
			content = invalidTicket
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-" + job, "object": "chat.completion", "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
				"message": map[string]any{"role": "assistant", "content": content}}},
			"usage": map[string]any{"prompt_tokens": 100, "completion_tokens": 40, "total_tokens": 140},
		})
	})
}

// TestBatchRunCostsHalfWithTheSameSuccessRate runs the same 20 jobs (half
// valid at once, half healed and then dead-lettered) through `pipeline
// run` without and with --batch against one test provider, priced by the
// built-in table (openai:gpt-4o-mini, batch discount 0.5): the batch run
// makes the same calls, has the same success rate and costs half; stats
// shows its attempts and their cost apart.
func TestBatchRunCostsHalfWithTheSameSuccessRate(t *testing.T) {
	t.Parallel()
	wantTestKeys(t)
	srv := batchtest.New(batchtest.Config{Answer: ticketAnswers(), Key: "sk-test"})
	t.Cleanup(srv.Close)
	var batchDir string
	run := func(batch bool) map[string]any {
		dir := t.TempDir()
		ticketJobs(t, dir, "cmp", 20)
		args := []string{"run", "--data-dir", dir, "--until-idle", "--model", "openai:gpt-4o-mini", "--llm-url", srv.URL + "/v1",
			"--max-attempts", "2", "--concurrency", "4"}
		if batch {
			args = append(args, "--batch", "--batch-wait", "50ms", "--batch-poll", "50ms")
		}
		mustCLI(t, "", args...)
		if batch {
			batchDir = dir
		}
		return statsJSON(t, dir)
	}
	syncSt, batchSt := run(false), run(true)
	if n := srv.Creates(); n == 0 {
		t.Fatal("the --batch run created no batch")
	}
	rate := func(st map[string]any) float64 { return st["succeeded"].(float64) / st["jobs"].(float64) }
	syncCost, batchCost := syncSt["cost_usd"].(float64), batchSt["cost_usd"].(float64)
	t.Logf("without --batch: %v jobs, success rate %.0f%%, cost $%.6f", syncSt["jobs"], 100*rate(syncSt), syncCost)
	t.Logf("with --batch:    %v jobs, success rate %.0f%%, cost $%.6f (%d batches)", batchSt["jobs"], 100*rate(batchSt), batchCost, srv.Creates())
	if syncSt["jobs"].(float64) != 20 || batchSt["jobs"].(float64) != 20 {
		t.Fatalf("jobs stored: %v without --batch, %v with, want 20 each", syncSt["jobs"], batchSt["jobs"])
	}
	if rate(syncSt) != rate(batchSt) || rate(syncSt) != 0.5 {
		t.Errorf("success rate %v without --batch, %v with, want 0.5 each", rate(syncSt), rate(batchSt))
	}
	// 10 jobs of one call and 10 of two, 140 tokens a call at $0.15 and
	// $0.60 per million: $0.000039 a call.
	if want := 30 * 39e-6; math.Abs(syncCost-want) > 1e-12 {
		t.Errorf("cost without --batch $%v, want $%v", syncCost, want)
	}
	if math.Abs(batchCost-syncCost/2) > 1e-12 {
		t.Errorf("cost with --batch $%v, want half of $%v", batchCost, syncCost)
	}
	sb := syncSt["batch"].(map[string]any)
	bb := batchSt["batch"].(map[string]any)
	if sb["attempts"].(float64) != 0 {
		t.Errorf("the run without --batch counts %v batch attempts", sb["attempts"])
	}
	if bb["attempts"].(float64) != 30 || math.Abs(bb["cost_usd"].(float64)-batchCost) > 1e-12 {
		t.Errorf("stats batch %v, want 30 attempts costing $%v", bb, batchCost)
	}
	var rep struct {
		Totals struct {
			Batch struct {
				Attempts int     `json:"attempts"`
				CostUSD  float64 `json:"cost_usd"`
			} `json:"batch"`
		} `json:"totals"`
	}
	if err := json.Unmarshal([]byte(mustCLI(t, "", "report", "--data-dir", batchDir, "--json")), &rep); err != nil {
		t.Fatal(err)
	}
	if rep.Totals.Batch.Attempts != 30 || math.Abs(rep.Totals.Batch.CostUSD-batchCost) > 1e-12 {
		t.Errorf("report totals.batch %+v, want 30 attempts costing $%v", rep.Totals.Batch, batchCost)
	}
	if out := mustCLI(t, "", "stats", "--data-dir", batchDir); !strings.Contains(out, "batch_attempts") {
		t.Errorf("stats does not print the batch line:\n%s", out)
	}
}
