package llm

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"image"
	"image/color"
	"image/png"
	"io"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/llmpipeline/pipeline/model"
)

// testPNG is a small real PNG (a 40x30 receipt-ish image).
func testPNG(t testing.TB) []byte {
	t.Helper()
	img := image.NewRGBA(image.Rect(0, 0, 40, 30))
	for x := range 40 {
		img.Set(x, 10, color.Black)
	}
	var b bytes.Buffer
	if err := png.Encode(&b, img); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// testPDF is a one-page PDF, n bytes of filler at least.
func testPDF(n int) []byte {
	var b bytes.Buffer
	b.WriteString("%PDF-1.4\n1 0 obj << /Type /Catalog /Pages 2 0 R >> endobj\n2 0 obj << /Type /Pages /Kids [3 0 R] /Count 1 >> endobj\n3 0 obj << /Type /Page /Parent 2 0 R >> endobj\n")
	for b.Len() < n {
		b.WriteString("% receipt total 12.50 EUR filler line\n")
	}
	b.WriteString("%%EOF\n")
	return b.Bytes()
}

// memFile is a model.File over bytes, counting its opens.
func memFile(name, mediaType string, data []byte, opens *atomic.Int32) model.File {
	return model.File{Name: name, MediaType: mediaType, Size: int64(len(data)), SHA256: "test",
		Open: func(context.Context) (io.ReadCloser, error) {
			if opens != nil {
				opens.Add(1)
			}
			return io.NopCloser(bytes.NewReader(data)), nil
		}}
}

// fileConversation is a task turn with a PNG and a PDF, an answer and a
// heal turn (as tool call turns when tool is set).
func fileConversation(png, pdf []byte, opens *atomic.Int32, tool bool) model.Request {
	req := testRequest()
	req.Messages[1].Files = []model.File{memFile("receipt.png", "image/png", png, opens), memFile("scan.pdf", "application/pdf", pdf, opens)}
	if tool {
		req.Messages[2].ToolCallID, req.Messages[3].ToolCallID = "call_1", "call_1"
	}
	return req
}

// The chat completions request's messages as the OpenAI API reads them
// (openai-openapi: ChatCompletionRequestUserMessage's content is a string
// or an array of ChatCompletionRequestMessageContentPartText |
// ...PartImage {"image_url": {"url", "detail"}} | ...PartFile {"file":
// {"filename", "file_data", "file_id"}}).
type openAISpecRequest struct {
	Messages []struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		ToolCallID string          `json:"tool_call_id"`
		ToolCalls  []struct {
			ID string `json:"id"`
		} `json:"tool_calls"`
	} `json:"messages"`
	ResponseFormat *struct {
		Type string `json:"type"`
	} `json:"response_format"`
	Tools []json.RawMessage `json:"tools"`
}

type openAISpecPart struct {
	Type     string `json:"type"`
	Text     string `json:"text"`
	ImageURL *struct {
		URL    string `json:"url"`
		Detail string `json:"detail"`
	} `json:"image_url"`
	File *struct {
		Filename string `json:"filename"`
		FileData string `json:"file_data"`
		FileID   string `json:"file_id"`
	} `json:"file"`
}

// strictDecode decodes b into v refusing members the type does not know.
func strictDecode(t *testing.T, b []byte, v any) {
	t.Helper()
	d := json.NewDecoder(bytes.NewReader(b))
	d.DisallowUnknownFields()
	if err := d.Decode(v); err != nil {
		t.Fatalf("decoding %s: %v", truncate(string(b), 300), err)
	}
}

func dataURL(mediaType string, b []byte) string {
	return "data:" + mediaType + ";base64," + base64.StdEncoding.EncodeToString(b)
}

func TestFilesOpenAIParts(t *testing.T) {
	png, pdf := testPNG(t), testPDF(5000)
	for _, format := range []string{FormatJSONObject, FormatJSONSchema, FormatTool} {
		t.Run(format, func(t *testing.T) {
			p := newProvider(t, openAIOK(`{"total": 12.5}`, "stop"))
			o := newTestOpenAI(t, p.URL, func(c *Config) { c.ResponseFormat = format })
			var opens atomic.Int32
			req := fileConversation(png, pdf, &opens, format == FormatTool)
			if _, err := o.Complete(t.Context(), req); err != nil {
				t.Fatal(err)
			}
			raw := p.requests()[0].raw
			var body openAISpecRequest
			if err := json.Unmarshal(raw, &body); err != nil {
				t.Fatal(err)
			}
			if len(body.Messages) != 4 {
				t.Fatalf("%d messages, want 4", len(body.Messages))
			}
			// Byte for byte, as the API documents the parts.
			for _, part := range []string{
				`{"type":"image_url","image_url":{"url":"` + dataURL("image/png", png) + `"}}`,
				`{"type":"file","file":{"filename":"scan.pdf","file_data":"` + dataURL("application/pdf", pdf) + `"}}`,
			} {
				if !bytes.Contains(raw, []byte(part)) {
					t.Errorf("the request lacks the part %s", truncate(part, 120))
				}
			}
			var parts []openAISpecPart
			strictDecode(t, body.Messages[1].Content, &parts)
			if len(parts) != 3 {
				t.Fatalf("user turn has %d parts, want image, file, text: %s", len(parts), truncate(string(body.Messages[1].Content), 300))
			}
			if parts[0].Type != "image_url" || parts[0].ImageURL == nil || parts[0].ImageURL.URL != dataURL("image/png", png) {
				t.Errorf("part 0 is not the PNG as an image_url data URL: %+v", parts[0].Type)
			}
			if parts[1].Type != "file" || parts[1].File == nil || parts[1].File.Filename != "scan.pdf" || parts[1].File.FileData != dataURL("application/pdf", pdf) {
				t.Errorf("part 1 is not the PDF as a file part with file_data: %+v", parts[1].Type)
			}
			if parts[2].Type != "text" || parts[2].Text != req.Messages[1].Content {
				t.Errorf("part 2 is not the task text after the files: %+v", parts[2])
			}
			// The heal turns are sent as they are without files.
			var feedback string
			if format == FormatTool {
				if len(body.Messages[2].ToolCalls) != 1 || body.Messages[3].Role != "tool" || body.Messages[3].ToolCallID != "call_1" {
					t.Errorf("tool turns not in the tool-call shape: %s", raw[:min(len(raw), 0)])
				}
				if len(body.Tools) != 1 {
					t.Errorf("tool mode sent %d tools", len(body.Tools))
				}
			}
			if err := json.Unmarshal(body.Messages[3].Content, &feedback); err != nil || feedback != req.Messages[3].Content {
				t.Errorf("heal turn content = %s, want the feedback string", body.Messages[3].Content)
			}
			if format == FormatJSONSchema && (body.ResponseFormat == nil || body.ResponseFormat.Type != "json_schema") {
				t.Errorf("json_schema mode lost its response_format with files")
			}
			if n := opens.Load(); n != 2 {
				t.Errorf("files opened %d times for one call, want 2 (once each)", n)
			}
		})
	}
}

// The Messages API's request as the Anthropic SDK types it: a user turn's
// content is a string or blocks, ImageBlockParam {"type":"image","source":
// Base64ImageSource {"type":"base64","media_type","data"}} and
// DocumentBlockParam {"type":"document","source": Base64PDFSource
// {"type":"base64","media_type":"application/pdf","data"}}.
type anthropicSpecRequest struct {
	Messages []struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	Tools        []json.RawMessage `json:"tools"`
	OutputConfig json.RawMessage   `json:"output_config"`
}

type anthropicSpecBlock struct {
	Type   string `json:"type"`
	Text   string `json:"text"`
	Source *struct {
		Type      string `json:"type"`
		MediaType string `json:"media_type"`
		Data      string `json:"data"`
	} `json:"source"`
	ID           string          `json:"id"`
	Name         string          `json:"name"`
	Input        json.RawMessage `json:"input"`
	ToolUseID    string          `json:"tool_use_id"`
	Content      json.RawMessage `json:"content"`
	IsError      bool            `json:"is_error"`
	CacheControl json.RawMessage `json:"cache_control"`
}

func TestFilesAnthropicBlocks(t *testing.T) {
	png, pdf := testPNG(t), testPDF(5000)
	for _, format := range []string{"", FormatJSONSchema, FormatTool} {
		t.Run("format="+format, func(t *testing.T) {
			p := newProvider(t, anthropicOK(`{"total": 12.5}`, "end_turn"))
			a := newTestAnthropic(t, p.URL, func(c *Config) { c.ResponseFormat = format })
			req := fileConversation(png, pdf, nil, format == FormatTool)
			if _, err := a.Complete(t.Context(), req); err != nil {
				t.Fatal(err)
			}
			var body anthropicSpecRequest
			if err := json.Unmarshal(p.requests()[0].raw, &body); err != nil {
				t.Fatal(err)
			}
			if len(body.Messages) != 3 || body.Messages[0].Role != "user" {
				t.Fatalf("%d messages, want user, assistant, user", len(body.Messages))
			}
			raw := p.requests()[0].raw
			for _, block := range []string{
				`{"type":"image","source":{"type":"base64","media_type":"image/png","data":"` + base64.StdEncoding.EncodeToString(png) + `"}}`,
				`{"type":"document","source":{"type":"base64","media_type":"application/pdf","data":"` + base64.StdEncoding.EncodeToString(pdf) + `"}}`,
			} {
				if !bytes.Contains(raw, []byte(block)) {
					t.Errorf("the request lacks the block %s", truncate(block, 120))
				}
			}
			var blocks []anthropicSpecBlock
			strictDecode(t, body.Messages[0].Content, &blocks)
			if len(blocks) != 3 {
				t.Fatalf("user turn has %d blocks, want image, document, text", len(blocks))
			}
			img, doc := blocks[0], blocks[1]
			if img.Type != "image" || img.Source == nil || img.Source.Type != "base64" || img.Source.MediaType != "image/png" || img.Source.Data != base64.StdEncoding.EncodeToString(png) {
				t.Errorf("block 0 is not the PNG as a base64 image block")
			}
			if doc.Type != "document" || doc.Source == nil || doc.Source.Type != "base64" || doc.Source.MediaType != "application/pdf" || doc.Source.Data != base64.StdEncoding.EncodeToString(pdf) {
				t.Errorf("block 1 is not the PDF as a base64 document block")
			}
			if blocks[2].Type != "text" || blocks[2].Text != req.Messages[1].Content {
				t.Errorf("block 2 is not the task text after the files: %+v", blocks[2])
			}
			var last []anthropicSpecBlock
			if err := json.Unmarshal(body.Messages[2].Content, &last); err == nil && len(last) == 1 && last[0].Source != nil {
				t.Errorf("the heal turn carries a file again")
			}
			if format == FormatTool && (len(body.Tools) != 1 || !bytes.Contains(body.Messages[1].Content, []byte(`"tool_use"`))) {
				t.Errorf("tool mode lost its tool or tool_use turn with files")
			}
			if format == FormatJSONSchema && len(body.OutputConfig) == 0 {
				t.Errorf("json_schema mode lost output_config with files")
			}
		})
	}
}

// A transport retry sends the files again, read again from their store.
func TestFilesRetryReadsAgain(t *testing.T) {
	png := testPNG(t)
	p := newProvider(t, reply{status: 503, body: `{"error":{"message":"overloaded"}}`}, openAIOK(`{"total": 1}`, "stop"))
	o := newTestOpenAI(t, p.URL, nil)
	var opens atomic.Int32
	req := testRequest()
	req.Messages[1].Files = []model.File{memFile("r.png", "image/png", png, &opens)}
	if _, err := o.Complete(t.Context(), req); err != nil {
		t.Fatal(err)
	}
	reqs := p.requests()
	if len(reqs) != 2 || opens.Load() != 2 {
		t.Fatalf("%d requests, %d opens; want 2 and 2", len(reqs), opens.Load())
	}
	for i, r := range reqs {
		if !bytes.Contains(r.raw, []byte(dataURL("image/png", png))) {
			t.Errorf("request %d lacks the image", i)
		}
	}
}

// A file whose store gives other bytes than announced never goes out as
// a request the provider answers.
func TestFilesShortFileFails(t *testing.T) {
	p := newProvider(t, openAIOK(`{"total": 1}`, "stop"))
	o := newTestOpenAI(t, p.URL, nil)
	f := memFile("r.png", "image/png", testPNG(t), nil)
	f.Size += 10
	req := testRequest()
	req.Messages[1].Files = []model.File{f}
	_, err := o.Complete(t.Context(), req)
	if err == nil || !strings.Contains(err.Error(), "r.png") {
		t.Fatalf("Complete = %v, want an error naming the file", err)
	}
	var he *model.Error
	if !errors.As(err, &he) || he.Kind != model.KindRequest {
		t.Errorf("Complete = %v, want a request error (not retried)", err)
	}
	for _, r := range p.requests() {
		if json.Valid(r.raw) {
			t.Errorf("the provider got a whole request with a short file")
		}
	}
	if n := len(p.requests()); n > 1 {
		t.Errorf("a short file was sent %d times, want once at most", n)
	}
}

// Batch mode: the batch lines carry the files in the same native form as
// the synchronous calls, and their sizes (what the batches are cut by,
// within the providers' per-batch limits) count them.
func TestFilesInBatchLines(t *testing.T) {
	png, pdf := testPNG(t), testPDF(20000)
	req := fileConversation(png, pdf, nil, false)
	br := BatchRequest{CustomID: "inv-0001~a1", Request: req}

	ob, err := NewOpenAIBatch(Config{BaseURL: "http://127.0.0.1:1/v1", APIKey: testKey, Model: "gpt-4o-mini"})
	if err != nil {
		t.Fatal(err)
	}
	line, err := ob.line(t.Context(), br)
	if err != nil {
		t.Fatal(err)
	}
	var ol struct {
		CustomID string            `json:"custom_id"`
		Body     openAISpecRequest `json:"body"`
	}
	if err := json.Unmarshal(line, &ol); err != nil {
		t.Fatal(err)
	}
	var parts []openAISpecPart
	strictDecode(t, ol.Body.Messages[1].Content, &parts)
	if len(parts) != 3 || parts[0].ImageURL == nil || parts[0].ImageURL.URL != dataURL("image/png", png) ||
		parts[1].File == nil || parts[1].File.FileData != dataURL("application/pdf", pdf) || parts[2].Type != "text" {
		t.Errorf("the OpenAI batch line's task turn is not image_url, file, text with the files' bytes")
	}
	if n, err := ob.Size(br); err != nil || n != len(line)+1 || n < base64.StdEncoding.EncodedLen(len(pdf)) {
		t.Errorf("Size = %d, %v; want the line's %d bytes with the files", n, err, len(line)+1)
	}

	ab, err := NewAnthropicBatch(Config{BaseURL: "http://127.0.0.1:1", APIKey: testKey, Model: "claude-sonnet-4-5"})
	if err != nil {
		t.Fatal(err)
	}
	e, err := ab.request(t.Context(), br)
	if err != nil {
		t.Fatal(err)
	}
	var params anthropicSpecRequest
	if err := json.Unmarshal(e.Params, &params); err != nil {
		t.Fatal(err)
	}
	var blocks []anthropicSpecBlock
	strictDecode(t, params.Messages[0].Content, &blocks)
	if len(blocks) != 3 || blocks[0].Type != "image" || blocks[0].Source.Data != base64.StdEncoding.EncodeToString(png) ||
		blocks[1].Type != "document" || blocks[1].Source.Data != base64.StdEncoding.EncodeToString(pdf) {
		t.Errorf("the Anthropic batch request's task turn is not image, document, text with the files' bytes")
	}
}
