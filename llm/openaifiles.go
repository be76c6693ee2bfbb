package llm

import (
	"github.com/llmpipeline/pipeline/model"
)

// openAIFileTurns is a request whose conversation holds files: the
// messages take the content-parts shape (openAIPartsMessage).
type openAIFileTurns struct {
	*openAIRequest
	Messages []openAIPartsMessage `json:"messages"`
}

// openAIPartsMessage is a turn whose content is a string, null (an
// assistant's tool call) or an array of content parts (a turn with files).
type openAIPartsMessage struct {
	Role       string           `json:"role"`
	Content    any              `json:"content"`
	ToolCalls  []openAIToolCall `json:"tool_calls,omitempty"`
	ToolCallID string           `json:"tool_call_id,omitempty"`
}

// openAIPart is one content part of a user turn, as the chat completions
// API takes it: {"type":"text","text":...},
// {"type":"image_url","image_url":{"url":"data:image/png;base64,..."}} or
// {"type":"file","file":{"filename":...,"file_data":"data:application/pdf;base64,..."}}.
type openAIPart struct {
	Type     string          `json:"type"`
	Text     *string         `json:"text,omitempty"`
	ImageURL *openAIImageURL `json:"image_url,omitempty"`
	File     *openAIFileData `json:"file,omitempty"`
}

type openAIImageURL struct {
	URL string `json:"url"`
}

type openAIFileData struct {
	Filename string `json:"filename"`
	FileData string `json:"file_data"`
}

// openAIFileMessages writes a conversation with files: a turn with files
// becomes its files' parts (images as image_url, PDFs as file parts, with
// marks where their base64 goes) then its text; in tool mode the tool
// turns take the tool-call shape (openAIToolMessages).
func openAIFileMessages(msgs []model.Message, tool bool, name string, marks *fileMarks) []openAIPartsMessage {
	var base []openAIMessage
	if tool && hasToolTurns(msgs) {
		base = openAIToolMessages(msgs, name)
	} else {
		base = make([]openAIMessage, len(msgs))
		for i := range msgs {
			base[i] = openAIMessage{Role: msgs[i].Role, Content: &msgs[i].Content}
		}
	}
	out := make([]openAIPartsMessage, len(base))
	for i, m := range base {
		out[i] = openAIPartsMessage{Role: m.Role, ToolCalls: m.ToolCalls, ToolCallID: m.ToolCallID}
		if m.Content != nil {
			out[i].Content = *m.Content
		}
		files := msgs[i].Files
		if len(files) == 0 || m.Role != model.RoleUser {
			continue
		}
		parts := make([]openAIPart, 0, len(files)+1)
		for _, f := range files {
			data := dataURLPrefix(f) + marks.mark(f)
			if f.Image() {
				parts = append(parts, openAIPart{Type: "image_url", ImageURL: &openAIImageURL{URL: data}})
			} else {
				parts = append(parts, openAIPart{Type: "file", File: &openAIFileData{Filename: f.Name, FileData: data}})
			}
		}
		parts = append(parts, openAIPart{Type: "text", Text: &msgs[i].Content})
		out[i].Content = parts
	}
	return out
}
