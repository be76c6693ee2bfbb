package llm

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"

	"github.com/llmpipeline/pipeline/llm/batchtest"
	"github.com/llmpipeline/pipeline/llm/strict"
	"github.com/llmpipeline/pipeline/model"
)

// ticketSchema is the strict transform's own fixture: a schema as users
// write them (optional properties, keywords strict mode does not take, a
// oneOf union, a $defs entry, a property that takes null).
var ticketSchema = func() string {
	b, err := os.ReadFile("strict/testdata/ticket.schema.json")
	if err != nil {
		panic(err)
	}
	return string(b)
}()

// strictOpenAI answers chat completions as OpenAI does in strict mode: a
// schema that breaks its rules is refused with the API's 400; any other
// request is answered with content, and the request body is kept.
func strictOpenAI(t *testing.T, content string) (*httptest.Server, *[]map[string]any) {
	t.Helper()
	var seen []map[string]any
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		raw, _ := io.ReadAll(r.Body)
		var body map[string]any
		if err := json.Unmarshal(raw, &body); err != nil {
			http.Error(w, `{"error":{"message":"We could not parse the JSON body of your request.","type":"invalid_request_error","param":null,"code":null}}`, http.StatusBadRequest)
			return
		}
		seen = append(seen, body)
		if batchtest.StrictRefusal(w, body) {
			return
		}
		rep := openAIOK(content, "stop")
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, rep.body)
	}))
	t.Cleanup(srv.Close)
	return srv, &seen
}

// TestOpenAIJSONSchemaStrict: --response-format json_schema with a schema
// of optional properties and keywords strict mode refuses is answered
// (before, every call was a 400 request_error): the schema sent passes
// OpenAI's strict-mode rules, keeps the property order and the refused
// keywords in the descriptions, and the answer's nulls for optional
// properties that do not take null are dropped, others kept.
func TestOpenAIJSONSchemaStrict(t *testing.T) {
	answer := `{"subject":"Cannot log in <now>","customer":{"name":"Ana","plan":null,"site":null},"tags":null,"where":{"city":"Porto","zip":null},"due":null,"contact":null}`
	srv, seen := strictOpenAI(t, answer)
	o, err := NewOpenAI(Config{BaseURL: srv.URL, Model: "gpt-4o-mini", ResponseFormat: FormatJSONSchema})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := o.Complete(t.Context(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Content: "x"}}, Schema: json.RawMessage(ticketSchema), SchemaID: "ticket"})
	if err != nil {
		t.Fatalf("complete: %v", err)
	}
	want := `{"subject":"Cannot log in <now>","customer":{"name":"Ana"},"where":{"city":"Porto"},"due":null}`
	if resp.Content != want {
		t.Errorf("content\n got %s\nwant %s", resp.Content, want)
	}
	js := (*seen)[0]["response_format"].(map[string]any)["json_schema"].(map[string]any)
	if js["strict"] != true {
		t.Errorf("strict %v, want true", js["strict"])
	}
	sent, _ := json.Marshal(js["schema"])
	for _, s := range []string{`One-line summary.\n\n{\"minLength\":3,\"maxLength\":120}`, `{\"uniqueItems\":true}`, `{\"format\":\"uri\"}`} {
		if !strings.Contains(string(sent), s) {
			t.Errorf("sent schema lacks %s:\n%s", s, sent)
		}
	}
	// The order of the properties is the job's (the order strict answers are written in).
	raw := string(mustStrict(t, ticketSchema).JSON)
	if strings.Index(raw, `"subject"`) > strings.Index(raw, `"customer"`) || strings.Index(raw, `"customer"`) > strings.Index(raw, `"tags"`) {
		t.Errorf("property order lost: %s", raw)
	}
}

// TestStrictAnswersWrapper: an answer replayed from a batch (not read by
// Complete with its request) is mapped back by StrictAnswers; one mapped
// already is left as it is.
func TestStrictAnswersWrapper(t *testing.T) {
	inner := modelFunc(func(req model.Request) model.Response {
		return model.Response{Content: `{"subject":"abc","customer":{"name":"A","plan":null},"tags":null}`}
	})
	m := StrictAnswers(inner, ProviderOpenAI)
	req := model.Request{Schema: json.RawMessage(ticketSchema)}
	for range 2 {
		resp, err := m.Complete(t.Context(), req)
		if err != nil {
			t.Fatal(err)
		}
		if want := `{"subject":"abc","customer":{"name":"A"}}`; resp.Content != want {
			t.Errorf("got %s, want %s", resp.Content, want)
		}
		inner = modelFunc(func(model.Request) model.Response { return resp })
		m = StrictAnswers(inner, ProviderOpenAI)
	}
	if _, same := StrictAnswers(inner, ProviderAnthropic).(modelFunc); !same {
		t.Error("anthropic: want the model itself (its strict form keeps optional properties optional)")
	}
}

type modelFunc func(model.Request) model.Response

func (f modelFunc) Complete(_ context.Context, req model.Request) (model.Response, error) {
	return f(req), nil
}

// TestAnthropicJSONSchemaStructuredOutputs: json_schema asks Anthropic for
// structured outputs (output_config.format json_schema) with every object
// closed, required kept and the keywords it does not take described.
func TestAnthropicJSONSchemaStructuredOutputs(t *testing.T) {
	p := newProvider(t, anthropicOK(`{"subject":"abc","customer":{"name":"A"}}`, "end_turn"))
	a, err := NewAnthropic(Config{BaseURL: p.URL, APIKey: "sk-ant-test", Model: "claude-sonnet-4-5", ResponseFormat: FormatJSONSchema})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := a.Complete(t.Context(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Content: "x"}}, Schema: json.RawMessage(ticketSchema), SchemaID: "ticket"})
	if err != nil {
		t.Fatal(err)
	}
	if resp.Content != `{"subject":"abc","customer":{"name":"A"}}` {
		t.Errorf("content %s", resp.Content)
	}
	oc, ok := p.requests()[0].body["output_config"].(map[string]any)
	if !ok {
		t.Fatalf("no output_config in %s", p.requests()[0].raw)
	}
	f := oc["format"].(map[string]any)
	if f["type"] != "json_schema" {
		t.Errorf("format type %v", f["type"])
	}
	s := f["schema"].(map[string]any)
	cust := s["properties"].(map[string]any)["customer"].(map[string]any)
	if s["additionalProperties"] != false || cust["additionalProperties"] != false {
		t.Errorf("objects not closed: %v", s)
	}
	if r, _ := json.Marshal(cust["required"]); string(r) != `["name"]` {
		t.Errorf("customer required %s, want [\"name\"] (kept)", r)
	}
	subj := s["properties"].(map[string]any)["subject"].(map[string]any)
	if _, ok := subj["minLength"]; ok || !strings.Contains(subj["description"].(string), `"minLength":3`) {
		t.Errorf("subject %v: want minLength in the description", subj)
	}
}

// TestOpenAIStrictRefusedFallsBack: a strict form the API still refuses
// (a limit the transform cannot see) is not a dead letter for every job:
// the call goes again with the job's schema, strict false, and so does
// every later call of that schema.
func TestOpenAIStrictRefusedFallsBack(t *testing.T) {
	t.Parallel()
	refusal := openAIError(400, "invalid_request_error", "", "Invalid schema for response_format 'ticket': In context=('properties', 'code'), enum has too many values.")
	p := newProvider(t, refusal, openAIOK(`{"code":"a"}`, "stop"))
	o := newTestOpenAI(t, p.URL, func(c *Config) { c.ResponseFormat = FormatJSONSchema })
	schema := json.RawMessage(`{"type":"object","properties":{"code":{"type":"string","enum":["a","b"]}}}`)
	for call := 1; call <= 2; call++ {
		resp, err := o.Complete(t.Context(), model.Request{Messages: []model.Message{{Role: model.RoleUser, Content: "x"}}, Schema: schema, SchemaID: "ticket"})
		if err != nil || resp.Content != `{"code":"a"}` {
			t.Fatalf("call %d: %+v, %v", call, resp, err)
		}
	}
	reqs := p.requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3 (strict refused, then not strict twice)", len(reqs))
	}
	for i, r := range reqs {
		js := r.body["response_format"].(map[string]any)["json_schema"].(map[string]any)
		if js["strict"] != (i == 0) {
			t.Errorf("request %d: strict %v", i, js["strict"])
		}
		if i > 0 {
			if b, _ := json.Marshal(js["schema"]); string(b) != `{"properties":{"code":{"enum":["a","b"],"type":"string"}},"type":"object"}` {
				t.Errorf("request %d: schema %s, want the job's own", i, b)
			}
		}
	}
}

func mustStrict(t *testing.T, schema string) *strict.Schema {
	t.Helper()
	s := strict.Transform(strict.OpenAI, json.RawMessage(schema))
	if !s.Strict {
		t.Fatalf("no strict form: %s", s.Why)
	}
	return s
}
