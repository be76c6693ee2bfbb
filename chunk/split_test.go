package chunk

import (
	"strings"
	"testing"
	"unicode"
)

// checkCover holds what every split must: chunks of at most chars
// characters, the first from 0, the last to the end, each starting after the
// one before and no later than its end (nothing skipped).
func checkCover(t *testing.T, text string, chars int, rs []Range) {
	t.Helper()
	n := Count(text)
	if len(rs) == 0 {
		t.Fatalf("no chunks for %d characters at %d", n, chars)
	}
	if rs[0].Start != 0 || rs[len(rs)-1].End != n {
		t.Fatalf("chunks cover [%d,%d), want [0,%d)", rs[0].Start, rs[len(rs)-1].End, n)
	}
	for k, r := range rs {
		if r.Len() > chars || r.Len() <= 0 {
			t.Fatalf("chunk %d is %d characters (limit %d)", k+1, r.Len(), chars)
		}
		if k > 0 && (r.Start <= rs[k-1].Start || r.Start > rs[k-1].End) {
			t.Fatalf("chunk %d starts at %d after chunk %d %v", k+1, r.Start, k, rs[k-1])
		}
	}
}

// wordCut reports a cut between two letters of a space-separated script.
func wordCut(rs []rune, c int) bool {
	return c > 0 && c < len(rs) && unicode.IsLetter(rs[c-1]) && unicode.IsLetter(rs[c]) && !isCJK(rs[c-1]) && !isCJK(rs[c])
}

func TestSplitShortIsOneJob(t *testing.T) {
	if rs := Split("short text", 100, 10); rs != nil {
		t.Fatalf("Split of a short text = %v, want nil", rs)
	}
	if rs := Split(strings.Repeat("a ", 100), 0, 0); rs != nil {
		t.Fatalf("Split with chars 0 = %v, want nil", rs)
	}
}

func TestSplitAtParagraphsFirst(t *testing.T) {
	p1 := strings.Repeat("First paragraph words. ", 3) + "End."
	p2 := strings.Repeat("Second one here. ", 3) + "Done."
	text := p1 + "\n\n" + p2
	rs := Split(text, Count(p1)+10, 0)
	checkCover(t, text, Count(p1)+10, rs)
	if len(rs) != 2 || Text(text, rs[1]) != p2 {
		t.Fatalf("chunks %v: second = %q, want the second paragraph %q", rs, Text(text, rs[1]), p2)
	}
}

func TestSplitLongParagraphAtSentences(t *testing.T) {
	// One paragraph far longer than a chunk, then a short one: the long one
	// is cut at sentence ends, never mid-sentence when a sentence fits.
	var b strings.Builder
	for i := range 40 {
		b.WriteString("Sentence number ")
		b.WriteString(strings.Repeat("x", i%7+1))
		b.WriteString(" has some words in it. ")
	}
	text := strings.TrimSpace(b.String()) + "\n\nA short closing paragraph."
	const chars = 200
	rs := Split(text, chars, 0)
	checkCover(t, text, chars, rs)
	runes := []rune(text)
	for k, r := range rs[:len(rs)-1] {
		if !sentenceEnd(runes, r.End) && !paragraphEnd(runes, r.End) {
			t.Errorf("chunk %d ends at %d inside a sentence: %q", k+1, r.End, Text(text, r))
		}
	}
}

func TestSplitOneSentenceAtWhitespace(t *testing.T) {
	// A document that is one sentence, no paragraph, no full stop before
	// the end: cut at whitespace, never inside a word.
	text := strings.TrimSpace(strings.Repeat("and then the party of the first part agreed ", 60)) + "."
	const chars, overlap = 120, 30
	rs := Split(text, chars, overlap)
	checkCover(t, text, chars, rs)
	runes := []rune(text)
	for k, r := range rs {
		if wordCut(runes, r.Start) || wordCut(runes, r.End) {
			t.Errorf("chunk %d %v cuts a word: %q", k+1, r, Text(text, r))
		}
		if k > 0 {
			shared := rs[k-1].End - r.Start
			if shared <= 0 || shared > overlap {
				t.Errorf("chunks %d and %d share %d characters, want 1..%d", k, k+1, shared, overlap)
			}
		}
	}
}

func TestSplitCJKWithoutSpaces(t *testing.T) {
	// Japanese with no spaces: ideographic full stops are sentence ends;
	// a run without them is cut between CJK characters.
	sentence := "本契約は甲と乙の間で締結されるものであり双方はこれに従う。"
	text := strings.Repeat(sentence, 30) + strings.Repeat("長い文字列", 80)
	const chars = 100
	rs := Split(text, chars, 10)
	checkCover(t, text, chars, rs)
	runes := []rune(text)
	sentences := 0
	for _, r := range rs[:len(rs)-1] {
		if runes[r.End-1] == '。' {
			sentences++
		}
		if !isCJK(runes[r.End-1]) && !isCJK(runes[r.End]) {
			t.Fatalf("cut at %d is not between CJK characters", r.End)
		}
	}
	if sentences == 0 {
		t.Fatalf("no chunk ended at an ideographic full stop: %v", rs)
	}
	// The text is in characters, not bytes: every chunk is valid UTF-8 of
	// at most 100 characters, 300 bytes.
	for _, r := range rs {
		if s := Text(text, r); Count(s) != r.Len() {
			t.Fatalf("Text %v has %d characters", r, Count(s))
		}
	}
}

func TestSplitHugeWordIsCutHard(t *testing.T) {
	text := strings.Repeat("x", 250)
	rs := Split(text, 100, 0)
	checkCover(t, text, 100, rs)
	if len(rs) != 3 {
		t.Fatalf("got %v", rs)
	}
}

func TestCheck(t *testing.T) {
	for _, c := range []struct {
		chars, overlap int
		ok             bool
	}{{0, 0, true}, {8000, 400, true}, {100, 50, false}, {-1, 0, false}, {100, -1, false}, {0, 10, false}} {
		if err := Check(c.chars, c.overlap); (err == nil) != c.ok {
			t.Errorf("Check(%d, %d) = %v", c.chars, c.overlap, err)
		}
	}
}

func FuzzSplit(f *testing.F) {
	f.Add("Hello world. Second sentence.\n\nNew paragraph 本文です。", 10, 3)
	f.Fuzz(func(t *testing.T, text string, chars, overlap int) {
		chars %= 50
		if chars < 0 {
			chars = -chars
		}
		chars++
		overlap = min(max(overlap%chars, 0), (chars-1)/2)
		rs := Split(text, chars, overlap)
		if rs == nil {
			if Count(text) > chars {
				t.Fatalf("no chunks for %d characters", Count(text))
			}
			return
		}
		checkCover(t, text, chars, rs)
	})
}

func TestTextsMatchText(t *testing.T) {
	text := strings.Repeat("Ünïcödé words, 本文です。 ", 50)
	rs := Split(text, 40, 8)
	for k, s := range Texts(text, rs) {
		if s != Text(text, rs[k]) || Count(s) != rs[k].Len() {
			t.Fatalf("chunk %d: Texts %q, Text %q", k+1, s, Text(text, rs[k]))
		}
	}
}
