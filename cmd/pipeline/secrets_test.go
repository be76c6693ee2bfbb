package main

import (
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/sink"
)

// echoServer is an OpenAI-compatible provider that writes the request's
// Authorization header into what it answers: into a valid ticket for
// input "ok", into an answer that fails the schema for "bad", and into a
// 400 error message for "reject".
func echoServer(t *testing.T) (*httptest.Server, *atomic.Int32) {
	t.Helper()
	var calls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		calls.Add(1)
		body, _ := io.ReadAll(r.Body)
		auth := r.Header.Get("Authorization")
		w.Header().Set("Content-Type", "application/json")
		var content string
		switch {
		case strings.Contains(string(body), "reject"):
			w.WriteHeader(http.StatusBadRequest)
			_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
				"message": "malformed request sent with " + auth, "type": "invalid_request_error"}})
			return
		case strings.Contains(string(body), "bad"):
			b, _ := json.Marshal(map[string]any{"subject": "echo " + auth})
			content = string(b)
		default:
			b, _ := json.Marshal(map[string]any{"subject": "Cannot log in", "priority": "high", "category": "account",
				"summary":  "the caller sent " + auth,
				"customer": map[string]any{"name": "Ana Lima", "email": "ana@example.com"}})
			content = string(b)
		}
		_ = json.NewEncoder(w).Encode(map[string]any{
			"id": "chatcmpl-1", "object": "chat.completion",
			"choices": []any{map[string]any{"index": 0, "finish_reason": "stop",
				"message": map[string]any{"role": "assistant", "content": content}}},
			"usage": map[string]any{"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20},
		})
	}))
	t.Cleanup(srv.Close)
	return srv, &calls
}

// TestSecretsNeverStored runs jobs against a provider that echoes the
// credentials it was sent into answers, transcripts and error texts, and
// looks for every form of them in everything the pipeline logged or
// stored: the RESULTS and DLQ streams, the SQLite file, results, dlq show,
// dlq export and the debug log.
func TestSecretsNeverStored(t *testing.T) {
	const key = "sk-proj-echo-0123456789abcdef"
	const user, pass = "llmuser", "p4ss-w0rd-echo"
	basic := base64.StdEncoding.EncodeToString([]byte(user + ":" + pass))
	const gateway = "gw-header-echo-0123456789"
	tests := []struct {
		name    string
		key     string
		userURL bool
		header  string // --llm-header
		leaks   []string
	}{
		{"api key", key, false, "", []string{key}},
		{"url user info", "", true, "", []string{pass, user + ":" + pass, basic}},
		{"llm header", key, false, "Authorization: Bearer " + gateway, []string{gateway, key}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("OPENAI_API_KEY", tc.key)
			srv, calls := echoServer(t)
			llmURL := srv.URL + "/v1"
			if tc.userURL {
				u, _ := url.Parse(llmURL)
				u.User = url.UserPassword(user, pass)
				llmURL = u.String()
			}
			dir := t.TempDir()
			jobs := `{"id":"s-ok","schema":"ticket","input":"ok"}` + "\n" +
				`{"id":"s-bad","schema":"ticket","input":"bad"}` + "\n" +
				`{"id":"s-reject","schema":"ticket","input":"reject"}` + "\n"
			mustCLI(t, jobs, "submit", "--data-dir", dir, "-")
			args := []string{"run", "--data-dir", dir, "--until-idle", "--model", "openai:m",
				"--llm-url", llmURL, "--max-attempts", "2", "--log-level", "debug"}
			if tc.header != "" {
				args = append(args, "--llm-header", tc.header)
			}
			_, logs, code := runCLI(t, "", args...)
			if code != 0 {
				t.Fatalf("run: exit %d\n%s", code, logs)
			}
			if calls.Load() < 3 {
				t.Fatalf("%d model calls, want at least 3", calls.Load())
			}

			seen := map[string]string{"run log": logs}
			seen["results"] = mustCLI(t, "", "results", "--json", "--data-dir", dir)
			seen["dlq list"] = mustCLI(t, "", "dlq", "list", "--json", "--data-dir", dir)
			seen["dlq export"] = mustCLI(t, "", "dlq", "export", "--data-dir", dir)
			for _, id := range []string{"s-bad", "s-reject"} {
				seen["dlq show "+id] = mustCLI(t, "", "dlq", "show", "--json", "--data-dir", dir, id)
			}
			db, err := os.ReadFile(filepath.Join(dir, "pipeline.db"))
			if err != nil {
				t.Fatal(err)
			}
			seen["pipeline.db"] = string(db)
			c := connFor(t, []string{"--data-dir", dir})
			for _, stream := range []string{broker.StreamResults, broker.StreamDLQ} {
				var b strings.Builder
				if err := sink.ReadStream(t.Context(), c, stream, "", func(m sink.Msg) error {
					b.Write(m.Data)
					return nil
				}); err != nil {
					t.Fatal(err)
				}
				seen["stream "+stream] = b.String()
			}
			c.Close()

			// The echo really happened: the mask is where the secret was.
			if !strings.Contains(seen["results"], "the caller sent ") || !strings.Contains(seen["results"], "[REDACTED]") {
				t.Errorf("the result does not carry the masked echo: %s", seen["results"])
			}
			if !strings.Contains(seen["dlq export"], "[REDACTED]") {
				t.Errorf("the dead letters do not carry the masked echo: %s", seen["dlq export"])
			}
			for where, text := range seen {
				for _, s := range tc.leaks {
					if strings.Contains(text, s) {
						t.Errorf("%s holds the secret %q", where, s)
					}
				}
			}
		})
	}
}
