package chunk

import (
	"errors"
	"fmt"
	"unicode"
	"unicode/utf8"
)

// Range is a chunk's place in its document: the characters (code points)
// [Start, End), counted from 0.
type Range struct {
	Start int `json:"start"`
	End   int `json:"end"`
}

// Len is the number of characters in r.
func (r Range) Len() int { return r.End - r.Start }

// Check says whether chars and overlap can split a document: chars at least
// 1 (0 means no splitting, and is accepted), overlap from 0 to below half of
// chars, so that every chunk moves the document forward.
func Check(chars, overlap int) error {
	switch {
	case chars < 0:
		return fmt.Errorf("chunk size %d: must be 0 (no splitting) or more", chars)
	case overlap < 0:
		return fmt.Errorf("chunk overlap %d: must be 0 or more", overlap)
	case chars > 0 && overlap*2 >= chars:
		return fmt.Errorf("chunk overlap %d: must be under half the chunk size %d", overlap, chars)
	case chars == 0 && overlap > 0:
		return errors.New("chunk overlap set without a chunk size")
	}
	return nil
}

// Count is the number of characters of text.
func Count(text string) int { return utf8.RuneCountInString(text) }

// Text is the characters r of text.
func Text(text string, r Range) string {
	start := byteOffset(text, 0, 0, r.Start)
	end := byteOffset(text, start, r.Start, r.End)
	return text[start:end]
}

// byteOffset walks text from byte from (character at) to character want.
func byteOffset(text string, from, at, want int) int {
	i := from
	for at < want && i < len(text) {
		_, n := utf8.DecodeRuneInString(text[i:])
		i += n
		at++
	}
	return i
}

// Split cuts text into chunks of at most chars characters, consecutive
// chunks sharing about overlap characters (see the package doc for where it
// cuts). It returns nil when text has at most chars characters, or chars is
// 0: the document is one ordinary job. chars and overlap must pass Check.
func Split(text string, chars, overlap int) []Range {
	if chars <= 0 || utf8.RuneCountInString(text) <= chars {
		return nil
	}
	rs := []rune(text)
	var out []Range
	start := 0
	for {
		if len(rs)-start <= chars {
			out = append(out, Range{start, len(rs)})
			return out
		}
		end := cut(rs, start, start+chars)
		out = append(out, Range{start, end})
		start = nextStart(rs, start, end, overlap)
	}
}

// cut is where the chunk that starts at start and may reach limit ends: at
// the last paragraph boundary, else sentence end, in its second half; else
// at the last whitespace or CJK boundary; else (one word longer than a
// chunk) at limit.
func cut(rs []rune, start, limit int) int {
	half := max(start+(limit-start)/2, start+1)
	if c := lastBoundary(rs, half, limit, paragraphEnd); c > 0 {
		return c
	}
	if c := lastBoundary(rs, half, limit, sentenceEnd); c > 0 {
		return c
	}
	if c := lastBoundary(rs, start+1, limit, spaceEnd); c > 0 {
		return c
	}
	if c := lastBoundary(rs, start+1, limit, cjkEnd); c > 0 {
		return c
	}
	return limit
}

// lastBoundary is the greatest c in [from, limit] where at(rs, c) holds (a
// chunk may end before character c), or 0.
func lastBoundary(rs []rune, from, limit int, at func([]rune, int) bool) int {
	for c := limit; c >= from && c > 0; c-- {
		if at(rs, c) {
			return c
		}
	}
	return 0
}

// paragraphEnd: c follows a blank line (a line break, optional blanks, a
// line break) and the next paragraph's text begins at c.
func paragraphEnd(rs []rune, c int) bool {
	if c >= len(rs) || unicode.IsSpace(rs[c]) || rs[c-1] != '\n' {
		return false
	}
	for i := c - 2; i >= 0; i-- {
		switch rs[i] {
		case '\n':
			return true
		case ' ', '\t', '\r':
			continue
		}
		return false
	}
	return false
}

// sentenceEnd: c is just after a sentence's end: a full stop, question or
// exclamation mark (and closing quotes or brackets) followed by whitespace,
// or an ideographic full stop, which needs none.
func sentenceEnd(rs []rune, c int) bool {
	if c >= len(rs) {
		return false
	}
	i := c - 1
	if isCJKStop(rs[i]) {
		return true
	}
	if !unicode.IsSpace(rs[i]) {
		return false
	}
	for i > 0 && unicode.IsSpace(rs[i]) {
		i--
	}
	for i > 0 && isCloser(rs[i]) {
		i--
	}
	return rs[i] == '.' || rs[i] == '!' || rs[i] == '?' || rs[i] == '…' || isCJKStop(rs[i])
}

func isCJKStop(r rune) bool { return r == '。' || r == '！' || r == '？' || r == '｡' }

func isCloser(r rune) bool {
	return r == '"' || r == '\'' || r == ')' || r == ']' || r == '”' || r == '’' || r == '»' || r == '」' || r == '』' || r == '）'
}

// spaceEnd: c is just after whitespace and not on whitespace (the chunk
// keeps the space; the next begins with a word).
func spaceEnd(rs []rune, c int) bool {
	return c < len(rs) && unicode.IsSpace(rs[c-1]) && !unicode.IsSpace(rs[c])
}

// cjkEnd: c lies between two characters of which one is CJK (ideographs,
// kana, CJK punctuation): those scripts write words without spaces, and a
// cut between two of their characters splits no word of another script.
func cjkEnd(rs []rune, c int) bool {
	return c < len(rs) && (isCJK(rs[c-1]) || isCJK(rs[c])) && !unicode.IsMark(rs[c])
}

func isCJK(r rune) bool {
	return unicode.In(r, unicode.Han, unicode.Hiragana, unicode.Katakana) ||
		(r >= 0x3000 && r <= 0x303F) || (r >= 0xFF00 && r <= 0xFFEF)
}

// nextStart is where the chunk after [start, end) begins: overlap
// characters before end, moved forward to the start of a word, and always
// after start.
func nextStart(rs []rune, start, end, overlap int) int {
	if overlap <= 0 {
		return end
	}
	s := max(end-overlap, start+1)
	for ; s < end; s++ {
		if spaceEnd(rs, s) || cjkEnd(rs, s) {
			return s
		}
	}
	return end
}

// Texts is the text of every range of rs (as Split returns them: starts
// and ends each in increasing order), in one walk over text.
func Texts(text string, rs []Range) []string {
	starts := make([]int, len(rs))
	ends := make([]int, len(rs))
	for _, side := range []struct {
		at  func(Range) int
		out []int
	}{{func(r Range) int { return r.Start }, starts}, {func(r Range) int { return r.End }, ends}} {
		i, char := 0, 0
		for k, r := range rs {
			want := side.at(r)
			for char < want && i < len(text) {
				_, n := utf8.DecodeRuneInString(text[i:])
				i += n
				char++
			}
			side.out[k] = i
		}
	}
	out := make([]string, len(rs))
	for k := range rs {
		out[k] = text[starts[k]:ends[k]]
	}
	return out
}
