package escape

import (
	"fmt"
	"io"
	"unicode"
	"unicode/utf8"
)

// JSON rewrites, in JSON text, the characters encoding/json leaves as they
// are but a terminal acts on (DEL, the C1 controls, bidi overrides) as \u
// escapes: the same JSON value, safe to print. In JSON text these
// characters can only stand inside strings, where \uXXXX means them. b is
// returned as it is when it holds none.
func JSON(b []byte) []byte {
	i := firstJSONUnsafe(b)
	if i < 0 {
		return b
	}
	out := make([]byte, 0, len(b)+12)
	out = append(out, b[:i]...)
	for i < len(b) {
		r, w := utf8.DecodeRune(b[i:])
		if jsonUnsafe(r, w) {
			out = fmt.Appendf(out, `\u%04x`, r)
		} else {
			out = append(out, b[i:i+w]...)
		}
		i += w
	}
	return out
}

func jsonUnsafe(r rune, w int) bool {
	// below 0x20 encoding/json escapes already; U+2028 and U+2029 too
	return r >= 0x7f && w > 0 && r != utf8.RuneError && (unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r))
}

func firstJSONUnsafe(b []byte) int {
	for i := 0; i < len(b); {
		if b[i] < 0x7f {
			i++
			continue
		}
		r, w := utf8.DecodeRune(b[i:])
		if jsonUnsafe(r, w) {
			return i
		}
		i += w
	}
	return -1
}

// JSONWriter writes through JSON every Write to w: for a json.Encoder,
// which writes each value in one Write.
func JSONWriter(w io.Writer) io.Writer { return jsonWriter{w} }

type jsonWriter struct{ w io.Writer }

func (j jsonWriter) Write(p []byte) (int, error) {
	if _, err := j.w.Write(JSON(p)); err != nil {
		return 0, err
	}
	return len(p), nil
}
