package llm

import (
	"context"
	"net"
	"net/http"
	"testing"
)

// viaServer is an HTTP client whose every connection goes to srvURL's
// host, whatever the request's host: a base URL of
// http://api.openai.com/v1 reaches the test server, with the Host header
// and the URL the client wrote.
func viaServer(t *testing.T, srvURL string) *http.Client {
	t.Helper()
	addr := srvURL[len("http://"):]
	tr := &http.Transport{DialContext: func(ctx context.Context, network, _ string) (net.Conn, error) {
		var d net.Dialer
		return d.DialContext(ctx, network, addr)
	}}
	t.Cleanup(tr.CloseIdleConnections)
	return &http.Client{Transport: tr}
}

// TestOpenAIKnownParams: what OpenAI documents is sent right from the
// first call, so a reasoning model answers it at once (before, each
// process paid a 400 per parameter first): OpenAI's own API gets
// max_completion_tokens for every model, a gpt-5 or o-series model no
// temperature on any server; a compatible server keeps max_tokens, and a
// model whose name says nothing keeps its temperature.
func TestOpenAIKnownParams(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name, model string
		official    bool
		// what the first request holds
		wantTemp, wantMaxTokens, wantCompletion bool
		requests                                int // to the answer, on a reasoning server
	}{
		{"official gpt-5-mini", "gpt-5-mini", true, false, false, true, 1},
		{"official o3", "o3-2025-04-16", true, false, false, true, 1},
		{"official o4-mini through a router prefix", "openai/o4-mini", true, false, false, true, 1},
		// Not reasoning models: their temperature is sent (the test
		// server refuses any but 1 alike, hence a second request).
		{"official gpt-4o-mini", "gpt-4o-mini", true, true, false, true, 2},
		{"official gpt-5-chat-latest", "gpt-5-chat-latest", true, true, false, true, 2},
		{"compatible gpt-5-mini", "gpt-5-mini", false, false, true, false, 2},
		{"compatible unknown", "reasoner-1", false, true, true, false, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			s := newReasoningServer(t, "")
			o := newTestOpenAI(t, s.URL, func(c *Config) {
				c.Model, c.MaxTokens = tc.model, 1024
				if tc.official {
					// OpenAI's host (over http, to reach the test server).
					c.BaseURL, c.HTTPClient = "http://api.openai.com/v1", viaServer(t, s.URL)
				}
			})
			if _, err := o.Complete(t.Context(), testRequest()); err != nil {
				t.Fatal(err)
			}
			bodies := s.sent()
			first := bodies[0]
			_, temp := first["temperature"]
			_, maxTokens := first["max_tokens"]
			_, completion := first["max_completion_tokens"]
			if temp != tc.wantTemp || maxTokens != tc.wantMaxTokens || completion != tc.wantCompletion {
				t.Errorf("first request: temperature %v max_tokens %v max_completion_tokens %v, want %v %v %v",
					temp, maxTokens, completion, tc.wantTemp, tc.wantMaxTokens, tc.wantCompletion)
			}
			if len(bodies) != tc.requests {
				t.Errorf("%d requests to the answer, want %d", len(bodies), tc.requests)
			}
		})
	}
}
