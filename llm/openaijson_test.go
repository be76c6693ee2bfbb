package llm

import (
	"bytes"
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"reflect"
	"strings"
	"testing"

	"github.com/llmpipeline/pipeline/heal"
)

// oldParseOpenAI is the response parsing with encoding/json, into the
// response type as declared for it. parseOpenAIResponse must behave
// exactly as it does.
func oldParseOpenAI(b []byte) (model.Response, *failure) {
	var r struct {
		Choices []struct {
			Message struct {
				Content   openAIContent `json:"content"`
				Refusal   *string       `json:"refusal"`
				ToolCalls []struct {
					ID       string `json:"id"`
					Function struct {
						Arguments string `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"message"`
			FinishReason *string `json:"finish_reason"`
		} `json:"choices"`
		Usage struct {
			PromptTokens        int `json:"prompt_tokens"`
			CompletionTokens    int `json:"completion_tokens"`
			PromptTokensDetails struct {
				CachedTokens int `json:"cached_tokens"`
			} `json:"prompt_tokens_details"`
			CompletionTokensDetails struct {
				ReasoningTokens int `json:"reasoning_tokens"`
			} `json:"completion_tokens_details"`
		} `json:"usage"`
		Error *struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &r); err != nil {
		return model.Response{}, &failure{kind: model.KindTransport, status: http.StatusOK, message: "unreadable response body: " + truncate(string(b), 200)}
	}
	if len(r.Choices) == 0 {
		msg := "response has no choices"
		if r.Error != nil && r.Error.Message != "" {
			msg = r.Error.Message
		}
		return model.Response{}, &failure{kind: model.KindTransport, status: http.StatusOK, message: msg}
	}
	ch := r.Choices[0]
	var out model.Response
	out.Content = string(ch.Message.Content)
	if len(ch.Message.ToolCalls) > 0 {
		out.Content, out.ToolCallID = ch.Message.ToolCalls[0].Function.Arguments, ch.Message.ToolCalls[0].ID
	}
	if ch.Message.Refusal != nil {
		out.Refusal = *ch.Message.Refusal
	}
	if ch.FinishReason != nil {
		out.RawFinishReason = *ch.FinishReason
	}
	out.FinishReason = finishOf(out.RawFinishReason)
	out.Usage = model.Usage{
		PromptTokens:     r.Usage.PromptTokens,
		CompletionTokens: r.Usage.CompletionTokens,
		CachedTokens:     r.Usage.PromptTokensDetails.CachedTokens,
		ReasoningTokens:  r.Usage.CompletionTokensDetails.ReasoningTokens,
	}
	return out, nil
}

// benchrunBody is a response as scripts/benchrun's server writes it.
const benchrunBody = `{"id":"chatcmpl-answer-0","object":"chat.completion","created":1735689600,"model":"bench","choices":[{"index":0,"message":{"role":"assistant","content":"{\"invoice_number\":\"INV-1\",\"total\":12.5,\"note\":\"R\u0026D \\u00e9\"}"},"finish_reason":"stop"}],"usage":{"prompt_tokens":700,"completion_tokens":412,"total_tokens":1112}}`

// wellFormed are bodies real servers send, and odd but valid ones:
// pretty-printed, unknown members, null content with a refusal, tool_calls,
// logprobs, cached tokens.
var wellFormed = []string{
	benchrunBody,
	openAIOK(`{"invoice_number": "INV-1", "total": 12.5}`, "stop").body,
	openAIOK("café ✓ \u2028 \U0001F600 <&>", "length").body,
	`{"choices":[{"message":{"content":null,"refusal":"I can't help with that."},"finish_reason":"stop"}]}`,
	`{"choices":[],"error":{"message":"overloaded","type":"server_error","code":null}}`,
	`{"choices":null,"usage":null,"error":null}`,
	`{"choices":[null,{"message":null,"finish_reason":null}]}`,
	`{"choices":[{"message":{"content":"a"},"finish_reason":"stop"},{"message":{"content":"b","tool_calls":[{"id":"x","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"length"}]}`,
	`{"x":"` + "\xff\xfe" + `","choices":[{"message":{"content":"\ud83d\ude00 \ud800 \u00e9\/\b\f\n\r\t"},"finish_reason":"stop","logprobs":{"content":[{"token":"a","logprob":-0.5e-3,"bytes":[97]}]}}]}`,
	` { "choices" : [ { "message" : { "content" : "x" } } ] , "usage" : { "prompt_tokens" : -0 , "completion_tokens" : 9223372036854775807 , "prompt_tokens_details" : { "cached_tokens" : 3 } , "completion_tokens_details" : { "reasoning_tokens" : null } } } `,
	`{}`,
	`{"error":{"message":"bad gateway"}}`,
	`{"Choices_":1,"usage_x":[true,false,null,{}],"errors":{"message":1}}`,
}

// unusual are bodies where encoding/json has its own say: case-folded and
// duplicate names, numbers that do not fit, wrong types, invalid UTF-8,
// bodies that are not JSON.
var unusual = []string{
	`{"Choices":[{"message":{"content":"x"}}]}`,
	`{"choices":[{"Message":{"content":"x"}}]}`,
	`{"choices":[{"message":{"CONTENT":"x"}}]}`,
	`{"choices":[{"message":{"content":"x"}}],"usage":{"Prompt_Tokens":1}}`,
	`{"choices":[{"message":{"content":"x"}}],"choices":[]}`,
	`{"choices":[{"message":{"content":"x","content":"y"}}]}`,
	`{"choices":[{"message":{"content":"x"},"finish_reason":"stop","finish_reason":null}]}`,
	`{"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":1.0}}`,
	`{"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":1e2}}`,
	`{"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":9223372036854775808}}`,
	`{"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":"1"}}`,
	`{"choices":[{"message":{"content":1}}]}`,
	`{"choices":[{"message":{"content":[{"type":"text","text":"a"},{"type":"image_url","text":"b"},{"text":"c"},{"type":"text"}]}}]}`,
	`{"choices":[{"message":{"content":[{"type":"text","text":1}]}}]}`,
	`{"choices":[{"message":{"content":[1]}}]}`,
	`{"choices":[{"message":{"content":{"type":"text","text":"a"}}}]}`,
	`{"choices":[{"message":{"content":[{"TYPE":"text","Text":"a"}]}}]}`,
	`{"choices":[{"message":{"content":"x"}},{"message":{"content":1}}]}`,
	`{"choices":[{"message":{"content":"x"},"finish_reason":false}]}`,
	`{"choices":{}}`,
	`{"choices":[],"error":"overloaded"}`,
	`{"choices":[{"message":{"content":"` + "\xff" + `"}}]}`,
	`{"choices":[{"message":{"content":"x"}}]}x`,
	`{"choices":[{"message":{"content":"x"}}],}`,
	`{"choices":[{"message":{"content":"a` + "\n" + `"}}]}`,
	`{"choices":[{"message":{"content":"\x"}}]}`,
	`{"ch\u006fices":[{"message":{"content":"x"}}]}`,
	`{"choiceſ":[{"message":{"content":"x"}}]}`,
	`{"x":01}`,
	`{"x":[1,]}`,
	`null`,
	`[]`,
	``,
	`{"choices":[{"message":{"content":"x"}}],"x":` + strings.Repeat("[", 200) + strings.Repeat("]", 200) + `}`,
}

// TestParseOpenAIResponse holds parseOpenAIResponse to encoding/json on
// every body, and checks what it reads from the usual ones.
func TestParseOpenAIResponse(t *testing.T) {
	t.Parallel()
	for _, body := range append(append([]string(nil), wellFormed...), unusual...) {
		checkParse(t, []byte(body))
	}
	for _, tt := range []struct {
		name, body string
		want       model.Response
	}{
		{"pretty", "{\n  \"choices\": [\n    {\n      \"message\": {\"role\": \"assistant\", \"content\": \"{}\"},\n      \"finish_reason\": \"stop\"\n    }\n  ]\n}\n",
			model.Response{Content: "{}", FinishReason: model.FinishStop, RawFinishReason: "stop"}},
		{"refusal", `{"choices":[{"message":{"content":null,"refusal":"I can't help with that."},"finish_reason":"stop"}]}`,
			model.Response{Refusal: "I can't help with that.", FinishReason: model.FinishStop, RawFinishReason: "stop"}},
		{"tool calls", `{"choices":[{"message":{"content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"tool_calls"}]}`,
			model.Response{Content: "{}", ToolCallID: "call_1", FinishReason: model.FinishStop, RawFinishReason: "tool_calls"}},
		{"content as parts (Mistral reasoning models)", `{"choices":[{"message":{"role":"assistant","content":[{"type":"thinking","thinking":[{"type":"text","text":"The total is {12}."}]},{"type":"text","text":"{\"total\":"},{"type":"text","text":"12}"}]},"finish_reason":"stop"}]}`,
			model.Response{Content: `{"total":12}`, FinishReason: model.FinishStop, RawFinishReason: "stop"}},
		{"empty parts", `{"choices":[{"message":{"content":[]},"finish_reason":"stop"}]}`,
			model.Response{FinishReason: model.FinishStop, RawFinishReason: "stop"}},
		{"usage", openAIOK("x", "length").body,
			model.Response{Content: "x", FinishReason: model.FinishLength, RawFinishReason: "length",
				Usage: model.Usage{PromptTokens: 120, CompletionTokens: 40, CachedTokens: 64, ReasoningTokens: 8}}},
	} {
		got, f := parseOpenAIResponse([]byte(tt.body))
		if f != nil || !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: parse = %+v, %+v; want %+v", tt.name, got, f, tt.want)
		}
	}
}

// checkParse holds parseOpenAIResponse to the parsing with encoding/json.
func checkParse(t *testing.T, b []byte) {
	t.Helper()
	out, f := parseOpenAIResponse(b)
	wantOut, wantF := oldParseOpenAI(b)
	if !reflect.DeepEqual(out, wantOut) || !reflect.DeepEqual(f, wantF) {
		t.Errorf("%q:\nparse %+v %+v\nold   %+v %+v", b, out, f, wantOut, wantF)
	}
}

// TestEncodeOpenAIRequest checks that the requests Complete sends are
// byte for byte what json.Marshal writes, and that what json.Marshal
// refuses is refused.
func TestEncodeOpenAIRequest(t *testing.T) {
	t.Parallel()
	req := testRequest()
	schema := &openAIJSONSchema{Name: "invoice", Schema: req.Schema, Strict: true}
	bodies := []openAIRequest{
		{Model: "gpt-4o-mini", Messages: req.Messages, Temperature: new(0.5)},
		{Model: "gpt-4o-mini", Messages: req.Messages, Temperature: new(0.7), MaxTokens: 2048, Format: &openAIFormat{Type: "json_object"}},
		{Model: "m", Messages: req.Messages, Temperature: new(1e-7), MaxTokens: -1, Format: &openAIFormat{Type: "json_schema", JSONSchema: schema}},
		{Model: "m", Temperature: new(math.Copysign(0, -1)), Format: &openAIFormat{Type: "json_schema", JSONSchema: &openAIJSONSchema{Name: "x", Schema: json.RawMessage(" {\"a\" : [ 1 , \"<b>&\u2028\" ] }\n")}}},
		{Model: "m", Messages: []model.Message{}, Temperature: new(1e21), Format: &openAIFormat{JSONSchema: &openAIJSONSchema{}}},
		{Model: "<\xff>", Messages: []model.Message{{Role: "\u2029", Content: "\x00\x1f\"\\"}}, Temperature: new(123456789.125)},
	}
	for _, body := range bodies {
		want, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		got, err := encodeOpenAIRequest(&body)
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("encodeOpenAIRequest = %s, %v\n        json.Marshal %s", got, err, want)
		}
	}
	for _, body := range []openAIRequest{
		{Temperature: new(math.NaN())},
		{Temperature: new(math.Inf(-1))},
		{Format: &openAIFormat{JSONSchema: &openAIJSONSchema{Schema: json.RawMessage(`{"a":}`)}}},
		{Format: &openAIFormat{JSONSchema: &openAIJSONSchema{Schema: json.RawMessage{}}}},
		{Format: &openAIFormat{JSONSchema: &openAIJSONSchema{Schema: json.RawMessage(`1 2`)}}},
	} {
		if _, err := json.Marshal(body); err == nil {
			t.Fatalf("json.Marshal(%+v) did not fail", body)
		}
		if got, err := encodeOpenAIRequest(&body); err == nil {
			t.Errorf("encodeOpenAIRequest(%+v) = %s, want an error", body, got)
		}
	}
}

// TestOpenAICompleteOddValues goes through Complete where the codec must do
// as encoding/json does: a NaN temperature is a request error (and nothing
// is sent), a schema with whitespace is sent compacted and HTML-escaped,
// and a response with a differently cased key is still read.
func TestOpenAICompleteOddValues(t *testing.T) {
	t.Parallel()
	p := newProvider(t, reply{status: 200, body: `{"Choices":[{"message":{"content":"{}"},"finish_reason":"stop"}]}`})
	o := newTestOpenAI(t, p.URL, func(c *Config) { c.ResponseFormat = FormatJSONSchema })
	req := testRequest()
	req.Temperature = math.NaN()
	_, err := o.Complete(t.Context(), req)
	var he *model.Error
	if !errors.As(err, &he) || he.Kind != model.KindRequest || he.Message != "encoding the request: json: unsupported value: NaN" {
		t.Fatalf("NaN temperature: %v", err)
	}
	if n := len(p.requests()); n != 0 {
		t.Fatalf("%d requests sent", n)
	}
	req = testRequest()
	req.Schema = json.RawMessage("{\n  \"type\": \"object\",\n  \"description\": \"<b>&</b>\"\n}\n")
	resp, err := o.Complete(t.Context(), req)
	if err != nil || resp.Content != "{}" || resp.FinishReason != model.FinishStop {
		t.Fatalf("Complete = %+v, %v", resp, err)
	}
	if raw, want := p.requests()[0].raw, `"schema":{"type":"object","description":"\u003cb\u003e\u0026\u003c/b\u003e","properties":{},"required":[],"additionalProperties":false}`; !bytes.Contains(raw, []byte(want)) {
		t.Fatalf("sent %s, want it to hold %s", raw, want)
	}
}
