package app

import (
	"bytes"
	"strings"
	"testing"
)

// TestCountPagesAcrossReads: a page object's "/Type /Page" counts once
// wherever a 64 KiB read cuts it, its whitespace run included. Before: a
// match that began 11 bytes or more before a read's end and ended after
// it was missed.
func TestCountPagesAcrossReads(t *testing.T) {
	const boundary = 64 << 10
	for _, obj := range []string{"/Type /Page ", "/Type/Page>", "/Type" + strings.Repeat(" ", 40) + "/Page\n"} {
		for end := boundary - 20; end <= boundary+20; end++ {
			// obj's last byte at offset end-1, then a second page far away.
			pad := end - len(obj)
			data := append(bytes.Repeat([]byte("x"), pad), obj...)
			data = append(data, bytes.Repeat([]byte("y"), 3*boundary)...)
			data = append(data, "/Type /Page /Parent 2 0 R /Type /Pages"...)
			n, err := countPages(bytes.NewReader(data))
			if err != nil || n != 2 {
				t.Fatalf("%q ending at offset %d: %d pages (%v), want 2", obj, end, n, err)
			}
		}
	}
}
