package main

import (
	"encoding/json"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/llmpipeline/pipeline/llm/batchtest"
)

// strictTicket is a ticket as a strict-mode model writes it: every
// property present, null for those it has nothing for.
const strictTicket = `{"subject":"Cannot log in","priority":"high","category":"account","customer":{"name":"Ana Lima","email":"ana@example.com","plan":null},"product":null,"summary":null,"tags":null}`

// strictAnswers answers chat completions as OpenAI does with
// response_format json_schema: a schema that breaks strict mode's rules is
// refused with its 400 (refused counts them), any other request is
// answered with strictTicket.
func strictAnswers(refused *int, mu *sync.Mutex) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body map[string]any
		_ = json.NewDecoder(r.Body).Decode(&body)
		if batchtest.StrictRefusal(w, body) {
			mu.Lock()
			*refused++
			mu.Unlock()
			return
		}
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{"id": "chatcmpl-s", "object": "chat.completion", "model": body["model"],
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop", "message": map[string]any{"role": "assistant", "content": strictTicket, "refusal": nil}}},
			"usage":   map[string]any{"prompt_tokens": 100, "completion_tokens": 40, "total_tokens": 140}})
	})
}

// TestRunJSONSchemaStrict: --response-format json_schema with the
// built-in ticket schema (optional properties, minLength, maxLength,
// uniqueItems) against a server that checks strict mode as OpenAI does.
// Before, every job was a request_error dead letter (the schema refused);
// now every job is a result in one attempt, sync and batch, the nulls of
// the optional properties dropped.
func TestRunJSONSchemaStrict(t *testing.T) {
	t.Parallel()
	wantTestKeys(t)
	for _, batch := range []bool{false, true} {
		t.Run(map[bool]string{false: "sync", true: "batch"}[batch], func(t *testing.T) {
			var mu sync.Mutex
			refused := 0
			srv := batchtest.New(batchtest.Config{Answer: strictAnswers(&refused, &mu), Key: "sk-test"})
			t.Cleanup(srv.Close)
			dir := t.TempDir()
			ids := ticketJobs(t, dir, "st", 4)
			args := []string{"run", "--data-dir", dir, "--until-idle", "--model", "openai:gpt-4o-mini", "--llm-url", srv.URL + "/v1",
				"--response-format", "json_schema", "--concurrency", "2"}
			if batch {
				args = append(args, "--batch", "--batch-wait", "50ms", "--batch-poll", "50ms")
			}
			_, errs, code := runCLI(t, "", args...)
			if code != 0 {
				t.Fatalf("run: exit %d\n%s", code, errs)
			}
			mu.Lock()
			if refused != 0 {
				t.Errorf("%d requests refused for their schema, want none", refused)
			}
			mu.Unlock()
			res := results(t, dir)
			if len(res) != len(ids) {
				t.Fatalf("%d results, want %d\n%s", len(res), len(ids), errs)
			}
			for _, o := range res {
				data, _ := json.Marshal(o["data"])
				if strings.Contains(string(data), "null") || !strings.Contains(string(data), `"customer":{"email":"ana@example.com","name":"Ana Lima"}`) {
					t.Errorf("job %v: data %s, want the ticket without the nulls of its optional properties", o["job_id"], data)
				}
				if tr := o["trace"].([]any); len(tr) != 1 {
					t.Errorf("job %v: %d attempts, want 1", o["job_id"], len(tr))
				}
			}
		})
	}
}

// TestRunSharesRefusedParameters: what one run learned of a model's
// parameters (a reasoning model behind a compatible server, whose name
// says nothing) is the fleet's: the next run on the same NATS, in batch
// mode, builds its very first batch without them: no request is refused.
// Before, every process learned alone, and batch mode spent a batch cycle
// per parameter.
func TestRunSharesRefusedParameters(t *testing.T) {
	t.Parallel()
	wantTestKeys(t)
	var mu sync.Mutex
	refused := map[string]int{}
	srv := batchtest.New(batchtest.Config{Answer: reasoningAnswers(refused, &mu), Key: "sk-test"})
	t.Cleanup(srv.Close)
	dir := t.TempDir()
	base := []string{"run", "--data-dir", dir, "--until-idle", "--model", "openai:reasoner-1", "--llm-url", srv.URL + "/v1", "--max-tokens", "2048", "--concurrency", "1"}

	ticketJobs(t, dir, "first", 2)
	if _, errs, code := runCLI(t, "", base...); code != 0 {
		t.Fatalf("first run: exit %d\n%s", code, errs)
	}
	mu.Lock()
	if refused["max_tokens"] != 1 || refused["temperature"] != 1 {
		t.Fatalf("first run: refused %v, want each parameter once", refused)
	}
	clear(refused)
	mu.Unlock()

	ids := ticketJobs(t, dir, "second", 3)
	_, errs, code := runCLI(t, "", append(base, "--batch", "--batch-wait", "50ms", "--batch-poll", "50ms")...)
	if code != 0 {
		t.Fatalf("second run: exit %d\n%s", code, errs)
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("second run: %d batches, refused %v", srv.Creates(), refused)
	if len(refused) != 0 {
		t.Errorf("second run: refused %v in %d batches, want none refused (every batch built without them)", refused, srv.Creates())
	}
	if n := len(results(t, dir)); n != 2+len(ids) {
		t.Errorf("%d results, want %d\n%s", n, 2+len(ids), errs)
	}
}
