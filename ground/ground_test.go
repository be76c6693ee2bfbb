package ground

import (
	"strings"
	"testing"
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
