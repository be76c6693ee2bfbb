// Package ground finds a value in a job's input text, as x-grounded asks:
// exactly, else after normalisation (Unicode NFKC, case folding, runs of
// white space as one space), in time linear in the input, with offsets in
// Unicode code points. The schemas package's truth checks use it.
package ground

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
// New and pass it to every check of that job. Safe for concurrent use.
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
	// cps is the text's length in code points.
	cps int
	// norm is the normalised text; srcStart[i] is the code point offset in
	// text of the segment norm's byte i came from (its end is the next
	// segment's start).
	normDone bool
	norm     string
	srcStart []int32
	// freq and normFreq count the bytes of text and norm (indexRare).
	freq, normFreq *[256]int32
	// the values found nowhere (exactly, normalised): never searched again.
	exact, normal map[string]int
	folder        cases.Caser
	buf           [256]byte // fold's output
	rb            [utf8.UTFMax]byte
	seg           []byte // one segment's normal form
	// folds[r] is the case folding of r when it is one rune (0: not
	// known yet).
	folds *[foldCached]rune
}

// Normalize returns s in the form Find compares a value in when it is not
// in the input as it is: NFKC, case folded, each run of white space as one
// space.
func Normalize(s string) string { return New("").normalize(s, nil, nil) }

// How Find matched a value.
const (
	MatchExact      = "exact"      // as it is in the input
	MatchNormalized = "normalized" // after NFKC, case folding and white space as one space
)

// foldCached bounds the runes whose folding Input remembers.
const foldCached = 0x2E80

// cpStep is the spacing of the code point index.
const cpStep = 64

// New wraps a job's input text for the searches of one job.
func New(text string) *Input {
	return &Input{text: text, exact: map[string]int{}, normal: map[string]int{}, folder: cases.Fold()}
}

// Text returns the input text.
func (in *Input) Text() string { return in.text }

// Find looks value up at or after code point offset after (the previous
// grounded value of the same object), else from the start: exactly, then
// normalised. start and end are code point offsets in the input.
func (in *Input) Find(value string, after int) (start, end int, match string, ok bool) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.index()
	from := in.byteOf(after)
	if in.freq == nil {
		in.freq = byteFreq(in.text)
	}
	if b := firstFrom(in.text, value, from, in.freq, in.exact); b >= 0 {
		start = in.cpOf(b)
		return start, start + utf8.RuneCountInString(value), MatchExact, true
	}
	nv := strings.TrimSpace(in.normalize(value, nil, nil))
	if nv == "" {
		return 0, 0, "", false
	}
	in.normalizeText()
	// The first normalised byte whose source is at or after the cursor.
	nfrom := sort.Search(len(in.srcStart), func(i int) bool { return int(in.srcStart[i]) >= after })
	b := firstFrom(in.norm, nv, nfrom, in.normFreq, in.normal)
	if b < 0 {
		return 0, 0, "", false
	}
	return int(in.srcStart[b]), in.srcEndOf(b + len(nv) - 1), MatchNormalized, true
}

// srcEndOf is the code point offset in text where the segment of norm's
// byte i ends: where the next segment starts (white space the
// normalisation dropped belongs to neither).
func (in *Input) srcEndOf(i int) int {
	s := in.srcStart[i]
	for j := i + 1; j < len(in.srcStart); j++ {
		if in.srcStart[j] != s {
			return in.segEnd(s, int(in.srcStart[j]))
		}
	}
	return in.segEnd(s, in.cps)
}

// segEnd trims the white space a segment starting at code point s runs
// over before next (a collapsed run: the space is its first character).
func (in *Input) segEnd(s int32, next int) int {
	if int(s)+1 < next && isSpaceAt(in.text, in.byteOf(int(s))) {
		return int(s) + 1
	}
	return next
}

func isSpaceAt(text string, b int) bool {
	r, _ := utf8.DecodeRuneInString(text[b:])
	return unicode.IsSpace(r)
}

// firstFrom is the first byte offset of v in text at or after from, else
// its first offset anywhere, -1 when text has none (remembered in absent).
// The search from the cursor comes first, so values in document order cost
// a scan of the text between them, not of the text before them.
func firstFrom(text, v string, from int, freq *[256]int32, absent map[string]int) int {
	if _, none := absent[v]; none {
		return -1
	}
	if i := indexRare(text[from:], v, freq); i >= 0 {
		return from + i
	}
	// None after the cursor: the first occurrence before it (one that
	// starts before from may end after it).
	if i := indexRare(text[:min(len(text), from+len(v)-1)], v, freq); i >= 0 {
		return i
	}
	absent[v] = -1
	return -1
}

// indexRare is strings.Index that scans for the byte of v rarest in the
// text (freq counts the text's bytes) rather than its first byte, so a
// value that starts with a common letter is not checked at every one of
// its occurrences.
func indexRare(text, v string, freq *[256]int32) int {
	if len(v) < 2 || len(text) < len(v) {
		return strings.Index(text, v)
	}
	k := 0
	for i := 1; i < len(v); i++ {
		if freq[v[i]] < freq[v[k]] {
			k = i
		}
	}
	if k == 0 {
		return strings.Index(text, v)
	}
	rare := v[k]
	for at := k; at <= len(text)-len(v)+k; {
		j := strings.IndexByte(text[at:len(text)-len(v)+k+1], rare)
		if j < 0 {
			return -1
		}
		start := at + j - k
		if text[start:start+len(v)] == v {
			return start
		}
		at += j + 1
	}
	return -1
}

// byteFreq counts the bytes of text.
func byteFreq(text string) *[256]int32 {
	var f [256]int32
	for i := 0; i < len(text); i++ {
		f[text[i]]++
	}
	return &f
}

// index builds the code point index once.
func (in *Input) index() {
	if in.cpByte != nil {
		return
	}
	in.cpByte = make([]int, 0, len(in.text)/cpStep+1)
	n := 0
	defer func() { in.cps = n }()
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
	in.srcStart = make([]int32, 0, len(in.text)+len(in.text)/8)
	in.norm = in.normalize(in.text, &sb, &in.srcStart)
	in.normFreq = byteFreq(in.norm)
}

// normalize returns s in NFKC, case folded, each run of white space as one
// space. With starts, it records for every byte it writes the code point
// offset in s of the segment it came from (into sb, whose text it
// returns).
//
// An ASCII byte followed by another ASCII byte (or the end) is a segment
// of its own that NFKC leaves alone: it is lowered and written at once.
// The rest is taken rune by rune where norm's quick check says it is in
// NFKC already (most text), and through norm.Iter one segment at a time
// where it is not, folded by the cases.Fold transformer into a reused
// buffer (runes without case skip it).
func (in *Input) normalize(s string, sb *strings.Builder, starts *[]int32) string {
	if sb == nil {
		sb = &strings.Builder{}
		sb.Grow(len(s))
	}
	w := normWriter{sb: sb, starts: starts}
	cp := 0 // code point offset of s[at]
	for at := 0; at < len(s); {
		if c := s[at]; c < utf8.RuneSelf && (at+1 == len(s) || s[at+1] < utf8.RuneSelf) {
			// A run of ASCII: each byte but the run's last (which may
			// carry a combining mark) is a segment of its own.
			j := at + 1
			for j+1 < len(s) && s[j] < utf8.RuneSelf && s[j+1] < utf8.RuneSelf {
				j++
			}
			if j+1 == len(s) && s[j] < utf8.RuneSelf {
				j++
			}
			w.asciiRun(s[at:j], int32(cp))
			cp += j - at
			at = j
			continue
		}
		// A run that needs NFKC: up to the next ASCII byte followed by
		// ASCII (or the end).
		end := at + 1
		for end < len(s) && !(s[end] < utf8.RuneSelf && (end+1 == len(s) || s[end+1] < utf8.RuneSelf)) {
			end++
		}
		for at < end {
			// A CJK ideograph or an emoji is its own segment, in NFKC,
			// without case: written as it is.
			if r, size := utf8.DecodeRuneInString(s[at:end]); stable(r) {
				w.rune(r, []byte(s[at:at+size]), int32(cp))
				at += size
				cp++
				continue
			}
			// The longest prefix already in NFKC, rune by rune; then one
			// segment through the normaliser.
			q := at + norm.NFKC.QuickSpanString(s[at:end])
			for _, r := range s[at:q] {
				in.foldRune(&w, r, int32(cp))
				cp++
			}
			at = q
			if at >= end {
				break
			}
			// One source segment; its normal form may come in several
			// pieces (a ligature, a long decomposition) before Pos moves.
			var it norm.Iter
			it.InitString(norm.NFKC, s[at:end])
			seg := in.seg[:0]
			for {
				seg = append(seg, it.Next()...)
				if it.Pos() > 0 || it.Done() {
					break
				}
			}
			in.seg = seg
			next := at + it.Pos()
			if next == at { // cannot happen: Done with nothing read
				next = end
			}
			n := utf8.RuneCountInString(s[at:next])
			start := int32(cp)
			cp += n
			at = next
			out := in.fold(seg)
			for len(out) > 0 {
				r, size := utf8.DecodeRune(out)
				w.rune(r, out[:size], start)
				out = out[size:]
			}
		}
	}
	return sb.String()
}

// foldRune writes the case folding of one rune already in NFKC at code
// point cp: as it is when it has no other case (CJK, digits, symbols).
func (in *Input) foldRune(w *normWriter, r rune, cp int32) {
	if r < utf8.RuneSelf {
		w.asciiRun(string(rune(r)), cp)
		return
	}
	b := in.rb[:]
	n := utf8.EncodeRune(b, r)
	if uncased(r) {
		w.rune(r, b[:n], cp)
		return
	}
	// Below U+2E80 the folding of a rune is remembered when it is one rune.
	if r < foldCached {
		if in.folds == nil {
			in.folds = new([foldCached]rune)
		}
		if f := in.folds[r]; f > 0 {
			w.rune(f, b[:utf8.EncodeRune(b, f)], cp)
			return
		}
	}
	// No simple folding is no folding at all, but for İ (U+0130), whose
	// full folding is i and a combining dot (what cases.Fold gives).
	if unicode.SimpleFold(r) == r && r != 'İ' {
		w.rune(r, b[:n], cp)
		return
	}
	out := in.fold(b[:n])
	if f, size := utf8.DecodeRune(out); r < foldCached && size == len(out) {
		in.folds[r] = f
	}
	for len(out) > 0 {
		r, size := utf8.DecodeRune(out)
		w.rune(r, out[:size], cp)
		out = out[size:]
	}
}

// uncased reports the ranges without letter case, where most non-Latin
// text of documents is: CJK, kana, Hangul, Yi (U+2E80..U+A63F), Hangul
// syllables, and the symbols and emoji from U+1F000.
func uncased(r rune) bool {
	return (r >= 0x2E80 && r < 0xA640) || (r >= 0xAC00 && r < 0xD7A4) || r >= 0x1F000
}

// stable reports the runes that NFKC leaves alone and nothing composes
// with, and that have no case: CJK unified ideographs and the emoji and
// pictographs of U+1F300..U+1FAFF.
func stable(r rune) bool {
	return (r >= 0x4E00 && r <= 0x9FFF) || (r >= 0x1F300 && r <= 0x1FAFF)
}

func asciiLower(c byte) byte {
	if 'A' <= c && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// fold case folds one segment, into a buffer reused across segments.
func (in *Input) fold(seg []byte) []byte {
	in.folder.Reset()
	n, _, err := in.folder.Transform(in.buf[:], seg, true)
	if err == nil {
		return in.buf[:n]
	}
	in.folder.Reset()
	return in.folder.Bytes(seg)
}

// normWriter writes normalised runes, white space runs as one space, and
// their map back to the source.
type normWriter struct {
	sb     *strings.Builder
	starts *[]int32
	space  bool // the last rune written is a space
}

// asciiRun writes ASCII bytes, lowered, from code point cp on.
func (w *normWriter) asciiRun(run string, cp int32) {
	for i := 0; i < len(run); i++ {
		c := run[i]
		switch c {
		case ' ', '\t', '\n', '\r', '\v', '\f':
			if w.space {
				continue
			}
			w.space = true
			c = ' '
		default:
			w.space = false
			c = asciiLower(c)
		}
		w.sb.WriteByte(c)
		if w.starts != nil {
			*w.starts = append(*w.starts, cp+int32(i))
		}
	}
}

// rune writes r (its UTF-8 bytes b) from the segment starting at code
// point start.
func (w *normWriter) rune(r rune, b []byte, start int32) {
	if unicode.IsSpace(r) {
		if w.space {
			return
		}
		w.space = true
		w.sb.WriteByte(' ')
		b = b[:1]
	} else {
		w.space = false
		w.sb.Write(b)
	}
	if w.starts != nil {
		for range b {
			*w.starts = append(*w.starts, start)
		}
	}
}
