package jsontext

import (
	"bytes"
	"encoding/json"
	"math"
	"strings"
	"testing"
	"unicode/utf8"
)

var samples = []string{
	"", "plain", `quote " and \ backslash`, "tab\tnew\nline\rcr", "\b\f\x00\x01\x1f\x7f",
	"<a href='x'>&amp;</a>", "é日本😀", "\u2028\u2029", "bad \xff utf-8 \xc3", "end\\",
}

func TestAppendStringHTMLMatchesMarshal(t *testing.T) {
	t.Parallel()
	for _, s := range samples {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendString(nil, s, true); string(got) != string(want) {
			t.Errorf("AppendString(%q, html) = %s, json.Marshal %s", s, got, want)
		}
	}
}

func TestAppendStringPlain(t *testing.T) {
	t.Parallel()
	for _, s := range samples {
		got := AppendString([]byte("x"), s, false)
		if got[0] != 'x' {
			t.Fatalf("AppendString did not append: %q", got)
		}
		var back string
		if err := json.Unmarshal(got[1:], &back); err != nil {
			t.Fatalf("AppendString(%q) = %s: not JSON: %v", s, got[1:], err)
		}
		if utf8.ValidString(s) && back != s {
			t.Errorf("AppendString(%q) decodes to %q", s, back)
		}
	}
	if got := string(AppendString(nil, "<&>\u2028", false)); got != "\"<&>\u2028\"" {
		t.Errorf("plain mode escaped more than JSON requires: %s", got)
	}
}

func TestEscapedRune(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		in       string
		r        rune
		n        int
		lone, ok bool
	}{
		{`\u00e9`, 'é', 6, false, true},
		{`\ud83d\ude00`, '😀', 12, false, true},
		{`\ud83dx`, utf8.RuneError, 6, true, true},
		{`\ud83d\u0041`, utf8.RuneError, 6, true, true},
		{`\ude00`, utf8.RuneError, 6, true, true},
		{`\u12g4`, 0, 0, false, false},
		{`\u12`, 0, 0, false, false},
		{`\n`, 0, 0, false, false},
	} {
		r, n, lone, ok := EscapedRune([]byte(tc.in), 0)
		if r != tc.r || n != tc.n || lone != tc.lone || ok != tc.ok {
			t.Errorf("EscapedRune(%s) = %q, %d, %v, %v; want %q, %d, %v, %v", tc.in, r, n, lone, ok, tc.r, tc.n, tc.lone, tc.ok)
		}
	}
}

func TestAppendUnescaped(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		raw, want string
		lone, ok  bool
	}{
		{`plain`, "plain", false, true},
		{`a\"b\\c\/d\b\f\n\r\t`, "a\"b\\c/d\b\f\n\r\t", false, true},
		{`\u00e9\ud83d\ude00`, "é😀", false, true},
		{`x\ud83dy`, "x\ufffdy", true, true},
		{`bad \q`, "bad ", false, false},
		{`end \`, "end ", false, false},
	} {
		got, lone, ok := AppendUnescaped([]byte(">"), []byte(tc.raw))
		if string(got) != ">"+tc.want || lone != tc.lone || ok != tc.ok {
			t.Errorf("AppendUnescaped(%s) = %q, %v, %v; want %q, %v, %v", tc.raw, got, lone, ok, ">"+tc.want, tc.lone, tc.ok)
		}
	}
}

// FuzzAppendString: html mode is json.Marshal byte for byte; both modes
// decode back to the string.
func FuzzAppendString(f *testing.F) {
	for _, s := range samples {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		want, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendString(nil, s, true); string(got) != string(want) {
			t.Fatalf("AppendString(%q, html) = %s, json.Marshal %s", s, got, want)
		}
		var back string
		if err := json.Unmarshal(AppendString(nil, s, false), &back); err != nil {
			t.Fatalf("plain AppendString(%q) is not JSON: %v", s, err)
		}
		if utf8.ValidString(s) && back != s {
			t.Fatalf("plain AppendString(%q) decodes to %q", s, back)
		}
	})
}

// FuzzAppendUnescaped: on a string encoding/json decodes, AppendUnescaped
// gives the same text.
func FuzzAppendUnescaped(f *testing.F) {
	for _, s := range []string{`plain`, `a\"b\\c\/d\b\f\n\r\t`, `\u00e9\ud83d\ude00`, `x\ud83dy`, `\ude00\ud800`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		if !utf8.Valid(raw) {
			return // encoding/json replaces invalid bytes; callers check UTF-8 themselves
		}
		var want string
		quoted := append(append([]byte{'"'}, raw...), '"')
		if err := json.Unmarshal(quoted, &want); err != nil {
			return
		}
		got, _, ok := AppendUnescaped(nil, raw)
		if !ok || string(got) != want {
			t.Fatalf("AppendUnescaped(%q) = %q, %v; encoding/json %q", raw, got, ok, want)
		}
	})
}

// BenchmarkAppendString escapes a model's answer as the outcome encoder
// does: about 1 KB of JSON, so a quote every few bytes.
func BenchmarkAppendString(b *testing.B) {
	s := strings.Repeat(`{"sku":"A-1","qty":2,"price":125.25,"note":"<b>Tools & more</b>\n"},`, 14)
	buf := make([]byte, 0, 4*len(s))
	b.SetBytes(int64(len(s)))
	for b.Loop() {
		buf = AppendString(buf[:0], s, true)
	}
}

// TestAppendFloatMatchesJSON covers encoding/json's cutoffs between 'f'
// and 'e' notation.
func TestAppendFloatMatchesJSON(t *testing.T) {
	t.Parallel()
	for _, f := range []float64{0, 1, -1, 0.1, 0.7, 1e-6, 9.99e-7, 1e-7, 1e20, 1e21, 123456789e13, math.MaxFloat64, math.SmallestNonzeroFloat64, -1e-9} {
		want, err := json.Marshal(f)
		if err != nil {
			t.Fatal(err)
		}
		if got := AppendFloat(nil, f); !bytes.Equal(got, want) {
			t.Errorf("AppendFloat(%v) = %s, json.Marshal %s", f, got, want)
		}
	}
}
