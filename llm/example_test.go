package llm_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"time"

	"github.com/llmpipeline/pipeline/heal"
	"github.com/llmpipeline/pipeline/llm"
	"github.com/llmpipeline/pipeline/llm/sim"
)

func ExampleParse() {
	for _, spec := range []string{"openai:gpt-4o-mini", "anthropic:claude-sonnet-4-5", "sim", "openai:llama3.1:8b", "gemini:pro"} {
		provider, model, err := llm.Parse(spec)
		fmt.Printf("%-30q provider=%q model=%q err=%v\n", spec, provider, model, err != nil)
	}
	// Output:
	// "openai:gpt-4o-mini"           provider="openai" model="gpt-4o-mini" err=false
	// "anthropic:claude-sonnet-4-5"  provider="anthropic" model="claude-sonnet-4-5" err=false
	// "sim"                          provider="sim" model="" err=false
	// "openai:llama3.1:8b"           provider="openai" model="llama3.1:8b" err=false
	// "gemini:pro"                   provider="" model="" err=true
}

// NewOpenAI talks to any OpenAI-compatible server; here a local stand-in.
func ExampleNewOpenAI() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, `{"choices":[{"index":0,"message":{"role":"assistant","content":"{\"total\": 12.5}"},"finish_reason":"stop"}],
			"usage":{"prompt_tokens":31,"completion_tokens":7}}`)
	}))
	defer srv.Close()

	model, err := llm.NewOpenAI(llm.Config{BaseURL: srv.URL + "/v1", Model: "llama3.1:8b", KeyEnv: "OPENAI_API_KEY"})
	if err != nil {
		panic(err)
	}
	defer model.Close()
	resp, err := model.Complete(context.Background(), model.Request{
		Messages:    []model.Message{{Role: "user", Content: "Extract the total as JSON."}},
		Temperature: 0.7,
	})
	if err != nil {
		panic(err)
	}
	fmt.Println(resp.Content, resp.FinishReason, resp.Usage.Total())
	// Output: {"total": 12.5} stop 38
}

// Failures the client could not get past are *model.Error: the kind says
// what the caller does next.
func ExampleNewAnthropic_errors() {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized)
		io.WriteString(w, `{"type":"error","error":{"type":"authentication_error","message":"invalid x-api-key"}}`)
	}))
	defer srv.Close()

	model, _ := llm.NewAnthropic(llm.Config{BaseURL: srv.URL, APIKey: "sk-ant-not-shown", Model: "claude-sonnet-4-5"})
	defer model.Close()
	_, err := model.Complete(context.Background(), model.Request{Messages: []model.Message{{Role: "user", Content: "hi"}}})
	var he *model.Error
	if errors.As(err, &he) {
		fmt.Println(he.Kind)
		fmt.Println(err)
	}
	// Output:
	// auth
	// anthropic: auth (HTTP 401): authentication_error: invalid x-api-key (check ANTHROPIC_API_KEY)
}

// A Breaker guards one provider; the worker calls Wait before fetching jobs.
func ExampleNewBreaker() {
	m, _ := sim.New(sim.Config{Force: sim.ForceTransport})
	b := llm.NewBreaker(m, llm.BreakerConfig{Threshold: 2, Cooldown: time.Minute,
		OnState: func(s string) { fmt.Println("breaker:", s) }})
	for range 3 {
		_, err := b.Complete(context.Background(), model.Request{})
		fmt.Println(model.KindOf(err))
	}
	fmt.Println(b.State())
	// Output:
	// transport
	// breaker: open
	// transport
	// transport
	// open
}
