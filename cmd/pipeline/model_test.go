package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/llmpipeline/pipeline/llm/batchtest"
)

// openAIServer answers chat completions in the OpenAI wire format with the
// given contents in turn (the last one repeats), and records the requests.
type openAIServer struct {
	*httptest.Server
	mu       sync.Mutex
	replies  []reply
	requests []map[string]any
	auth     []string
}

// reply is one scripted answer: an HTTP status (0 means 200), the content
// and the finish reason (default "stop").
type reply struct {
	status  int
	content string
	finish  string
}

func newOpenAIServer(t *testing.T, status int, answers ...string) *openAIServer {
	t.Helper()
	var rs []reply
	for _, a := range answers {
		rs = append(rs, reply{status: status, content: a})
	}
	if len(rs) == 0 {
		rs = []reply{{status: status}}
	}
	return newScriptedServer(t, rs...)
}

// newScriptedServer answers with the replies in turn; the last one repeats.
func newScriptedServer(t *testing.T, replies ...reply) *openAIServer {
	t.Helper()
	s := &openAIServer{replies: replies}
	s.Server = httptest.NewServer(http.HandlerFunc(s.handle))
	t.Cleanup(s.Close)
	return s
}

func (s *openAIServer) handle(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	var req map[string]any
	_ = json.Unmarshal(body, &req)
	s.mu.Lock()
	s.requests = append(s.requests, req)
	s.auth = append(s.auth, r.Header.Get("Authorization"))
	n := len(s.requests)
	s.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	if r.URL.Path != "/v1/chat/completions" {
		w.WriteHeader(http.StatusNotFound)
		return
	}
	rep := s.replies[min(n, len(s.replies))-1]
	if rep.status != 0 && rep.status != http.StatusOK {
		msg := "Incorrect API key provided"
		if rep.content != "" {
			msg = rep.content
		}
		w.WriteHeader(rep.status)
		_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error"}})
		return
	}
	finish := rep.finish
	if finish == "" {
		finish = "stop"
	}
	_ = json.NewEncoder(w).Encode(map[string]any{
		"id": "chatcmpl-1", "object": "chat.completion", "model": req["model"],
		"choices": []any{map[string]any{"index": 0, "finish_reason": finish,
			"message": map[string]any{"role": "assistant", "content": rep.content}}},
		"usage": map[string]any{"prompt_tokens": 100, "completion_tokens": 40, "total_tokens": 140},
	})
}

func (s *openAIServer) calls() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.requests)
}

// TestRunAgainstOpenAICompatibleServer runs one job through `pipeline run
// --model openai:...` against a local server: the first answer is fenced and
// misses a required field, the second is right. The second request must
// carry the task, the previous output and the failing path.
func TestRunAgainstOpenAICompatibleServer(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-test-secret-123")
	first := "Sure! Here it is:\n```json\n{\"subject\": \"Cannot log in\", \"priority\": \"high\", \"category\": \"account\",}\n```"
	second := `{"subject": "Cannot log in", "priority": "high", "category": "account", "customer": {"name": "Ana Lima", "email": "ana@example.com"}}`
	srv := newOpenAIServer(t, http.StatusOK, first, second)
	dir := t.TempDir()

	job := `{"id":"t-1","schema":"ticket","input":"From: Ana Lima <ana@example.com>\nI cannot log in."}` + "\n"
	mustCLI(t, job, "submit", "--data-dir", dir, "-")
	_, errs, code := runCLI(t, "", "run", "--data-dir", dir, "--until-idle", "--model", "openai:test-model",
		"--llm-url", srv.URL+"/v1", "--log-level", "debug")
	if code != 0 {
		t.Fatalf("run: exit %d\n%s", code, errs)
	}
	if strings.Contains(errs, "sk-test-secret-123") {
		t.Errorf("the API key reached the logs")
	}
	if srv.calls() != 2 {
		t.Fatalf("%d model calls, want 2", srv.calls())
	}
	if srv.auth[0] != "Bearer sk-test-secret-123" {
		t.Errorf("Authorization %q, want the bearer key", srv.auth[0])
	}
	req := srv.requests[1]
	if req["model"] != "test-model" {
		t.Errorf("model %v, want test-model", req["model"])
	}
	if t1, t2 := srv.requests[0]["temperature"], req["temperature"]; t1 != 0.7 || t2 != 0.5 {
		t.Errorf("temperatures %v, %v; want 0.7, 0.5", t1, t2)
	}
	msgs := req["messages"].([]any)
	var roles []string
	var all strings.Builder
	for _, m := range msgs {
		mm := m.(map[string]any)
		roles = append(roles, mm["role"].(string))
		all.WriteString(mm["content"].(string))
	}
	if got := strings.Join(roles, ","); got != "system,user,assistant,user" {
		t.Errorf("second request roles %s, want system,user,assistant,user", got)
	}
	for _, want := range []string{"I cannot log in.", `"priority": "high"`, "/customer"} {
		if !strings.Contains(all.String(), want) {
			t.Errorf("second request lacks %q", want)
		}
	}

	results := jsonLines(t, mustCLI(t, "", "results", "--data-dir", dir))
	if len(results) != 1 || results[0]["attempts"].(float64) != 2 {
		t.Fatalf("results %v: want one result after 2 attempts", results)
	}
	data := results[0]["data"].(map[string]any)
	if data["customer"].(map[string]any)["email"] != "ana@example.com" {
		t.Errorf("result data %v", data)
	}
}

// TestRunStopsOnAuthFailure: a 401 stops the worker with exit code 4, one
// clear error naming the provider and the key's variable, and no job is
// dead-lettered for it.
func TestRunStopsOnAuthFailure(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-wrong-key-456")
	srv := newOpenAIServer(t, http.StatusUnauthorized)
	dir := t.TempDir()
	file, _ := jobsFile(t, 5)
	mustCLI(t, "", "submit", "--data-dir", dir, file)
	_, errs, code := runCLI(t, "", "run", "--data-dir", dir, "--until-idle", "--model", "openai:m", "--llm-url", srv.URL+"/v1", "--concurrency", "1")
	if code != exitAuth {
		t.Fatalf("exit %d, want %d\n%s", code, exitAuth, errs)
	}
	for _, want := range []string{"openai", "auth", "OPENAI_API_KEY"} {
		if !strings.Contains(errs, want) {
			t.Errorf("error %q lacks %q", errs, want)
		}
	}
	if strings.Contains(errs, "sk-wrong-key-456") {
		t.Errorf("the API key reached stderr")
	}
	if srv.calls() != 1 {
		t.Errorf("%d calls after a 401, want 1 (no retry, stop taking jobs)", srv.calls())
	}
	if dead := jsonLines(t, mustCLI(t, "", "dlq", "list", "--data-dir", dir, "--json")); len(dead) != 0 {
		t.Errorf("%d jobs dead-lettered for an auth failure, want 0", len(dead))
	}
}

// TestRunStopsOnNotFound: a model name the provider does not know (404
// model_not_found) and a base URL without its /v1 (404 on the path) stop
// the worker with exit 3 and an error naming the URL called; no job is
// dead-lettered, and the next run, with a fallback model or the right URL,
// answers every job.
func TestRunStopsOnNotFound(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-test-not-found")
	srv := newModelServer(t, map[string]reply{"backup": {content: validTicket}})
	dir := t.TempDir()
	ids := ticketJobs(t, dir, "nf", 6)
	_, errs, code := runCLI(t, "", "run", "--data-dir", dir, "--until-idle", "--model", "openai:gpt-9", "--llm-url", srv.URL+"/v1", "--concurrency", "1")
	if code != exitRuntime {
		t.Fatalf("unknown model: exit %d, want %d\n%s", code, exitRuntime, errs)
	}
	for _, want := range []string{"not_found (HTTP 404)", "The model `gpt-9` does not exist", "POST " + srv.URL + "/v1/chat/completions", "none dead-lettered", "--llm-url"} {
		if !strings.Contains(errs, want) {
			t.Errorf("stderr lacks %q:\n%s", want, errs)
		}
	}
	if byModel, _ := srv.counts(); byModel["gpt-9"] != 1 {
		t.Errorf("%d calls to the unknown model, want 1 (stop taking jobs)", byModel["gpt-9"])
	}
	if dead := jsonLines(t, mustCLI(t, "", "dlq", "list", "--data-dir", dir, "--json")); len(dead) != 0 {
		t.Errorf("%d jobs dead-lettered for an unknown model, want 0", len(dead))
	}
	if res := results(t, dir); len(res) != 0 {
		t.Errorf("%d results after the stop, want 0", len(res))
	}
	// With a fallback, the unknown model's jobs go to it at once.
	_, errs, code = runCLI(t, "", "run", "--data-dir", dir, "--until-idle", "--model", "openai:gpt-9", "--fallback-model", "openai:backup", "--llm-url", srv.URL+"/v1")
	if code != 0 {
		t.Fatalf("run with a fallback: exit %d\n%s", code, errs)
	}
	res := results(t, dir)
	if len(res) != len(ids) {
		t.Fatalf("%d results, want %d", len(res), len(ids))
	}
	for _, o := range res {
		if o["model"] != "openai:backup" || traceModels(o) != "openai:backup" {
			t.Errorf("job %v: model %v, attempts %s; want the fallback's only", o["job_id"], o["model"], traceModels(o))
		}
	}

	// The base URL without /v1: the server has no such path.
	plain := newOpenAIServer(t, http.StatusOK, validTicket)
	dir = t.TempDir()
	ticketJobs(t, dir, "url", 2)
	_, errs, code = runCLI(t, "", "run", "--data-dir", dir, "--until-idle", "--model", "openai:m", "--llm-url", plain.URL, "--concurrency", "1")
	if code != exitRuntime || !strings.Contains(errs, "POST "+plain.URL+"/chat/completions") {
		t.Fatalf("base URL without /v1: exit %d, want %d and the URL called\n%s", code, exitRuntime, errs)
	}
	_, errs, code = runCLI(t, "", "run", "--data-dir", dir, "--until-idle", "--model", "openai:m", "--llm-url", plain.URL+"/v1")
	if code != 0 || len(results(t, dir)) != 2 {
		t.Fatalf("the right base URL: exit %d, %d results, want 0 and 2\n%s", code, len(results(t, dir)), errs)
	}
}

// reasoningAnswers answers chat completions as OpenAI's reasoning models
// (gpt-5, o-series) do: a 400 naming max_tokens or temperature when the
// request holds it, else a valid ticket. refused counts the refusals.
func reasoningAnswers(refused map[string]int, mu *sync.Mutex) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		w.Header().Set("Content-Type", "application/json")
		for _, p := range []string{"max_tokens", "temperature"} {
			if _, ok := body[p]; ok {
				mu.Lock()
				refused[p]++
				mu.Unlock()
				w.WriteHeader(http.StatusBadRequest)
				_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{"message": "Unsupported parameter: '" + p + "' is not supported with this model.", "type": "invalid_request_error", "param": p, "code": "unsupported_parameter"}})
				return
			}
		}
		_ = json.NewEncoder(w).Encode(map[string]any{"id": "chatcmpl-r", "object": "chat.completion", "model": body["model"],
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": validTicket}}},
			"usage":   map[string]any{"prompt_tokens": 100, "completion_tokens": 400, "completion_tokens_details": map[string]any{"reasoning_tokens": 360}}})
	})
}

// TestRunOnReasoningModel: OpenAI's reasoning models take only their
// default temperature and refuse max_tokens. Every job ends as a result,
// with --batch too: the first refusal of each parameter is learned, every
// later request is sent without it, one warning names each parameter, and
// the trace records the temperature the answers came at.
func TestRunOnReasoningModel(t *testing.T) {
	t.Parallel()
	wantTestKeys(t)
	for _, batch := range []bool{false, true} {
		t.Run(map[bool]string{false: "sync", true: "batch"}[batch], func(t *testing.T) {
			var mu sync.Mutex
			refused := map[string]int{}
			srv := batchtest.New(batchtest.Config{Answer: reasoningAnswers(refused, &mu), Key: "sk-test"})
			t.Cleanup(srv.Close)
			dir := t.TempDir()
			ids := ticketJobs(t, dir, "rm", 8)
			// A model whose name says nothing (gpt-5-mini's temperature is known up front).
			args := []string{"run", "--data-dir", dir, "--until-idle", "--model", "openai:reasoner-1", "--llm-url", srv.URL + "/v1", "--max-tokens", "2048", "--concurrency", "1"}
			if batch {
				args = append(args, "--batch", "--batch-wait", "50ms", "--batch-poll", "50ms")
			}
			_, errs, code := runCLI(t, "", args...)
			if code != 0 {
				t.Fatalf("run: exit %d\n%s", code, errs)
			}
			res := results(t, dir)
			if len(res) != len(ids) {
				t.Fatalf("%d results, want %d\n%s", len(res), len(ids), errs)
			}
			for _, o := range res {
				tr := o["trace"].([]any)
				if len(tr) != 1 || tr[0].(map[string]any)["temperature"] != 1.0 {
					t.Errorf("job %v: trace %v, want one attempt at temperature 1", o["job_id"], tr)
				}
			}
			mu.Lock()
			defer mu.Unlock()
			if !batch && (refused["max_tokens"] != 1 || refused["temperature"] != 1) {
				t.Errorf("refused calls %v, want one per parameter", refused)
			}
			if batch && (refused["max_tokens"] == 0 || refused["temperature"] == 0 || srv.Creates() < 3) {
				t.Errorf("refused requests %v in %d batches, want the first batch refused for max_tokens, the next for temperature", refused, srv.Creates())
			}
			if want := fmt.Sprintf("run: %d jobs in", len(ids)); !strings.Contains(errs, want) || !strings.Contains(errs, fmt.Sprintf("%d succeeded", len(ids))) {
				t.Errorf("the summary line does not count the %d results:\n%s", len(ids), errs)
			}
			if n := strings.Count(errs, "does not take this parameter"); n != 2 {
				t.Errorf("%d warnings, want one per parameter:\n%s", n, errs)
			}
		})
	}
}

// TestRunSendsLLMHeaders: --llm-header (or PIPELINE_LLM_HEADERS) reaches
// the provider with every call; a malformed one is a usage error that
// never shows what was given, and a header the client sets itself is
// refused by name.
func TestRunSendsLLMHeaders(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-test")
	const gwKey = "gw-secret-0123456789"
	var mu sync.Mutex
	var seen []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		seen = append(seen, r.Header.Get("X-Gateway-Key")+"|"+r.URL.RawQuery)
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": "chatcmpl-h", "object": "chat.completion",
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": validTicket}}},
			"usage":   map[string]any{"prompt_tokens": 10, "completion_tokens": 10}})
	}))
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	ticketJobs(t, dir, "hd", 2)
	t.Setenv("PIPELINE_LLM_HEADERS", "X-Gateway-Key: "+gwKey)
	_, errs, code := runCLI(t, "", "run", "--data-dir", dir, "--until-idle", "--model", "openai:m", "--llm-url", srv.URL+"/v1?api-version=2024-10-21")
	if code != 0 || len(results(t, dir)) != 2 {
		t.Fatalf("run: exit %d, %d results\n%s", code, len(results(t, dir)), errs)
	}
	mu.Lock()
	for _, s := range seen {
		if s != gwKey+"|api-version=2024-10-21" {
			t.Errorf("a call carried %q, want the gateway key and the base URL's query", s)
		}
	}
	mu.Unlock()
	t.Setenv("PIPELINE_LLM_HEADERS", "")

	for _, tc := range []struct{ flag, want string }{
		{"sk-live-abcdefghijklmnop", "--llm-header #1: want 'Name: value'"},
		{"Content-Length: 5", "--llm-header Content-Length: the client sets this header itself"},
	} {
		_, errs, code := runCLI(t, "", "run", "--data-dir", dir, "--until-idle", "--model", "openai:m", "--llm-url", srv.URL+"/v1", "--llm-header", tc.flag)
		if code != exitUsage || !strings.Contains(errs, tc.want) {
			t.Errorf("--llm-header %q: exit %d, want %d and %q\n%s", tc.flag, code, exitUsage, tc.want, errs)
		}
		if strings.Contains(errs, "abcdefghijklmnop") {
			t.Errorf("the flag's value reached stderr:\n%s", errs)
		}
	}
}
