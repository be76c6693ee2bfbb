package eval

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"

	"github.com/llmpipeline/pipeline/index"
)

// Counts are the counts of one field path, of a record or of an eval.
type Counts = index.EvalCounts

// Score is Counts with the figures computed from them.
type Score struct {
	Counts
	Precision float64 `json:"precision"`
	Recall    float64 `json:"recall"`
	F1        float64 `json:"f1"`
}

// Of computes the figures of c (index.EvalCounts.Figures): precision =
// correct / (correct + wrong + extra), recall = correct / (correct + wrong
// + missing), f1 their harmonic mean; each is 0 when its denominator is.
func Of(c Counts) Score {
	s := Score{Counts: c}
	s.Precision, s.Recall, s.F1 = c.Figures()
	return s
}

func add(a *Counts, b Counts) {
	a.Correct += b.Correct
	a.Wrong += b.Wrong
	a.Missing += b.Missing
	a.Extra += b.Extra
}

// Kind says what one compared value was.
type Kind string

// The kinds of a compared value.
const (
	Correct Kind = "correct"
	Wrong   Kind = "wrong"
	Missing Kind = "missing"
	Extra   Kind = "extra"
)

// Mismatch is one value that was not correct, for --show-errors.
type Mismatch struct {
	JobID string `json:"job_id"`
	Kind  Kind   `json:"kind"`
	// Path is the value's concrete path ("/items/2/price"; an element of a
	// multiset of scalars is at ".../*").
	Path     string `json:"path"`
	Expected any    `json:"expected"`
	Produced any    `json:"produced"`
}

// comparer compares one record's expected and produced values into counts
// per field path. One comparer serves one goroutine: it reuses its buffers.
type comparer struct {
	fields map[string]*Counts // the group being added to
	rec    Counts             // this record's sums
	path   []byte             // the field path (array indices as *)
	// concrete path and mismatches: only when mismatches are kept
	keep     bool
	cpath    []byte
	mism     []Mismatch
	absent   Kind // what an expected value with nothing to compare to counts as: missing, or wrong below a kind mismatch
	produced any  // the produced value of a kind mismatch, shown for the values below it
	fold     cases.Caser
	sbuf     []byte
	nbuf     []byte
}

func newComparer() *comparer {
	return &comparer{fold: cases.Fold(), absent: Missing}
}

// record compares one record into fields; it returns the record's sums.
func (c *comparer) record(fields map[string]*Counts, expected, produced any) Counts {
	c.fields = fields
	c.rec = Counts{}
	c.path = c.path[:0]
	c.cpath = c.cpath[:0]
	c.absent = Missing
	c.compare(expected, produced)
	return c.rec
}

func (c *comparer) count(k Kind, exp, prod any) {
	f := c.fields[string(c.path)]
	if f == nil {
		f = &Counts{}
		c.fields[string(c.path)] = f
	}
	switch k {
	case Correct:
		f.Correct++
		c.rec.Correct++
		return
	case Wrong:
		f.Wrong++
		c.rec.Wrong++
	case Missing:
		f.Missing++
		c.rec.Missing++
	case Extra:
		f.Extra++
		c.rec.Extra++
		return // --show-errors lists wrong and missing values
	}
	if c.keep {
		path := string(c.cpath)
		if path == "" {
			path = "/"
		}
		c.mism = append(c.mism, Mismatch{Kind: k, Path: path, Expected: exp, Produced: prod})
	}
}

func (c *comparer) push(key string, concrete string) (int, int) {
	n, cn := len(c.path), len(c.cpath)
	c.path = appendToken(append(c.path, '/'), key)
	if c.keep {
		c.cpath = appendToken(append(c.cpath, '/'), concrete)
	}
	return n, cn
}

func (c *comparer) pop(n, cn int) {
	c.path = c.path[:n]
	c.cpath = c.cpath[:cn]
}

// appendToken appends a JSON Pointer reference token (RFC 6901: ~ as ~0,
// / as ~1).
func appendToken(b []byte, s string) []byte {
	if !strings.ContainsAny(s, "~/") {
		return append(b, s...)
	}
	for i := 0; i < len(s); i++ {
		switch s[i] {
		case '~':
			b = append(b, "~0"...)
		case '/':
			b = append(b, "~1"...)
		default:
			b = append(b, s[i])
		}
	}
	return b
}

// compare counts e (expected) against p (produced); nil is absent or null.
func (c *comparer) compare(e, p any) {
	if e == nil && p == nil {
		return
	}
	em, eMap := e.(object)
	pm, pMap := p.(object)
	ea, eArr := e.([]any)
	pa, pArr := p.([]any)
	switch {
	case eMap && (pMap || p == nil), e == nil && pMap:
		c.objects(em, pm)
	case eArr && (pArr || p == nil), e == nil && pArr:
		c.arrays(ea, pa)
	case e == nil:
		c.count(Extra, nil, p)
	case p == nil:
		c.count(c.absent, e, c.produced)
	case eMap || eArr:
		// a kind mismatch (a scalar where an object or an array is
		// expected, an array for an object): every value expected below
		// is wrong, and what was produced is shown for each
		saved, savedP := c.absent, c.produced
		c.absent, c.produced = Wrong, p
		if eMap {
			c.objects(em, nil)
		} else {
			c.arrays(ea, nil)
		}
		c.absent, c.produced = saved, savedP
	case c.equal(e, p):
		c.count(Correct, e, p)
	default:
		c.count(Wrong, e, p)
	}
}

// objects compares e and p key by key: e's keys in its order, then the
// keys only p has, in its order.
func (c *comparer) objects(e, p object) {
	pos := p.positions()
	var small uint64 // p's members matched, when p has at most 64
	var big []bool
	if len(p) > 64 {
		big = make([]bool, len(p))
	}
	for _, m := range e {
		var pv any
		if i := p.index(m.key, pos); i >= 0 {
			pv = p[i].val
			if big != nil {
				big[i] = true
			} else {
				small |= 1 << i
			}
		}
		n, cn := c.push(m.key, m.key)
		c.compare(m.val, pv)
		c.pop(n, cn)
	}
	for i, m := range p {
		if (big != nil && big[i]) || (big == nil && small&(1<<i) != 0) {
			continue
		}
		n, cn := c.push(m.key, m.key)
		c.compare(nil, m.val)
		c.pop(n, cn)
	}
}

// arrays compares arrays of scalars as multisets at .../*, and any other
// array by position.
func (c *comparer) arrays(e, p []any) {
	if scalars(e) && scalars(p) {
		c.multiset(e, p)
		return
	}
	for i := range max(len(e), len(p)) {
		var ev, pv any
		if i < len(e) {
			ev = e[i]
		}
		if i < len(p) {
			pv = p[i]
		}
		n, cn := len(c.path), len(c.cpath)
		c.path = append(c.path, "/*"...)
		if c.keep {
			c.cpath = strconv.AppendInt(append(c.cpath, '/'), int64(i), 10)
		}
		c.compare(ev, pv)
		c.pop(n, cn)
	}
}

// scalars says whether every non-null element of a is a scalar.
func scalars(a []any) bool {
	for _, v := range a {
		switch v.(type) {
		case object, []any:
			return false
		}
	}
	return true
}

// multiset counts the scalars of e and p as multisets: correct the size of
// their intersection, the rest of e missing (wrong below a kind mismatch),
// the rest of p extra. Nulls are absent values and not counted.
func (c *comparer) multiset(e, p []any) {
	n, cn := len(c.path), len(c.cpath)
	c.path = append(c.path, "/*"...)
	if c.keep {
		c.cpath = append(c.cpath, "/*"...)
	}
	defer c.pop(n, cn)
	var left map[string]int // produced keys not matched yet
	for _, v := range p {
		if v != nil {
			if left == nil {
				left = make(map[string]int, len(p))
			}
			left[c.key(v)]++
		}
	}
	for _, v := range e {
		if v == nil {
			continue
		}
		k := c.key(v)
		if left[k] > 0 {
			left[k]--
			c.count(Correct, v, v)
			continue
		}
		c.count(c.absent, v, c.produced)
	}
	if len(left) == 0 {
		return
	}
	for _, v := range p { // the produced ones not matched, in their order
		if v == nil {
			continue
		}
		if k := c.key(v); left[k] > 0 {
			left[k]--
			c.count(Extra, nil, v)
		}
	}
}

// key is a scalar's normalised form, which equal scalars share.
func (c *comparer) key(v any) string {
	switch v := v.(type) {
	case string:
		return "s" + c.normalize(v)
	case json.Number:
		if b, ok := appendNumber(append(c.nbuf[:0], 'n'), string(v)); ok {
			c.nbuf = b
			return string(b)
		}
		return "n" + string(v)
	case bool:
		if v {
			return "t"
		}
		return "f"
	}
	return "?"
}

// equal compares two present scalars: strings after normalisation, numbers
// by value, booleans as they are; values of different kinds never match.
func (c *comparer) equal(a, b any) bool {
	switch a := a.(type) {
	case string:
		b, ok := b.(string)
		if !ok {
			return false
		}
		if a == b {
			return true
		}
		c.nbuf = c.appendNorm(c.nbuf[:0], a)
		c.sbuf = c.appendNorm(c.sbuf[:0], b)
		return bytes.Equal(c.nbuf, c.sbuf)
	case json.Number:
		b, ok := b.(json.Number)
		if !ok {
			return false
		}
		if a == b {
			return true
		}
		var okA, okB bool
		c.nbuf, okA = appendNumber(c.nbuf[:0], string(a))
		c.sbuf, okB = appendNumber(c.sbuf[:0], string(b))
		return okA && okB && bytes.Equal(c.nbuf, c.sbuf)
	case bool:
		b, ok := b.(bool)
		return ok && a == b
	}
	return false
}

// normalize is a string as compared: Unicode NFKC, case-folded, runs of
// white space as one space, trimmed.
func (c *comparer) normalize(s string) string {
	c.sbuf = c.appendNorm(c.sbuf[:0], s)
	return string(c.sbuf)
}

// appendNorm appends s normalised to b.
func (c *comparer) appendNorm(b []byte, s string) []byte {
	ascii := true
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			ascii = false
			break
		}
	}
	if !ascii { // ASCII is its own NFKC, and folds as it lowers
		s = norm.NFKC.String(c.fold.String(norm.NFKC.String(s)))
	}
	space := false
	for _, r := range s {
		if unicode.IsSpace(r) {
			space = len(b) > 0
			continue
		}
		if space {
			b = append(b, ' ')
			space = false
		}
		if 'A' <= r && r <= 'Z' {
			r += 'a' - 'A'
		}
		b = utf8.AppendRune(b, r)
	}
	return b
}
