package escape

import (
	"encoding/json"
	"testing"
	"unicode"
	"unicode/utf8"
)

func TestLineAndText(t *testing.T) {
	for _, tc := range []struct {
		name, in, line, text string
	}{
		{"plain", "total /items/*/price", "total /items/*/price", "total /items/*/price"},
		{"unicode kept", "Zürich — 東京 \uFFFD", "Zürich — 東京 \uFFFD", "Zürich — 東京 \uFFFD"},
		{"backslash kept", `C:\dir\x1b`, `C:\dir\x1b`, `C:\dir\x1b`},
		{"csi", "a\x1b[2Jb", `a\x1b[2Jb`, `a\x1b[2Jb`},
		{"osc title", "\x1b]0;pwned\a", `\x1b]0;pwned\a`, `\x1b]0;pwned\a`},
		{"nul cr", "k\x00v\rw", `k\x00v\rw`, `k\x00v\rw`},
		{"newline tab", "a\nb\tc", `a\nb\tc`, "a\nb\tc"},
		{"del c1", "x\x7fy\u009bz\u0085", `x\x7fy\u009bz\u0085`, `x\x7fy\u009bz\u0085`},
		{"bidi", "abc\u202edcb\u2066", `abc\u202edcb\u2066`, `abc\u202edcb\u2066`},
		{"separators", "a\u2028b\u2029", `a\u2028b\u2029`, `a\u2028b\u2029`},
		{"bad utf8", "a\x9bb\xff", `a\x9bb\xff`, `a\x9bb\xff`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := Line(tc.in); got != tc.line {
				t.Errorf("Line(%q) = %q, want %q", tc.in, got, tc.line)
			}
			if got := Text(tc.in); got != tc.text {
				t.Errorf("Text(%q) = %q, want %q", tc.in, got, tc.text)
			}
		})
	}
}

// FuzzLine: whatever the input, the output holds no control character but
// (for Text) line breaks and tabs, and is valid UTF-8.
func FuzzLine(f *testing.F) {
	for _, s := range []string{"", "a\x1b[2J", "\x00\r\n\t", "\u202e", "\xff\xfe", "\u009b"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		for _, out := range []string{Line(s), Text(s)} {
			if !utf8.ValidString(out) {
				t.Fatalf("%q: output %q is not UTF-8", s, out)
			}
			for _, r := range out {
				if r != '\n' && r != '\t' && (unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r)) {
					t.Fatalf("%q: output %q holds %U", s, out, r)
				}
			}
		}
		for _, r := range Line(s) {
			if r == '\n' || r == '\t' {
				t.Fatalf("Line(%q) holds a line break or tab", s)
			}
		}
	})
}

// TestJSON: DEL, C1 controls and bidi overrides in JSON text become \u
// escapes that decode to the same value; other text is left as it is.
func TestJSON(t *testing.T) {
	in := []byte("{\"k\u009b\":\"a\x7fb\u202ec Zürich \\u001b\"}\n")
	got := JSON(in)
	if want := `{"k\u009b":"a\u007fb\u202ec Zürich \u001b"}` + "\n"; string(got) != want {
		t.Fatalf("JSON(%q) = %q, want %q", in, got, want)
	}
	var a, b map[string]string
	if err := json.Unmarshal(in, &a); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(got, &b); err != nil || a["k\u009b"] != b["k\u009b"] || len(b) != 1 {
		t.Errorf("decoded %q, want %q (%v)", b, a, err)
	}
	plain := []byte(`{"a":"Zürich"}`)
	if got := JSON(plain); &got[0] != &plain[0] {
		t.Errorf("JSON copied text that needed nothing")
	}
}
