package model_test

import (
	"testing"

	"github.com/llmpipeline/pipeline/model"
)

// The providers' published examples: OpenAI's vision guide (1024x1024 at
// high detail: 765 tokens; 2048x4096: 1105), Anthropic's (1092x1092 about
// 1590 tokens; 200x200 about 54).
func TestImageTokens(t *testing.T) {
	for _, c := range []struct {
		w, h, openai, anthropic int
	}{
		{1024, 1024, 765, 1398},
		{2048, 4096, 1105, 1590},
		{1092, 1092, 765, 1590},
		{200, 200, 255, 53},
	} {
		if got := model.ImageTokensOpenAI(c.w, c.h); got != c.openai {
			t.Errorf("ImageTokensOpenAI(%d, %d) = %d, want %d", c.w, c.h, got, c.openai)
		}
		if got := model.ImageTokensAnthropic(c.w, c.h); got != c.anthropic {
			t.Errorf("ImageTokensAnthropic(%d, %d) = %d, want %d", c.w, c.h, got, c.anthropic)
		}
	}
	pdf := model.File{MediaType: "application/pdf", Pages: 3}
	if got := pdf.Tokens(); got < 3*model.PDFPageTextTokens+3*1000 {
		t.Errorf("a 3-page PDF counts %d tokens, want its text and page images", got)
	}
	msgs := []model.Message{{Role: "user", Content: "x", Files: []model.File{pdf, {MediaType: "image/png", Width: 1024, Height: 1024}}}}
	if got := model.FileTokens(msgs); got != pdf.Tokens()+1398 {
		t.Errorf("FileTokens = %d, want %d", got, pdf.Tokens()+1398)
	}
}
