package model

import "math"

// Token estimates of files, by the providers' published formulas, for the
// rate limiter's estimate before a call and the simulator's usage. The
// reported usage corrects the estimate after the call.
const (
	// PDFPageTextTokens is a PDF page's text: Anthropic documents
	// 1,500-3,000 tokens a page of text; OpenAI sends the extracted text
	// of each page as well.
	PDFPageTextTokens = 1500
	// unknownImageTokens counts an image whose dimensions are not known:
	// the most either formula gives.
	unknownImageTokens = 1600
	// pdfBytesPerPage guesses the pages of a PDF whose pages were not
	// counted.
	pdfBytesPerPage = 64 << 10
)

// ImageTokensOpenAI is an image's tokens at high detail (OpenAI's vision
// guide): scaled to fit 2048x2048, then its shortest side to 768, 170
// tokens per 512-pixel tile plus 85.
func ImageTokensOpenAI(w, h int) int {
	if w <= 0 || h <= 0 {
		return unknownImageTokens
	}
	fw, fh := float64(w), float64(h)
	if s := 2048 / max(fw, fh); s < 1 {
		fw, fh = fw*s, fh*s
	}
	if s := 768 / min(fw, fh); s < 1 {
		fw, fh = fw*s, fh*s
	}
	tiles := ceilDiv(int(fw+0.5), 512) * ceilDiv(int(fh+0.5), 512)
	return 170*tiles + 85
}

// ImageTokensAnthropic is an image's tokens (Anthropic's vision guide):
// width x height / 750, after the image is scaled down to a long edge of
// 1568 pixels and 1092x1092 pixels of area at most (the guide's largest
// square, about 1,590 tokens).
func ImageTokensAnthropic(w, h int) int {
	if w <= 0 || h <= 0 {
		return unknownImageTokens
	}
	fw, fh := float64(w), float64(h)
	if s := 1568 / max(fw, fh); s < 1 {
		fw, fh = fw*s, fh*s
	}
	const maxPixels = 1092 * 1092
	if a := fw * fh; a > maxPixels {
		k := math.Sqrt(maxPixels / a)
		fw, fh = fw*k, fh*k
	}
	return int(fw*fh/750 + 0.5)
}

// pageImageTokens is a page as an image: a US Letter page rendered at the
// providers' largest size (the 1.15 megapixel cap).
var pageImageTokens = max(ImageTokensAnthropic(1210, 1568), ImageTokensOpenAI(1210, 1568))

// Tokens estimates the input tokens of f for either provider (the larger
// of their formulas): an image by its size, a PDF by its pages, each page
// its text and its image.
func (f File) Tokens() int {
	if f.Image() {
		return max(ImageTokensOpenAI(f.Width, f.Height), ImageTokensAnthropic(f.Width, f.Height))
	}
	pages := f.Pages
	if pages <= 0 {
		pages = max(1, int(f.Size/pdfBytesPerPage))
	}
	return pages * (PDFPageTextTokens + pageImageTokens)
}

// FileTokens sums the Tokens of the files of msgs.
func FileTokens(msgs []Message) int {
	n := 0
	for i := range msgs {
		for _, f := range msgs[i].Files {
			n += f.Tokens()
		}
	}
	return n
}

func ceilDiv(a, b int) int { return (a + b - 1) / b }
