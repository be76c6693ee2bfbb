package llm

import (
	"encoding/json"
	"runtime"
	"sync/atomic"
	"testing"
)

// TestBatchSizeReadsNoFile: a batch line's Size, which batch mode asks
// for every queued request, is the exact length of the line the batch
// writes, for both providers, and never opens a file nor holds its
// base64: measuring a request with an 8 MB PDF allocates under 1 MB.
// Before: Size built the whole line (the body read whole with the files'
// base64, then copied twice by json.Marshal), 30+ MB for that request.
func TestBatchSizeReadsNoFile(t *testing.T) {
	png, pdf := testPNG(t), testPDF(8<<20)
	var opens atomic.Int32
	req := fileConversation(png, pdf, &opens, false)
	br := BatchRequest{CustomID: "inv-0001~a1", Request: req}
	ob, err := NewOpenAIBatch(Config{BaseURL: "http://127.0.0.1:1/v1", APIKey: testKey, Model: "gpt-4o-mini"})
	if err != nil {
		t.Fatal(err)
	}
	ab, err := NewAnthropicBatch(Config{BaseURL: "http://127.0.0.1:1", APIKey: testKey, Model: "claude-sonnet-4-5"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name  string
		size  func(BatchRequest) (int, error)
		whole func() ([]byte, error)
	}{
		{"openai", ob.Size, func() ([]byte, error) { return ob.line(t.Context(), br) }},
		{"anthropic", ab.Size, func() ([]byte, error) {
			e, err := ab.request(t.Context(), br)
			if err != nil {
				return nil, err
			}
			return json.Marshal(e)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			opens.Store(0)
			var before, after runtime.MemStats
			runtime.GC()
			runtime.ReadMemStats(&before)
			n, err := tc.size(br)
			runtime.ReadMemStats(&after)
			if err != nil {
				t.Fatal(err)
			}
			if got := opens.Load(); got != 0 {
				t.Errorf("Size opened the files %d times, want 0", got)
			}
			if alloc := after.TotalAlloc - before.TotalAlloc; alloc > 1<<20 {
				t.Errorf("Size allocated %d bytes for a request with an 8 MB PDF, want under 1 MiB", alloc)
			}
			line, err := tc.whole()
			if err != nil {
				t.Fatal(err)
			}
			if n != len(line)+1 {
				t.Errorf("Size = %d, want the line's %d bytes and its newline", n, len(line)+1)
			}
		})
	}
}
