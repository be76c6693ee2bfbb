package schemas

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/llmpipeline/pipeline/ground"
)

// FuzzGround: for any input text and value, a grounded value's offsets
// slice the input (code points) to the value itself (exact) or to a span
// that normalises to the value (normalized); a value not grounded does not
// occur exactly; nothing panics, and nothing hangs (a watchdog turns a
// hang into a crasher).
func FuzzGround(f *testing.F) {
	for _, seed := range [][2]string{
		{"Facture émise par Société Générale", "Société Générale"},
		{"😀 Bill to: ACME   Corp\n  Ltd, Cafe\u0301", "acme corp ltd"},
		{"Cafe\u0301 ＡＢＣ１２３", "café abc123"},
		{"HAUPTSTRASSE 5", "Hauptstraße"},
		{"株式会社テスト 👍", "株式会社テスト"},
		{"a\u0301\u0301 b", "á"},
		{"ﬁle ﬂow", "file flow"},
		{"x  \t\n y", "x y"},
		{"ΣΊΣΥΦΟΣ", "σίσυφος"},
		{"İstanbul", "i̇stanbul"},
		{"\xff\xfe abc", "abc"},
	} {
		f.Add(seed[0], seed[1])
	}
	s, err := Compile("f", []byte(`{"type":"object","properties":{"v":{"type":"string","x-grounded":true}}}`))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, input, value string) {
		if !utf8.ValidString(value) {
			return // a JSON string holds valid UTF-8
		}
		watchdog := time.AfterFunc(10*time.Second, func() { panic(fmt.Sprintf("hang on %q %q", input, value)) })
		defer watchdog.Stop()
		doc, _ := json.Marshal(map[string]string{"v": value})
		in := NewInput(input)
		diags, _, gr, err := s.Check(doc, in, 0)
		if err != nil {
			t.Fatal(err)
		}
		if value == "" {
			if len(diags)+len(gr) > 0 {
				t.Fatalf("an empty value was checked: %v %v", diags, gr)
			}
			return
		}
		if len(gr) == 0 {
			if strings.Contains(input, value) {
				t.Fatalf("%q occurs in %q but was not grounded: %v", value, input, diags)
			}
			return
		}
		g := gr[0]
		r := []rune(input)
		if g.Start < 0 || g.End > len(r) || g.Start > g.End {
			t.Fatalf("offsets %+v out of %d code points", g, len(r))
		}
		got := string(r[g.Start:g.End])
		switch g.Match {
		case MatchExact:
			if got != value {
				t.Fatalf("exact: input[%d:%d] = %q, want %q", g.Start, g.End, got, value)
			}
		case MatchNormalized:
			if a, b := strings.TrimSpace(ground.Normalize(got)), strings.TrimSpace(ground.Normalize(value)); !strings.Contains(a, b) {
				t.Fatalf("normalized: input[%d:%d] = %q normalises to %q, not containing %q", g.Start, g.End, got, a, b)
			}
		default:
			t.Fatalf("match %q", g.Match)
		}
	})
}
