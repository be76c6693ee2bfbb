package main

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// account is a provider whose account may run out of credit: without
// credit every call (chat, messages, file upload, batch create) is
// answered as the provider's spec says, OpenAI's 429 insufficient_quota
// or Anthropic's 402 billing_error; with credit the synchronous endpoints
// answer a valid ticket.
type account struct {
	*httptest.Server
	provider string
	credit   atomic.Bool
	mu       sync.Mutex
	paths    []string
}

func newAccount(t *testing.T, provider string) *account {
	t.Helper()
	a := &account{provider: provider}
	a.Server = httptest.NewServer(http.HandlerFunc(a.serve))
	t.Cleanup(a.Close)
	return a
}

func (a *account) serve(w http.ResponseWriter, r *http.Request) {
	_, _ = io.Copy(io.Discard, r.Body)
	a.mu.Lock()
	a.paths = append(a.paths, r.Method+" "+r.URL.Path)
	a.mu.Unlock()
	w.Header().Set("Content-Type", "application/json")
	switch {
	case !a.credit.Load() && a.provider == "openai":
		w.WriteHeader(http.StatusTooManyRequests)
		_, _ = io.WriteString(w, `{"error":{"message":"You exceeded your current quota, please check your plan and billing details. For more information on this error, read the docs: https://platform.openai.com/docs/guides/error-codes/api-errors.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`)
	case !a.credit.Load():
		w.WriteHeader(http.StatusPaymentRequired)
		_, _ = io.WriteString(w, `{"type":"error","error":{"type":"billing_error","message":"Your credit balance is too low to access the Anthropic API. Please go to Plans & Billing to upgrade or purchase credits."}}`)
	case r.URL.Path == "/v1/chat/completions":
		writeTicketAnswer(w)
	case r.URL.Path == "/v1/messages":
		_ = json.NewEncoder(w).Encode(map[string]any{"id": "msg_01", "type": "message", "role": "assistant", "model": "m",
			"content": []any{map[string]any{"type": "text", "text": validTicket}}, "stop_reason": "end_turn",
			"usage": map[string]any{"input_tokens": 100, "output_tokens": 40}})
	default:
		w.WriteHeader(http.StatusNotFound)
	}
}

func (a *account) calls() []string {
	a.mu.Lock()
	defer a.mu.Unlock()
	return append([]string(nil), a.paths...)
}

// TestRunStopsWhenNoCredit: an account without credit (OpenAI's 429
// insufficient_quota, Anthropic's 402 billing_error) stops the run as a
// 401 does, synchronously and with --batch: exit 6 within seconds, one
// call, the provider's message and what to check on stderr, no job
// dead-lettered; the jobs stay queued, and once the account has credit
// the next run answers them all.
func TestRunStopsWhenNoCredit(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-test-no-credit")
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-no-credit")
	for _, tt := range []struct {
		name, provider, url, message string
		batch                        bool
	}{
		{"openai", "openai", "/v1", "You exceeded your current quota", false},
		{"anthropic", "anthropic", "", "billing_error: Your credit balance is too low", false},
		{"openai batch", "openai", "/v1", "You exceeded your current quota", true},
		{"anthropic batch", "anthropic", "", "billing_error: Your credit balance is too low", true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			// Parallel with each other only: the parent set the keys.
			t.Parallel()
			acct := newAccount(t, tt.provider)
			dir := t.TempDir()
			ids := ticketJobs(t, dir, "nc", 3)
			args := []string{"run", "--data-dir", dir, "--until-idle", "--model", tt.provider + ":m", "--llm-url", acct.URL + tt.url, "--concurrency", "1"}
			if tt.batch {
				args = append(args, "--batch", "--batch-wait", "50ms", "--batch-poll", "50ms")
			}
			start := time.Now()
			_, errs, code := runCLI(t, "", args...)
			took := time.Since(start)
			t.Logf("%s: exit %d after %s and %d calls (%v); stderr ends: %s", tt.name, code, took.Round(time.Millisecond), len(acct.calls()), acct.calls(), lastLine(errs))
			if code != exitNoCredit {
				t.Fatalf("exit %d, want %d\n%s", code, exitNoCredit, errs)
			}
			for _, want := range []string{tt.message, "no_credit", "check the billing and credit", "none dead-lettered", "stay queued"} {
				if !strings.Contains(errs, want) {
					t.Errorf("stderr lacks %q:\n%s", want, errs)
				}
			}
			if strings.Contains(errs, "sk-test-no-credit") || strings.Contains(errs, "sk-ant-no-credit") {
				t.Error("the API key reached stderr")
			}
			if n := len(acct.calls()); n != 1 {
				t.Errorf("%d calls to an account without credit, want 1 (no retry, stop taking jobs): %v", n, acct.calls())
			}
			if dead := jsonLines(t, mustCLI(t, "", "dlq", "list", "--data-dir", dir, "--json")); len(dead) != 0 {
				t.Errorf("%d jobs dead-lettered for an account without credit, want 0", len(dead))
			}
			if res := results(t, dir); len(res) != 0 {
				t.Errorf("%d results after the stop, want 0", len(res))
			}
			// Credit added: the jobs were kept for this run.
			acct.credit.Store(true)
			_, errs, code = runCLI(t, "", "run", "--data-dir", dir, "--until-idle", "--model", tt.provider+":m", "--llm-url", acct.URL+tt.url)
			if code != 0 {
				t.Fatalf("run with credit: exit %d\n%s", code, errs)
			}
			if res := results(t, dir); len(res) != len(ids) {
				t.Errorf("%d results once the account has credit, want %d", len(res), len(ids))
			}
		})
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
