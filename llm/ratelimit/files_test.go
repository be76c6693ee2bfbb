package ratelimit

import (
	"context"
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

// --tpm holds with files: at 10,000 tokens a second, a request of 200
// tokens of text goes within 300 ms, and the same request with a 2-page
// PDF (about 6,200 tokens more) does not: its files count before the call.
func TestTPMHoldsWithFiles(t *testing.T) {
	t.Parallel()
	pdf := model.File{Name: "c.pdf", MediaType: "application/pdf", Pages: 2, Size: 90000}
	waits := func(files []model.File) (ok int) {
		l, err := New(Config{TPM: 600000, Window: time.Minute})
		if err != nil {
			t.Fatal(err)
		}
		for range 2 {
			req := request(0, 396, 100)
			req.Messages[0].Files = files
			ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
			if _, err := l.Wait(ctx, l.estimate(req)); err == nil {
				ok++
			}
			cancel()
		}
		return ok
	}
	if n := waits(nil); n != 2 {
		t.Fatalf("%d of 2 text requests went within 300 ms, want 2", n)
	}
	if n := waits([]model.File{pdf}); n != 0 {
		t.Errorf("%d of 2 requests with a 2-page PDF went within 300 ms at --tpm 600000, want 0", n)
	}
}
