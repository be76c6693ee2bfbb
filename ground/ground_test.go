package ground

import (
	"strings"
	"testing"

	"golang.org/x/text/cases"
	"golang.org/x/text/unicode/norm"
)

// TestIndexRare: the rare-byte search finds what strings.Index finds.
func TestIndexRare(t *testing.T) {
	t.Parallel()
	text := strings.Repeat("abracadabra 株式会社 🧾 ", 50) + "zebra-crossing"
	freq := byteFreq(text)
	for _, v := range []string{"zebra", "abra", "cad", "a", "", "株式", "🧾 a", "ing", "crossing!", "ra z", "ra-c", "b", "aa", text, text + "x"} {
		for _, from := range []int{0, 1, 7, len(text) / 2, len(text) - 3} {
			if got, want := indexRare(text[from:], v, freq), strings.Index(text[from:], v); got != want {
				t.Errorf("indexRare(text[%d:], %q) = %d, want %d", from, v, got, want)
			}
		}
	}
}

// TestFoldsAsCasesFold: the normal form folds case as cases.Fold does,
// letters without a simple folding included: "i̇stanbul" (what Python's
// "İstanbul".lower() gives) is found normalised in "İstanbul", and its
// offsets slice the input to "İstanbul". Before, İ stayed as it was and the
// value was found nowhere.
func TestFoldsAsCasesFold(t *testing.T) {
	t.Parallel()
	in := New("x İstanbul y")
	start, end, match, ok := in.Find("i\u0307stanbul", 0)
	if !ok || match != MatchNormalized || string([]rune(in.Text())[start:end]) != "İstanbul" {
		t.Errorf("Find: %d, %d, %q, %v; want İstanbul, normalized", start, end, match, ok)
	}
	for _, s := range []string{"İ", "ß", "ﬁ", "Σ", "ǅ"} {
		if got, want := Normalize(s), cases.Fold().String(norm.NFKC.String(s)); got != norm.NFKC.String(want) {
			t.Errorf("Normalize(%q) = %q, want %q", s, got, want)
		}
	}
}
