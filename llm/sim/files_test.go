package sim

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"

	"github.com/llmpipeline/pipeline/model"
)

// The simulator reads a request's files as a provider would, and counts
// their tokens in the usage as the providers document them.
func TestSimFiles(t *testing.T) {
	s := newTestSim(t, Config{Seed: 1})
	sch := loadSchema(t, "invoice")
	req := firstTurn(sch, "scan-1")
	plain, err := s.Complete(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	data := []byte("\x89PNG\r\n\x1a\n0123456789")
	read := 0
	img := model.File{Name: "r.png", MediaType: "image/png", Size: int64(len(data)), Width: 1024, Height: 1024,
		Open: func(context.Context) (io.ReadCloser, error) { read++; return io.NopCloser(bytes.NewReader(data)), nil }}
	req.Messages[1].Files = []model.File{img}
	resp, err := s.Complete(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if got, want := resp.Usage.PromptTokens, plain.Usage.PromptTokens+img.Tokens(); got != want || read != 1 {
		t.Errorf("prompt tokens %d (file read %d times), want %d with the image's %d, read once", got, read, want, img.Tokens())
	}
	req.Messages[1].Files[0].Open = func(context.Context) (io.ReadCloser, error) { return nil, errors.New("object missing") }
	var me *model.Error
	if _, err := s.Complete(t.Context(), req); !errors.As(err, &me) || me.Kind != model.KindRequest {
		t.Errorf("a file that cannot be read: %v, want a request error", err)
	}
}
