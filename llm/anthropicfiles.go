package llm

import "github.com/llmpipeline/pipeline/model"

// anthropicFileBlock is an image or a PDF as the Messages API takes it:
// {"type":"image","source":{"type":"base64","media_type":"image/png","data":...}}
// or {"type":"document","source":{"type":"base64","media_type":"application/pdf","data":...}}.
type anthropicFileBlock struct {
	Type   string              `json:"type"` // "image" or "document"
	Source anthropicFileSource `json:"source"`
}

type anthropicFileSource struct {
	Type      string `json:"type"` // "base64"
	MediaType string `json:"media_type"`
	Data      string `json:"data"`
}

// addAnthropicFiles puts files, as image and document blocks with marks
// where their base64 goes, before the blocks of the last turn of msgs
// (the task's user turn, just appended).
func addAnthropicFiles(msgs []anthropicMessage, files []model.File, marks *fileMarks) {
	last := &msgs[len(msgs)-1]
	blocks, _ := last.Content.([]any)
	out := make([]any, 0, len(files)+len(blocks))
	for _, f := range files {
		kind := "document"
		if f.Image() {
			kind = "image"
		}
		out = append(out, anthropicFileBlock{Type: kind, Source: anthropicFileSource{Type: "base64", MediaType: f.MediaType, Data: marks.mark(f)}})
	}
	last.Content = append(out, blocks...)
}
