package schemas

import (
	"sort"
	"strings"
	"sync"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// Input is a job's input text as grounding searches it. It keeps what it
// learns (the code point index, the normalised text, where each value
// first occurs) across the attempts of a job: make one per job with
// NewInput and pass it to every Check of that job. Safe for concurrent use.
//
// Every search is linear in the input: a value is looked for with
// strings.Index (exactly), then in the input normalised once (NFKC, case
// folded, runs of white space as one space); nothing aligns fuzzily.
type Input struct {
	text string

	mu sync.Mutex
	// cpByte[k] is the byte offset of code point k*cpStep (built on first
	// use).
	cpByte []int
	ascii  bool
	// norm is the normalised text; srcStart[i] and srcEnd[i] are the code
	// point offsets in text of the source of norm's byte i.
	normDone         bool
	norm             string
	srcStart, srcEnd []int32
	// first occurrences already searched: byte offsets in text (exact)
	// and in norm (normalized), -1 for none.
	exact, normal map[string]int
	folder        cases.Caser
}

// cpStep is the spacing of the code point index.
const cpStep = 64

// NewInput wraps a job's input text for Check.
func NewInput(text string) *Input {
	return &Input{text: text, exact: map[string]int{}, normal: map[string]int{}, folder: cases.Fold()}
}

// Text returns the input text.
func (in *Input) Text() string { return in.text }

// find looks value up at or after code point offset after (the previous
// grounded value of the same object), else from the start: exactly, then
// normalised. start and end are code point offsets in the input.
func (in *Input) find(value string, after int) (start, end int, match string, ok bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.index()
	from := in.byteOf(after)
	if b := firstFrom(in.text, value, from, in.exact); b >= 0 {
		start = in.cpOf(b)
		return start, start + utf8.RuneCountInString(value), MatchExact, true
	}
	nv := strings.TrimSpace(in.normalize(value, nil, nil, nil))
	if nv == "" {
		return 0, 0, "", false
	}
	in.normalizeText()
	// The first normalised byte whose source is at or after the cursor.
	nfrom := sort.Search(len(in.srcStart), func(i int) bool { return int(in.srcStart[i]) >= after })
	b := firstFrom(in.norm, nv, nfrom, in.normal)
	if b < 0 {
		return 0, 0, "", false
	}
	return int(in.srcStart[b]), int(in.srcEnd[b+len(nv)-1]), MatchNormalized, true
}

// firstFrom is the first byte offset of v in text at or after from, else
// its first offset anywhere (cached in first), -1 when text has none.
func firstFrom(text, v string, from int, first map[string]int) int {
	f, seen := first[v]
	if !seen {
		f = strings.Index(text, v)
		first[v] = f
	}
	if f < 0 || f >= from {
		return f
	}
	if i := strings.Index(text[from:], v); i >= 0 {
		return from + i
	}
	return f
}

// index builds the code point index once.
func (in *Input) index() {
	if in.cpByte != nil {
		return
	}
	in.cpByte = make([]int, 0, len(in.text)/cpStep+1)
	n := 0
	for i := range in.text { // i: the byte offset of code point n
		if n%cpStep == 0 {
			in.cpByte = append(in.cpByte, i)
		}
		n++
	}
	if n == 0 {
		in.cpByte = append(in.cpByte, 0)
	}
	in.ascii = n == len(in.text)
}

// byteOf is the byte offset of code point cp (the end of the text past it).
func (in *Input) byteOf(cp int) int {
	if in.ascii {
		return min(cp, len(in.text))
	}
	k := cp / cpStep
	if k >= len(in.cpByte) {
		return len(in.text)
	}
	b := in.cpByte[k]
	for r := k * cpStep; r < cp && b < len(in.text); r++ {
		_, w := utf8.DecodeRuneInString(in.text[b:])
		b += w
	}
	return b
}

// cpOf is the code point offset of byte offset b (a rune's start).
func (in *Input) cpOf(b int) int {
	if in.ascii {
		return b
	}
	k := sort.Search(len(in.cpByte), func(i int) bool { return in.cpByte[i] > b }) - 1
	return k*cpStep + utf8.RuneCountInString(in.text[in.cpByte[k]:b])
}

// normalizeText builds the normalised text and its map back to the input,
// once.
func (in *Input) normalizeText() {
	if in.normDone {
		return
	}
	in.normDone = true
	var sb strings.Builder
	sb.Grow(len(in.text))
	in.srcStart = make([]int32, 0, len(in.text))
	in.srcEnd = make([]int32, 0, len(in.text))
	in.norm = in.normalize(in.text, &sb, &in.srcStart, &in.srcEnd)
}

// normalize returns s in NFKC, case folded, each run of white space as one
// space. With starts and ends, it records for every byte it writes the code
// point offsets in s of the segment it came from (into sb, whose text it
// returns).
func (in *Input) normalize(s string, sb *strings.Builder, starts, ends *[]int32) string {
	if sb == nil {
		sb = &strings.Builder{}
		sb.Grow(len(s))
	}
	var it norm.Iter
	it.InitString(norm.NFKC, s)
	cp, at := 0, 0 // code point and byte offset in s of the next segment
	space := false // the last byte written is a space
	for !it.Done() {
		seg := it.Next()
		pos := it.Pos()
		n := utf8.RuneCountInString(s[at:pos])
		start, end := int32(cp), int32(cp+n)
		cp, at = cp+n, pos
		var out []byte
		if len(seg) == 1 && seg[0] < utf8.RuneSelf {
			c := seg[0]
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			out = []byte{c}
		} else {
			out = in.folder.Bytes(seg)
			in.folder.Reset()
		}
		for len(out) > 0 {
			r, w := utf8.DecodeRune(out)
			if unicode.IsSpace(r) {
				if !space {
					sb.WriteByte(' ')
					record(starts, ends, start, end, 1)
					space = true
				} else if ends != nil && len(*ends) > 0 {
					(*ends)[len(*ends)-1] = end
				}
			} else {
				sb.Write(out[:w])
				record(starts, ends, start, end, w)
				space = false
			}
			out = out[w:]
		}
	}
	return sb.String()
}

func record(starts, ends *[]int32, start, end int32, n int) {
	if starts == nil {
		return
	}
	for range n {
		*starts = append(*starts, start)
		*ends = append(*ends, end)
	}
}
