package main

import (
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
)

const (
	validTicket   = `{"subject": "Cannot log in", "priority": "high", "category": "account", "customer": {"name": "Ana Lima", "email": "ana@example.com"}}`
	invalidTicket = `{"subject": "Cannot log in", "priority": "urgent!!"}`
)

// modelServer speaks the OpenAI chat completions wire format and answers
// per model name: a status (0: 200) and a content. It counts the calls per
// model and per job (the job's id is read from the prompt: JOB=<id>).
type modelServer struct {
	*httptest.Server
	answers map[string]reply
	mu      sync.Mutex
	byModel map[string]int
	byJob   map[string]int
}

var jobInPrompt = regexp.MustCompile(`JOB=([a-z0-9-]+)`)

func newModelServer(t *testing.T, answers map[string]reply) *modelServer {
	t.Helper()
	s := &modelServer{answers: answers, byModel: map[string]int{}, byJob: map[string]int{}}
	s.Server = httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		model, job, ok := chatRequest(r)
		if !ok {
			http.Error(w, "bad request", http.StatusBadRequest)
			return
		}
		s.mu.Lock()
		s.byModel[model]++
		s.byJob[job]++
		s.mu.Unlock()
		rep, ok := answers[model]
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("x-request-id", "req-"+job)
		if !ok {
			w.WriteHeader(http.StatusNotFound)
			_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": "The model `" + model + "` does not exist", "type": "invalid_request_error", "code": "model_not_found"}})
			return
		}
		if rep.status != 0 && rep.status != http.StatusOK {
			w.Header().Set("Retry-After", "0")
			w.WriteHeader(rep.status)
			_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": "The server is overloaded", "type": "server_error"}})
			return
		}
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-" + job, "object": "chat.completion", "model": model,
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
				"message": map[string]any{"role": "assistant", "content": rep.content}}},
			"usage": map[string]any{"prompt_tokens": 100, "completion_tokens": 40, "total_tokens": 140},
		})
	}))
	t.Cleanup(s.Close)
	return s
}

func (s *modelServer) counts() (byModel, byJob map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	byModel, byJob = map[string]int{}, map[string]int{}
	for k, v := range s.byModel {
		byModel[k] = v
	}
	for k, v := range s.byJob {
		byJob[k] = v
	}
	return byModel, byJob
}

// ticketJobs submits n ticket jobs whose input names their id.
func ticketJobs(t *testing.T, dir, prefix string, n int) []string {
	t.Helper()
	var b strings.Builder
	var ids []string
	for i := range n {
		id := fmt.Sprintf("%s-%02d", prefix, i)
		ids = append(ids, id)
		line, _ := json.Marshal(map[string]string{"id": id, "schema": "ticket", "input": "JOB=" + id + "\nFrom: Ana Lima <ana@example.com>\nI cannot log in."})
		b.Write(line)
		b.WriteByte('\n')
	}
	mustCLI(t, b.String(), "submit", "--data-dir", dir, "-")
	return ids
}

func pricesFile(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "prices.json")
	if err := os.WriteFile(p, []byte(body), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

func statsJSON(t *testing.T, dir string) map[string]any {
	t.Helper()
	var st map[string]any
	if err := json.Unmarshal([]byte(mustCLI(t, "", "stats", "--data-dir", dir, "--json")), &st); err != nil {
		t.Fatal(err)
	}
	return st
}

// TestBudgetStopsTheRunAndTheNextRunFinishes: 20 jobs, a budget for 5
// calls. The run stops with exit 5 and the jobs not started stay queued,
// neither dead-lettered nor paid; a second run without a budget finishes
// them, and the model was called once per job.
func TestBudgetStopsTheRunAndTheNextRunFinishes(t *testing.T) {
	t.Parallel()
	wantTestKeys(t)
	srv := newModelServer(t, map[string]reply{"priced": {content: validTicket}})
	// 140 tokens a call at $1000 per million: $0.14 a call.
	prices := pricesFile(t, `{"openai:priced": {"input_per_mtok": 1000, "output_per_mtok": 1000}}`)
	dir := t.TempDir()
	ids := ticketJobs(t, dir, "bud", 20)
	args := []string{"run", "--data-dir", dir, "--until-idle", "--model", "openai:priced", "--llm-url", srv.URL + "/v1",
		"--prices", prices, "--concurrency", "1"}

	_, errs, code := runCLI(t, "", append(args, "--budget-usd", "0.7")...)
	if code != exitBudget {
		t.Fatalf("run with a budget: exit %d, want %d\n%s", code, exitBudget, errs)
	}
	if !strings.Contains(errs, "budget reached: $0.7 of $0.7 spent") {
		t.Errorf("stderr does not say the budget was reached:\n%s", errs)
	}
	st := statsJSON(t, dir)
	done := int(st["jobs"].(float64))
	if done < 5 || done >= len(ids) || st["dead_lettered"].(float64) != 0 {
		t.Fatalf("after the budget: %v jobs stored (%v dead), want at least 5 and fewer than %d, none dead", done, st["dead_lettered"], len(ids))
	}
	if c := st["cost_usd"].(float64); math.Abs(c-0.14*float64(done)) > 1e-9 {
		t.Errorf("stats cost_usd %v, want %v for %d calls", c, 0.14*float64(done), done)
	}
	t.Logf("the budget run stored %d of %d jobs", done, len(ids))
	_, byJob := srv.counts()
	if len(byJob) != done {
		t.Errorf("%d jobs called the model, %d stored: a job was paid and not stored", len(byJob), done)
	}

	mustCLI(t, "", args...)
	st = statsJSON(t, dir)
	if st["succeeded"].(float64) != float64(len(ids)) {
		t.Fatalf("after the second run: %v succeeded, want %d", st["succeeded"], len(ids))
	}
	if c := st["cost_usd"].(float64); math.Abs(c-0.14*20) > 1e-9 {
		t.Errorf("stats cost_usd %v, want 2.8: every job paid once", c)
	}
	if bs := st["by_schema"].(map[string]any)["ticket"].(map[string]any); math.Abs(bs["cost_usd"].(float64)-2.8) > 1e-9 {
		t.Errorf("by_schema.ticket.cost_usd %v, want 2.8", bs["cost_usd"])
	}
	_, byJob = srv.counts()
	for _, id := range ids {
		if byJob[id] != 1 {
			t.Errorf("job %s: %d model calls, want 1 (paid once)", id, byJob[id])
		}
	}
	if out := mustCLI(t, "", "stats", "--data-dir", dir); !regexp.MustCompile(`cost_usd +\$2\.8\n`).MatchString(out) {
		t.Errorf("stats does not print the cost line:\n%s", out)
	}
}

// results reads the stored results with their traces.
func results(t *testing.T, dir string) []map[string]any {
	t.Helper()
	return jsonLines(t, mustCLI(t, "", "results", "--data-dir", dir, "--json"))
}

func traceModels(o map[string]any) string {
	var ms []string
	for _, a := range o["trace"].([]any) {
		ms = append(ms, fmt.Sprint(a.(map[string]any)["model"]))
	}
	return strings.Join(ms, ",")
}

// TestFallbackOnExhaustion: the primary never satisfies the schema; the
// fallback continues the conversation and answers right. Each attempt
// records its model and its cost, the result the model of its answer.
func TestFallbackOnExhaustion(t *testing.T) {
	t.Parallel()
	wantTestKeys(t)
	srv := newModelServer(t, map[string]reply{"primary": {content: invalidTicket}, "backup": {content: validTicket}})
	prices := pricesFile(t, `{"openai:primary": {"input_per_mtok": 1000, "output_per_mtok": 1000}, "openai:backup": {"input_per_mtok": 2000, "output_per_mtok": 2000}}`)
	dir := t.TempDir()
	ticketJobs(t, dir, "fb", 3)
	_, errs, code := runCLI(t, "", "run", "--data-dir", dir, "--until-idle", "--model", "openai:primary", "--llm-url", srv.URL+"/v1",
		"--prices", prices, "--max-attempts", "2", "--fallback-model", "openai:backup")
	if code != 0 {
		t.Fatalf("run: exit %d\n%s", code, errs)
	}
	res := results(t, dir)
	if len(res) != 3 {
		t.Fatalf("%d results, want 3", len(res))
	}
	for _, o := range res {
		// primary: 2 attempts (the second repeats the first: no progress), then the fallback
		if got := traceModels(o); got != "openai:primary,openai:primary,openai:backup" {
			t.Errorf("job %v: attempt models %s, want primary twice then backup", o["job_id"], got)
		}
		if o["model"] != "openai:backup" {
			t.Errorf("job %v: model %v, want the fallback's", o["job_id"], o["model"])
		}
		if c := o["cost_usd"].(float64); math.Abs(c-(0.14+0.14+0.28)) > 1e-9 {
			t.Errorf("job %v: cost %v, want 0.56 (every attempt, failed ones too)", o["job_id"], c)
		}
		// the fallback got the conversation: task, failed output, feedback
		tr := o["trace"].([]any)
		if n := tr[2].(map[string]any)["n"]; n != 3.0 {
			t.Errorf("job %v: the fallback's attempt is numbered %v, want 3", o["job_id"], n)
		}
	}
	byModel, _ := srv.counts()
	if byModel["primary"] != 6 || byModel["backup"] != 3 {
		t.Errorf("calls by model %v, want primary 6, backup 3", byModel)
	}
	var rep map[string]any
	if err := json.Unmarshal([]byte(mustCLI(t, "", "report", "--data-dir", dir, "--json")), &rep); err != nil {
		t.Fatal(err)
	}
	fu := rep["funnel"].(map[string]any)["ticket"].(map[string]any)
	if fu["healed_by_fallback"] != 3.0 {
		t.Errorf("report funnel healed_by_fallback %v, want 3", fu["healed_by_fallback"])
	}
	if c := fu["cost_usd"].(float64); math.Abs(c-3*0.56) > 1e-9 {
		t.Errorf("report funnel cost_usd %v, want 1.68", c)
	}
	if c := fu["heal_cost_share"].(float64); math.Abs(c-(0.42/0.56)) > 1e-9 {
		t.Errorf("report funnel heal_cost_share %v, want 0.75", c)
	}
	// per model: the primary answered no job last
	if err := json.Unmarshal([]byte(mustCLI(t, "", "report", "--data-dir", dir, "--json", "--model", "openai:primary")), &rep); err != nil {
		t.Fatal(err)
	}
	if n := len(rep["funnel"].(map[string]any)); n != 0 {
		t.Errorf("report --model openai:primary: %d funnels, want none (every answer was the fallback's)", n)
	}
	if out := mustCLI(t, "", "report", "--data-dir", dir); !strings.Contains(out, "COST AND MODELS") || !strings.Contains(out, "openai:backup 3 (3 ok, 3 by fallback)") {
		t.Errorf("the table report has no cost and models section:\n%s", out)
	}
}

// TestFallbackWhenThePrimaryBreakerIsOpen: the primary answers 503 until
// its breaker opens; from then on its jobs go to the fallback at once
// instead of waiting for the cool-down.
func TestFallbackWhenThePrimaryBreakerIsOpen(t *testing.T) {
	t.Parallel()
	wantTestKeys(t)
	srv := newModelServer(t, map[string]reply{"primary": {status: http.StatusServiceUnavailable}, "backup": {content: validTicket}})
	dir := t.TempDir()
	ticketJobs(t, dir, "br", 8)
	_, errs, code := runCLI(t, "", "run", "--data-dir", dir, "--until-idle", "--model", "openai:primary", "--llm-url", srv.URL+"/v1",
		"--fallback-model", "openai:backup", "--transport-retries", "0", "--breaker-threshold", "2", "--breaker-cooldown", "1h",
		"--concurrency", "1")
	if code != 0 {
		t.Fatalf("run: exit %d\n%s", code, errs)
	}
	res := results(t, dir)
	if len(res) != 8 {
		t.Fatalf("%d results, want 8", len(res))
	}
	for _, o := range res {
		if o["model"] != "openai:backup" || traceModels(o) != "openai:backup" {
			t.Errorf("job %v: model %v, attempts %s; want the fallback's only", o["job_id"], o["model"], traceModels(o))
		}
	}
	byModel, _ := srv.counts()
	if byModel["primary"] != 2 || byModel["backup"] != 8 {
		t.Errorf("calls by model %v, want primary 2 (then its breaker is open), backup 8", byModel)
	}
}

// TestCostFromAnthropicUsageWithCacheReads: an Anthropic Messages server
// reports cache reads; the built-in price of claude-haiku-4-5 bills them at
// the cached rate, and the run's cost is that of the reported usage.
func TestCostFromAnthropicUsageWithCacheReads(t *testing.T) {
	t.Parallel()
	wantTestKeys(t)
	var mu sync.Mutex
	var headers []http.Header
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		headers = append(headers, r.Header.Clone())
		mu.Unlock()
		if r.URL.Path != "/v1/messages" || r.Header.Get("x-api-key") != "sk-ant-test" {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = io.WriteString(w, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("request-id", "req_01")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": "msg_01", "type": "message", "role": "assistant", "model": "claude-haiku-4-5",
			"content":     []any{map[string]any{"type": "text", "text": validTicket}},
			"stop_reason": "end_turn",
			"usage":       map[string]any{"input_tokens": 100, "cache_read_input_tokens": 900, "cache_creation_input_tokens": 0, "output_tokens": 50},
		})
	}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	ticketJobs(t, dir, "an", 2)
	_, errs, code := runCLI(t, "", "run", "--data-dir", dir, "--until-idle", "--model", "anthropic:claude-haiku-4-5", "--llm-url", srv.URL)
	if code != 0 {
		t.Fatalf("run: exit %d\n%s", code, errs)
	}
	if strings.Contains(errs, "no price for this model") {
		t.Errorf("claude-haiku-4-5 is in the built-in table, yet run says it has no price:\n%s", errs)
	}
	// 100 uncached input at $1, 900 cache reads at $0.10, 50 output at $5, per million
	const want = (100*1.0 + 900*0.1 + 50*5.0) / 1e6
	for _, o := range results(t, dir) {
		if c, _ := o["cost_usd"].(float64); math.Abs(c-want) > 1e-12 {
			t.Errorf("job %v: cost %v, want %v", o["job_id"], o["cost_usd"], want)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	if len(headers) != 2 || headers[0].Get("anthropic-version") == "" {
		t.Errorf("%d calls, first with anthropic-version %q; want 2 calls with the header", len(headers), headers[0].Get("anthropic-version"))
	}
}

// TestUnpricedModelSaysSoOnce: a model priced nowhere has its tokens
// counted and no cost; run says so once.
func TestUnpricedModelSaysSoOnce(t *testing.T) {
	t.Parallel()
	wantTestKeys(t)
	srv := newModelServer(t, map[string]reply{"local-model": {content: validTicket}})
	dir := t.TempDir()
	ticketJobs(t, dir, "up", 3)
	_, errs, code := runCLI(t, "", "run", "--data-dir", dir, "--until-idle", "--model", "openai:local-model", "--llm-url", srv.URL+"/v1")
	if code != 0 {
		t.Fatalf("run: exit %d\n%s", code, errs)
	}
	if n := strings.Count(errs, "no price for this model"); n != 1 {
		t.Errorf("the unknown price is said %d times, want once:\n%s", n, errs)
	}
	for _, o := range results(t, dir) {
		if _, ok := o["cost_usd"]; ok {
			t.Errorf("job %v has a cost_usd though its model is priced nowhere", o["job_id"])
		}
	}
	st := statsJSON(t, dir)
	if st["priced_jobs"] != 0.0 || st["tokens"].(map[string]any)["prompt"] != 300.0 {
		t.Errorf("stats: priced_jobs %v, prompt tokens %v; want 0 and 300 (tokens still counted)", st["priced_jobs"], st["tokens"].(map[string]any)["prompt"])
	}
	if out := mustCLI(t, "", "stats", "--data-dir", dir); strings.Contains(out, "cost_usd") {
		t.Errorf("stats prints a cost line with no price known:\n%s", out)
	}
}

// writeTicketAnswer writes an OpenAI chat completion of model m whose
// content is the valid ticket, with a usage of 100 prompt and 40
// completion tokens (the answer every test provider of a ticket gives).
func writeTicketAnswer(w http.ResponseWriter) {
	_ = json.NewEncoder(w).Encode(map[string]any{"id": "chatcmpl-1", "object": "chat.completion", "created": 1, "model": "m",
		"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "logprobs": nil,
			"message": map[string]any{"role": "assistant", "content": validTicket, "refusal": nil}}},
		"usage": map[string]any{"prompt_tokens": 100, "completion_tokens": 40, "total_tokens": 140}})
}

// chatRequest reads a chat completions request as the OpenAI spec shapes
// it (CreateChatCompletionRequest): its model and the job id its prompt
// names (JOB=<id>); ok is false for another path or a body that is not one.
func chatRequest(r *http.Request) (model, job string, ok bool) {
	body, _ := io.ReadAll(r.Body)
	var req struct {
		Model    string `json:"model"`
		Messages []struct {
			Content string `json:"content"`
		} `json:"messages"`
	}
	if err := json.Unmarshal(body, &req); err != nil || r.URL.Path != "/v1/chat/completions" {
		return "", "", false
	}
	for _, m := range req.Messages {
		if g := jobInPrompt.FindStringSubmatch(m.Content); g != nil {
			return req.Model, g[1], true
		}
	}
	return req.Model, "", true
}
