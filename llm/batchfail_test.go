package llm_test

import (
	"bytes"
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/llmpipeline/pipeline/heal"
	"github.com/llmpipeline/pipeline/llm"
	"github.com/llmpipeline/pipeline/llm/batchtest"
)

// TestBatchResultsOfBothProviders reads results files with what the
// providers may write besides answers: a line cut short, a custom id
// answered twice, and a request refused for the key (OpenAI's 401 line,
// Anthropic's authentication_error result). The cut line is handed on as
// unreadable with its custom id and the lines after it are read; both
// answers of the custom id come in file order; the refused key is an
// auth error, and an account without credit (OpenAI's insufficient_quota,
// Anthropic's billing_error) a no-credit one: batch mode stops on both.
func TestBatchResultsOfBothProviders(t *testing.T) {
	t.Parallel()
	for _, provider := range []string{llm.ProviderOpenAI, llm.ProviderAnthropic} {
		t.Run(provider, func(t *testing.T) {
			t.Parallel()
			answer := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				body, _ := io.ReadAll(r.Body)
				if bytes.Contains(body, []byte("answer with broke")) {
					w.Header().Set("Content-Type", "application/json")
					if r.URL.Path == "/v1/messages" {
						w.WriteHeader(http.StatusPaymentRequired)
						_, _ = io.WriteString(w, `{"type":"error","error":{"type":"billing_error","message":"Your credit balance is too low to access the Anthropic API."}}`)
					} else {
						w.WriteHeader(http.StatusTooManyRequests)
						_, _ = io.WriteString(w, `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`)
					}
					return
				}
				if bytes.Contains(body, []byte("answer with denied")) {
					w.Header().Set("Content-Type", "application/json")
					w.WriteHeader(http.StatusUnauthorized)
					if r.URL.Path == "/v1/messages" {
						_, _ = io.WriteString(w, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`)
					} else {
						_, _ = io.WriteString(w, `{"error":{"message":"Incorrect API key provided: sk-*****.","type":"invalid_request_error","param":null,"code":"invalid_api_key"}}`)
					}
					return
				}
				r.Body = io.NopCloser(bytes.NewReader(body))
				chatAnswer().ServeHTTP(w, r)
			})
			srv := batchtest.New(batchtest.Config{Answer: answer, Key: batchKey,
				Twice: func(id string) bool { return id == "twice-1" },
				Break: func(id string, line []byte) []byte {
					if id == "cut-1" {
						return append(line[:len(line)/2:len(line)/2], '\n')
					}
					return line
				}})
			t.Cleanup(srv.Close)
			b := newBatcher(t, provider, srv)
			st, err := b.Create(t.Context(), "key0003", []llm.BatchRequest{batchReq("ok-1", "ok"), batchReq("cut-1", "ok"),
				batchReq("twice-1", "ok"), batchReq("denied-1", "denied"), batchReq("broke-1", "broke"), batchReq("ok-2", "fine")})
			if err != nil {
				t.Fatal(err)
			}
			st = waitDone(t, b, st.ID)
			var got []llm.BatchResult
			err = b.Results(t.Context(), st, func(id string) bool { return id != "ok-2" }, func(r llm.BatchResult) error {
				got = append(got, r)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			by := map[string][]llm.BatchResult{}
			for _, r := range got {
				by[r.CustomID] = append(by[r.CustomID], r)
			}
			if r := by["ok-1"]; len(r) != 1 || r[0].Type != llm.ResultSucceeded {
				t.Errorf("ok-1: %+v", r)
			}
			if r := by["cut-1"]; len(r) != 1 || r[0].Type != llm.ResultUnreadable || model.KindOf(r[0].Err) != model.KindTransport {
				t.Errorf("cut-1: %+v, want one unreadable result", r)
			}
			if r := by["twice-1"]; len(r) != 2 || r[0].Type != llm.ResultSucceeded || r[1].Type != llm.ResultSucceeded {
				t.Errorf("twice-1: %+v, want its two answers", r)
			}
			if r := by["denied-1"]; len(r) != 1 || r[0].Type != llm.ResultErrored || model.KindOf(r[0].Err) != model.KindAuth {
				t.Errorf("denied-1: %+v, want an auth error", r)
			}
			if r := by["broke-1"]; len(r) != 1 || r[0].Type != llm.ResultErrored || model.KindOf(r[0].Err) != model.KindNoCredit {
				t.Errorf("broke-1: %+v, want a no-credit error", r)
			}
			if r := by["ok-2"]; len(r) != 0 {
				t.Errorf("ok-2 was not wanted, got %+v", r)
			}
			for _, r := range got {
				if r.Err != nil && strings.Contains(r.Err.Error(), batchKey) {
					t.Errorf("%s: the key in an error", r.CustomID)
				}
			}
		})
	}
}
