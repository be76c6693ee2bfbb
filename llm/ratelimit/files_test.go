package ratelimit

import (
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/model"
)

// A request's files count in its estimate by the providers' formulas, so
// --tpm holds with images and PDFs: a 1024x1024 image and a 2-page PDF
// reserve their tokens before the call.
func TestEstimateCountsFiles(t *testing.T) {
	t.Parallel()
	l, err := New(Config{TPM: 100000, Window: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	req := request(0, 396, 100)
	plain := l.estimate(req)
	img := model.File{Name: "r.png", MediaType: "image/png", Width: 1024, Height: 1024, Size: 5000}
	pdf := model.File{Name: "c.pdf", MediaType: "application/pdf", Pages: 2, Size: 90000}
	req.Messages[0].Files = []model.File{img, pdf}
	want := plain + img.Tokens() + pdf.Tokens()
	if got := l.estimate(req); got != want || img.Tokens() < 765 || pdf.Tokens() < 2*model.PDFPageTextTokens {
		t.Fatalf("estimate with files = %d, want %d (text %d, image %d, PDF %d)", got, want, plain, img.Tokens(), pdf.Tokens())
	}
}
