package llm_test

import (
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/heal"
	"github.com/llmpipeline/pipeline/llm"
	"github.com/llmpipeline/pipeline/llm/batchtest"
)

const batchKey = "sk-batch-SECRET-42"

// chatAnswer answers chat completions and messages as the providers do: the
// user turn's last word picks the answer ("ok", "fail" for a 500,
// "long" for a truncated one, "bad" for a 400).
func chatAnswer() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		var req struct {
			Messages []model.Message `json:"messages"`
		}
		_ = json.Unmarshal(body, &req)
		last := req.Messages[len(req.Messages)-1].Content
		word := last[strings.LastIndex(last, " ")+1:]
		anthropic := r.URL.Path == "/v1/messages"
		w.Header().Set("Content-Type", "application/json")
		switch word {
		case "fail":
			w.WriteHeader(500)
			if anthropic {
				_, _ = io.WriteString(w, `{"type":"error","error":{"type":"api_error","message":"Internal server error"}}`)
			} else {
				_, _ = io.WriteString(w, `{"error":{"message":"The server had an error","type":"server_error","param":null,"code":null}}`)
			}
			return
		case "bad":
			w.WriteHeader(400)
			if anthropic {
				_, _ = io.WriteString(w, `{"type":"error","error":{"type":"invalid_request_error","message":"max_tokens: too large"}}`)
			} else {
				_, _ = io.WriteString(w, `{"error":{"message":"max_tokens is too large","type":"invalid_request_error","param":"max_tokens","code":null}}`)
			}
			return
		}
		finish, stop := "stop", "end_turn"
		if word == "long" {
			finish, stop = "length", "max_tokens"
		}
		content := `{"word":"` + word + `"}`
		var out any
		if anthropic {
			out = map[string]any{"id": "msg_1", "type": "message", "role": "assistant", "model": "claude-x",
				"content": []any{map[string]any{"type": "text", "text": content}}, "stop_reason": stop, "stop_sequence": nil,
				"usage": map[string]any{"input_tokens": 10, "output_tokens": 5}}
		} else {
			out = map[string]any{"id": "chatcmpl-1", "object": "chat.completion", "model": "gpt-x",
				"choices": []any{map[string]any{"index": 0, "message": map[string]any{"role": "assistant", "content": content, "refusal": nil}, "finish_reason": finish}},
				"usage":   map[string]any{"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}
		}
		_ = json.NewEncoder(w).Encode(out)
	})
}

func batchReq(id, word string) llm.BatchRequest {
	return llm.BatchRequest{CustomID: id, Request: model.Request{
		Messages:    []model.Message{{Role: "system", Content: "Return JSON."}, {Role: "user", Content: "answer with " + word}},
		Temperature: 0.7, JobID: id, Attempt: 1,
	}}
}

func newBatcher(t *testing.T, provider string, srv *batchtest.Server) llm.Batcher {
	t.Helper()
	base := srv.URL
	if provider == llm.ProviderOpenAI {
		base += "/v1"
	}
	b, err := llm.NewBatcher(provider, llm.Config{BaseURL: base, APIKey: batchKey, Model: "m", BackoffBase: time.Millisecond, BackoffMax: time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func waitDone(t *testing.T, b llm.Batcher, id string) llm.BatchStatus {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		st, err := b.Get(t.Context(), id)
		if err != nil {
			t.Fatal(err)
		}
		if st.Done() {
			return st
		}
	}
	t.Fatalf("batch %s not done", id)
	return llm.BatchStatus{}
}

func results(t *testing.T, b llm.Batcher, st llm.BatchStatus) map[string]llm.BatchResult {
	t.Helper()
	got := map[string]llm.BatchResult{}
	var order []string
	err := b.Results(t.Context(), st, nil, func(r llm.BatchResult) error {
		if _, dup := got[r.CustomID]; dup {
			t.Errorf("result for %s twice", r.CustomID)
		}
		got[r.CustomID] = r
		order = append(order, r.CustomID)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func TestBatchCompletedWithErrors(t *testing.T) {
	t.Parallel()
	for _, provider := range []string{llm.ProviderOpenAI, llm.ProviderAnthropic} {
		t.Run(provider, func(t *testing.T) {
			t.Parallel()
			srv := batchtest.New(batchtest.Config{Answer: chatAnswer(), Key: batchKey})
			t.Cleanup(srv.Close)
			b := newBatcher(t, provider, srv)
			reqs := []llm.BatchRequest{batchReq("a-1", "ok"), batchReq("b-1", "fail"), batchReq("c-1", "long"), batchReq("d-1", "bad"), batchReq("e-1", "fine")}
			st, err := b.Create(t.Context(), "key0001", reqs)
			if err != nil {
				t.Fatal(err)
			}
			if st.Done() || st.ID == "" {
				t.Fatalf("new batch: %+v", st)
			}
			st = waitDone(t, b, st.ID)
			if st.State != llm.BatchEnded || st.Counts.Total != 5 || st.Counts.Succeeded != 3 || st.Counts.Errored != 2 {
				t.Fatalf("ended batch: %+v", st)
			}
			got := results(t, b, st)
			if len(got) != 5 {
				t.Fatalf("%d results, want 5: %v", len(got), got)
			}
			if r := got["a-1"]; r.Type != llm.ResultSucceeded || r.Response.Content != `{"word":"ok"}` || r.Response.FinishReason != model.FinishStop || r.Response.Usage.PromptTokens != 10 {
				t.Errorf("a-1: %+v", r)
			}
			if r := got["c-1"]; r.Type != llm.ResultSucceeded || r.Response.FinishReason != model.FinishLength {
				t.Errorf("c-1 should read as truncated: %+v", r)
			}
			if r := got["b-1"]; r.Type != llm.ResultErrored || model.KindOf(r.Err) != model.KindTransport {
				t.Errorf("b-1 (500 in the batch) should be a transport error: %+v", r)
			}
			if r := got["d-1"]; r.Type != llm.ResultErrored || model.KindOf(r.Err) != model.KindRequest {
				t.Errorf("d-1 (400 in the batch) should be a request error: %+v", r)
			}
			for id, r := range got {
				if r.Err != nil && strings.Contains(r.Err.Error(), batchKey) {
					t.Errorf("%s: key in error", id)
				}
			}
			if sub := srv.Submitted(); !slices.Equal(sub, []string{"a-1", "b-1", "c-1", "d-1", "e-1"}) {
				t.Errorf("submitted %v", sub)
			}
		})
	}
}

// The batch line carries the body the synchronous client posts.
func TestBatchLineIsTheSyncBody(t *testing.T) {
	t.Parallel()
	for _, provider := range []string{llm.ProviderOpenAI, llm.ProviderAnthropic} {
		t.Run(provider, func(t *testing.T) {
			t.Parallel()
			var syncBody []byte
			rec := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				syncBody, _ = io.ReadAll(r.Body)
				r.Body = io.NopCloser(strings.NewReader(string(syncBody)))
				chatAnswer().ServeHTTP(w, r)
			})
			srv := batchtest.New(batchtest.Config{Answer: rec})
			t.Cleanup(srv.Close)
			req := batchReq("x-1", "ok")
			req.Request.MaxTokens = 77
			base := srv.URL
			if provider == llm.ProviderOpenAI {
				base += "/v1"
			}
			b := newBatcher(t, provider, srv)
			st, err := b.Create(t.Context(), "k", []llm.BatchRequest{req})
			if err != nil {
				t.Fatal(err)
			}
			waitDone(t, b, st.ID)
			batchBody := syncBody
			var m model.Model
			cfg := llm.Config{BaseURL: base, APIKey: "k", Model: "m", HTTPClient: &http.Client{Transport: handlerTransport{rec}}}
			if provider == llm.ProviderOpenAI {
				m, err = llm.NewOpenAI(cfg)
			} else {
				m, err = llm.NewAnthropic(cfg)
			}
			if err != nil {
				t.Fatal(err)
			}
			if _, err := m.Complete(t.Context(), req.Request); err != nil {
				t.Fatal(err)
			}
			if string(batchBody) != string(syncBody) {
				t.Errorf("batch body\n%s\nsync body\n%s", batchBody, syncBody)
			}
			if !strings.Contains(string(batchBody), `"max_tokens":77`) {
				t.Errorf("body lacks max_tokens: %s", batchBody)
			}
		})
	}
}

type handlerTransport struct{ h http.Handler }

func (t handlerTransport) RoundTrip(r *http.Request) (*http.Response, error) {
	rec := httptest.NewRecorder()
	t.h.ServeHTTP(rec, r)
	return rec.Result(), nil
}

func TestBatchExpiredAndCancelled(t *testing.T) {
	t.Parallel()
	for _, provider := range []string{llm.ProviderOpenAI, llm.ProviderAnthropic} {
		for _, how := range []string{"expired", "cancelled"} {
			t.Run(provider+"/"+how, func(t *testing.T) {
				t.Parallel()
				srv := batchtest.New(batchtest.Config{Answer: chatAnswer(), Hold: true})
				t.Cleanup(srv.Close)
				b := newBatcher(t, provider, srv)
				st, err := b.Create(t.Context(), "key-"+how, []llm.BatchRequest{batchReq("a-1", "ok"), batchReq("b-1", "ok"), batchReq("c-1", "ok")})
				if err != nil {
					t.Fatal(err)
				}
				if st2, err := b.Get(t.Context(), st.ID); err != nil || st2.Done() {
					t.Fatalf("held batch: %+v %v", st2, err)
				}
				want := llm.BatchExpired
				if how == "expired" {
					srv.Expire(st.ID, 1)
				} else {
					want = llm.BatchCanceled
					srv.CancelNow(st.ID, 1)
				}
				st = waitDone(t, b, st.ID)
				if provider == llm.ProviderOpenAI && st.State != want {
					t.Errorf("state %s, want %s", st.State, want)
				}
				if provider == llm.ProviderAnthropic && (st.State != llm.BatchEnded || st.Status != "ended") {
					t.Errorf("anthropic state %s/%s, want ended", st.State, st.Status)
				}
				got := results(t, b, st)
				if r := got["a-1"]; r.Type != llm.ResultSucceeded {
					t.Errorf("a-1 answered before the end: %+v", r)
				}
				for _, id := range []string{"b-1", "c-1"} {
					r, ok := got[id]
					if ok && r.Type != llm.ResultExpired && r.Type != llm.ResultCanceled {
						t.Errorf("%s: %+v, want no answer", id, r)
					}
					if provider == llm.ProviderAnthropic && !ok {
						t.Errorf("%s: anthropic writes a result for every request", id)
					}
				}
			})
		}
	}
}

func TestBatchCancelAndFind(t *testing.T) {
	t.Parallel()
	srv := batchtest.New(batchtest.Config{Answer: chatAnswer(), Hold: true})
	t.Cleanup(srv.Close)
	b := newBatcher(t, llm.ProviderOpenAI, srv)
	st, err := b.Create(t.Context(), "find-me", []llm.BatchRequest{batchReq("a-1", "ok")})
	if err != nil {
		t.Fatal(err)
	}
	found, ok, err := b.Find(t.Context(), "find-me")
	if err != nil || !ok || found.ID != st.ID || found.Key != "find-me" {
		t.Fatalf("find: %+v %v %v", found, ok, err)
	}
	if _, ok, _ := b.Find(t.Context(), "never-created"); ok {
		t.Error("found a batch never created")
	}
	c, err := b.Cancel(t.Context(), st.ID)
	if err != nil || c.State != llm.BatchCanceled {
		t.Fatalf("cancel: %+v %v", c, err)
	}
	if _, err := b.Get(t.Context(), "batch_nope"); err == nil || model.KindOf(err) != model.KindRequest {
		t.Errorf("unknown batch: %v", err)
	}
}

func TestBatchWrongKeyIsAuth(t *testing.T) {
	t.Parallel()
	srv := batchtest.New(batchtest.Config{Answer: chatAnswer(), Key: batchKey})
	t.Cleanup(srv.Close)
	for _, provider := range []string{llm.ProviderOpenAI, llm.ProviderAnthropic} {
		base := srv.URL
		if provider == llm.ProviderOpenAI {
			base += "/v1"
		}
		b, err := llm.NewBatcher(provider, llm.Config{BaseURL: base, APIKey: "sk-wrong", Model: "m"})
		if err != nil {
			t.Fatal(err)
		}
		_, err = b.Create(context.Background(), "k", []llm.BatchRequest{batchReq("a-1", "ok")})
		var he *model.Error
		if !errors.As(err, &he) || he.Kind != model.KindAuth || strings.Contains(err.Error(), "sk-wrong") {
			t.Errorf("%s: %v, want an auth error without the key", provider, err)
		}
	}
	if srv.Creates() != 0 {
		t.Errorf("%d batches created with a wrong key", srv.Creates())
	}
}

// TestOpenAIBatchFailedKeepsTheProviderErrors: a batch OpenAI fails while
// validating carries every item of its errors.data (code, message, param,
// line) in the status, the first as its Message.
func TestOpenAIBatchFailedKeepsTheProviderErrors(t *testing.T) {
	t.Parallel()
	srv := batchtest.New(batchtest.Config{Answer: chatAnswer(), Key: batchKey, Refuse: func(body []byte) *batchtest.ErrorData {
		if strings.Contains(string(body), "answer with bad") {
			return &batchtest.ErrorData{Code: "invalid_value", Message: "Invalid value for 'max_tokens'.", Param: "body.max_tokens"}
		}
		return nil
	}})
	t.Cleanup(srv.Close)
	b := newBatcher(t, llm.ProviderOpenAI, srv)
	st, err := b.Create(t.Context(), "key0002", []llm.BatchRequest{batchReq("a-1", "ok"), batchReq("b-1", "bad"), batchReq("c-1", "ok"), batchReq("d-1", "bad")})
	if err != nil {
		t.Fatal(err)
	}
	st = waitDone(t, b, st.ID)
	want := []llm.BatchError{
		{Code: "invalid_value", Message: "Invalid value for 'max_tokens'.", Param: "body.max_tokens", Line: 2},
		{Code: "invalid_value", Message: "Invalid value for 'max_tokens'.", Param: "body.max_tokens", Line: 4},
	}
	if st.State != llm.BatchFailed || st.Status != "failed" || !slices.Equal(st.Errors, want) {
		t.Fatalf("status %s/%s, errors %+v; want failed with %+v", st.State, st.Status, st.Errors, want)
	}
	if st.Message != "invalid_value: Invalid value for 'max_tokens'. (and 1 more)" {
		t.Errorf("message %q", st.Message)
	}
	if got := results(t, b, st); len(got) != 0 {
		t.Errorf("%d results of a failed batch, want none", len(got))
	}
}
