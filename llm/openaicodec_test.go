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

// oldParseOpenAI is the response parsing as it was before the fast path:
// json.Unmarshal alone, into the response type as it was declared then.
// parseOpenAIResponse must behave exactly as it does.
func oldParseOpenAI(b []byte) (heal.Response, *failure) {
	var r struct {
		Choices []struct {
			Message struct {
				Content *string `json:"content"`
				Refusal *string `json:"refusal"`
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
		return heal.Response{}, &failure{kind: heal.KindTransport, status: http.StatusOK, message: "unreadable response body: " + truncate(string(b), 200)}
	}
	if len(r.Choices) == 0 {
		msg := "response has no choices"
		if r.Error != nil && r.Error.Message != "" {
			msg = r.Error.Message
		}
		return heal.Response{}, &failure{kind: heal.KindTransport, status: http.StatusOK, message: msg}
	}
	ch := r.Choices[0]
	var out heal.Response
	if ch.Message.Content != nil {
		out.Content = *ch.Message.Content
	} else if ch.Message.Refusal != nil {
		out.Content = *ch.Message.Refusal
	}
	if ch.FinishReason != nil {
		out.RawFinishReason = *ch.FinishReason
	}
	out.FinishReason = normaliseFinish(out.RawFinishReason)
	out.Usage = heal.Usage{
		PromptTokens:     r.Usage.PromptTokens,
		CompletionTokens: r.Usage.CompletionTokens,
		CachedTokens:     r.Usage.PromptTokensDetails.CachedTokens,
		ReasoningTokens:  r.Usage.CompletionTokensDetails.ReasoningTokens,
	}
	return out, nil
}

// benchrunBody is a response as scripts/benchrun's server writes it.
const benchrunBody = `{"id":"chatcmpl-answer-0","object":"chat.completion","created":1735689600,"model":"bench","choices":[{"index":0,"message":{"role":"assistant","content":"{\"invoice_number\":\"INV-1\",\"total\":12.5,\"note\":\"R\u0026D \\u00e9\"}"},"finish_reason":"stop"}],"usage":{"prompt_tokens":700,"completion_tokens":412,"total_tokens":1112}}`

// fastResponses are bodies the fast path must decode itself.
var fastResponses = []string{
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

// slowResponses are bodies the fast path must leave to encoding/json: it
// could not be sure of matching it (or encoding/json fails on them).
var slowResponses = []string{
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

func TestDecodeOpenAIResponse(t *testing.T) {
	t.Parallel()
	for _, body := range fastResponses {
		b := []byte(body)
		got, ok := decodeOpenAIResponse(b)
		if !ok {
			t.Errorf("fast path gave up on %s", body)
			continue
		}
		var want openAIResponse
		if err := json.Unmarshal(b, &want); err != nil {
			t.Fatalf("json.Unmarshal(%s): %v", body, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("%s:\nfast %+v\njson %+v", body, got, want)
		}
		checkParse(t, b)
	}
	for _, body := range slowResponses {
		b := []byte(body)
		if r, ok := decodeOpenAIResponse(b); ok {
			t.Errorf("fast path decoded %s: %+v", body, r)
		}
		checkParse(t, b)
	}
}

// checkParse holds parseOpenAIResponse to the parsing before the fast path.
func checkParse(t *testing.T, b []byte) {
	t.Helper()
	out, f := parseOpenAIResponse(b)
	wantOut, wantF := oldParseOpenAI(b)
	if !reflect.DeepEqual(out, wantOut) || !reflect.DeepEqual(f, wantF) {
		t.Fatalf("%q:\nparse %+v %+v\nold   %+v %+v", b, out, f, wantOut, wantF)
	}
}

func FuzzOpenAIResponseDecode(f *testing.F) {
	for _, s := range fastResponses {
		f.Add([]byte(s))
	}
	for _, s := range slowResponses {
		f.Add([]byte(s))
	}
	// Pieces for the places below: string contents and values.
	for _, s := range []string{
		`{\"a\": [1, \"\u00e9\ud800\ud83d\ude00\"]}\n\t\/`, "\xff\xfe\xe2\x80\xa8 \x7f", `\u12`,
		`{"prompt_tokens":12,"completion_tokens_details":{"reasoning_tokens":3}}`, `{"prompt_tokens":1,"Prompt_tokens":2}`,
		`{"content":"a","refusal":"b","extra":[{"k":"\u00e9"}]}`, `{"content":"a","content":"b"}`, `{"content":null,"refusal":"no"}`,
		`-12.5e+3`, `123456789012345678901234567890`, `[1,{"a":[]},"x",true,false,null]`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		// b, and b in the places of a canonical response (most of b alone
		// is not JSON, and the fast path gives up on it at once).
		for _, doc := range [][2]string{
			{"", ""},
			{`{"choices":[{"message":{"content":"`, `"},"finish_reason":"stop"}]}`},
			{`{"choices":[{"message":{"content":"x"},"finish_reason":"stop"}],"usage":`, `}`},
			{`{"choices":[{"message":`, `,"finish_reason":null}],"usage":{"prompt_tokens":1}}`},
			{`{"id":"c","choices":[{"index":0,"message":{"content":"x"},"logprobs":`, `}],"usage":{"prompt_tokens":1}}`},
		} {
			checkDecode(t, []byte(doc[0]+string(b)+doc[1]))
		}
	})
}

// checkDecode holds decodeOpenAIResponse to json.Unmarshal, and
// parseOpenAIResponse to the parsing before the fast path.
func checkDecode(t *testing.T, b []byte) {
	t.Helper()
	var want openAIResponse
	err := json.Unmarshal(b, &want)
	if got, ok := decodeOpenAIResponse(b); ok {
		if err != nil {
			t.Fatalf("fast path accepted %q, json.Unmarshal: %v", b, err)
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%q:\nfast %+v\njson %+v", b, got, want)
		}
	}
	checkParse(t, b)
}

// TestAppendOpenAIRequest checks the requests Complete sends.
func TestAppendOpenAIRequest(t *testing.T) {
	t.Parallel()
	req := testRequest()
	schema := &openAIJSONSchema{Name: "invoice", Schema: req.Schema, Strict: true}
	bodies := []openAIRequest{
		{Model: "gpt-4o-mini", Messages: req.Messages, Temperature: 0.5},
		{Model: "gpt-4o-mini", Messages: req.Messages, Temperature: 0.7, MaxTokens: 2048, Format: &openAIFormat{Type: "json_object"}},
		{Model: "m", Messages: req.Messages, Temperature: 1e-7, MaxTokens: -1, Format: &openAIFormat{Type: "json_schema", JSONSchema: schema}},
		{Model: "m", Temperature: -0.0, Format: &openAIFormat{Type: "json_schema", JSONSchema: &openAIJSONSchema{Name: "x", Schema: json.RawMessage(" {\"a\" : [ 1 , \"<b>&\u2028\" ] }\n")}}},
		{Model: "m", Messages: []heal.Message{}, Temperature: 1e21, Format: &openAIFormat{JSONSchema: &openAIJSONSchema{}}},
		{Model: "<\xff>", Messages: []heal.Message{{Role: "\u2029", Content: "\x00\x1f\"\\"}}, Temperature: 123456789.125},
	}
	for _, body := range bodies {
		want, err := json.Marshal(body)
		if err != nil {
			t.Fatal(err)
		}
		got, ok := appendOpenAIRequest([]byte("x"), &body)
		if !ok || string(got) != "x"+string(want) {
			t.Errorf("appendOpenAIRequest = %s, %v\n          json.Marshal %s", got, ok, want)
		}
	}
	// What json.Marshal refuses is left to it, for its error.
	for _, body := range []openAIRequest{
		{Temperature: math.NaN()},
		{Temperature: math.Inf(-1)},
		{Format: &openAIFormat{JSONSchema: &openAIJSONSchema{Schema: json.RawMessage(`{"a":}`)}}},
		{Format: &openAIFormat{JSONSchema: &openAIJSONSchema{Schema: json.RawMessage{}}}},
		{Format: &openAIFormat{JSONSchema: &openAIJSONSchema{Schema: json.RawMessage(`1 2`)}}},
	} {
		if _, err := json.Marshal(body); err == nil {
			t.Fatalf("json.Marshal(%+v) did not fail", body)
		}
		if got, ok := appendOpenAIRequest([]byte("x"), &body); ok || string(got) != "x" {
			t.Errorf("appendOpenAIRequest(%+v) = %s, %v", body, got, ok)
		}
	}
}

// TestSystemTurns checks that turns sharing a slot of systemTurns (the same
// length) are each encoded as they are.
func TestSystemTurns(t *testing.T) {
	t.Parallel()
	turns := []string{strings.Repeat("a", 40) + "<x>", strings.Repeat("b", 40) + "\"y\"", strings.Repeat("a", 40) + "<x>"}
	for range 3 {
		for _, s := range turns {
			body := openAIRequest{Model: "m", Messages: []heal.Message{{Role: heal.RoleSystem, Content: s}, {Role: heal.RoleUser, Content: s}}}
			want, _ := json.Marshal(body)
			if got, ok := appendOpenAIRequest(nil, &body); !ok || !bytes.Equal(got, want) {
				t.Fatalf("appendOpenAIRequest = %s, %v, want %s", got, ok, want)
			}
		}
	}
}

func FuzzOpenAIRequestEncode(f *testing.F) {
	req := testRequest()
	f.Add("gpt-4o-mini", "system", req.Messages[0].Content, "user", req.Messages[1].Content, uint8(3), 0.7, 0, uint8(1), "json_object", "", []byte(nil), true)
	f.Add("m", "assistant", `{"total": "12,50"} <a href="x">&amp;</a>`, "user", "\u2028\u2029\xff\xe2\x80", uint8(3), 1e-7, 4096, uint8(2), "json_schema", "invoice", []byte(req.Schema), true)
	f.Add("", "", "", "", "", uint8(0), math.Inf(1), -1, uint8(2), "", "", []byte(" {\"a\" : [1, 2.5e-3, true, null, \"<\xe2\x80\xa8>\"]}\t"), false)
	f.Add("m", "user", "x", "user", "y", uint8(1), math.NaN(), 1, uint8(3), "t", "n", []byte(`{"a":}`), true)
	f.Add("m", "user", "\x00\x7f\x1b", "user", "y", uint8(2), -123456789e30, 0, uint8(2), "t", "n", []byte(`"\u00zz"`), false)
	f.Add("m", "user", "x", "user", "y", uint8(2), 5e-324, 0, uint8(2), "t", "n", []byte(""), false)
	f.Fuzz(func(t *testing.T, model, role1, content1, role2, content2 string, nmsgs uint8, temp float64, maxTokens int,
		format uint8, typ, name string, schema []byte, strict bool) {
		body := openAIRequest{Model: model, Temperature: temp, MaxTokens: maxTokens}
		if nmsgs&4 != 0 {
			role1 = heal.RoleSystem // through systemTurns
		}
		switch nmsgs % 4 {
		case 1:
			body.Messages = []heal.Message{}
		case 2:
			body.Messages = []heal.Message{{Role: role1, Content: content1}}
		case 3:
			body.Messages = []heal.Message{{Role: role1, Content: content1}, {Role: role2, Content: content2}}
		}
		switch format % 4 {
		case 1:
			body.Format = &openAIFormat{Type: typ}
		case 2:
			body.Format = &openAIFormat{Type: typ, JSONSchema: &openAIJSONSchema{Name: name, Schema: schema, Strict: strict}}
		case 3:
			body.Format = &openAIFormat{Type: typ, JSONSchema: &openAIJSONSchema{Name: name, Strict: strict}}
		}
		want, err := json.Marshal(body)
		got, ok := appendOpenAIRequest([]byte("x"), &body)
		if again, ok2 := appendOpenAIRequest([]byte("x"), &body); ok2 != ok || !bytes.Equal(again, got) {
			t.Fatalf("a second encoding differs: %q, %v; first %q, %v", again, ok2, got, ok)
		}
		switch {
		case err != nil:
			if ok || string(got) != "x" {
				t.Fatalf("json.Marshal fails (%v), appendOpenAIRequest wrote %q", err, got)
			}
		case !ok:
			// Only nesting deeper than the scanner follows may be left
			// to json.Marshal when it succeeds.
			if format%4 != 2 || nesting(schema) < scanDepth {
				t.Fatalf("appendOpenAIRequest gave up on %+v; json.Marshal wrote %q", body, want)
			}
		case !bytes.Equal(got[1:], want):
			t.Fatalf("appendOpenAIRequest wrote\n%q\njson.Marshal\n%q", got[1:], want)
		}
	})
}

// nesting is the deepest nesting of arrays and objects in JSON text.
func nesting(b []byte) int {
	depth, deepest, inString := 0, 0, false
	for i := 0; i < len(b); i++ {
		switch c := b[i]; {
		case inString && c == '\\':
			i++
		case c == '"':
			inString = !inString
		case inString:
		case c == '{' || c == '[':
			depth++
			deepest = max(deepest, depth)
		case c == '}' || c == ']':
			depth--
		}
	}
	return deepest
}

// TestOpenAICompleteFallbacks goes through Complete where the hand codec
// gives up, and where it must do as json.Marshal does: a NaN temperature is
// still json.Marshal's request error (and nothing is sent), a schema with
// whitespace is sent compacted and HTML-escaped, and a response with a
// differently cased key is still read by encoding/json.
func TestOpenAICompleteFallbacks(t *testing.T) {
	t.Parallel()
	p := newProvider(t, reply{status: 200, body: `{"Choices":[{"message":{"content":"{}"},"finish_reason":"stop"}]}`})
	o := newTestOpenAI(t, p.URL, func(c *Config) { c.ResponseFormat = FormatJSONSchema })
	req := testRequest()
	req.Temperature = math.NaN()
	_, err := o.Complete(t.Context(), req)
	var he *heal.Error
	if !errors.As(err, &he) || he.Kind != heal.KindRequest || he.Message != "encoding the request: json: unsupported value: NaN" {
		t.Fatalf("NaN temperature: %v", err)
	}
	if n := len(p.requests()); n != 0 {
		t.Fatalf("%d requests sent", n)
	}
	req = testRequest()
	req.Schema = json.RawMessage("{\n  \"type\": \"object\",\n  \"description\": \"<b>&</b>\"\n}\n")
	resp, err := o.Complete(t.Context(), req)
	if err != nil || resp.Content != "{}" || resp.FinishReason != heal.FinishStop {
		t.Fatalf("Complete = %+v, %v", resp, err)
	}
	if raw, want := p.requests()[0].raw, `"schema":{"type":"object","description":"\u003cb\u003e\u0026\u003c/b\u003e"}`; !bytes.Contains(raw, []byte(want)) {
		t.Fatalf("sent %s, want it to hold %s", raw, want)
	}
}
