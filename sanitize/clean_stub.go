package sanitize

import (
	"bytes"
	"encoding/json"
	"regexp"
)

// STUB: a minimal Clean so the rest of the module runs; the sanitize
// implementer replaces this file.

var (
	fenceRe    = regexp.MustCompile("(?s)```[a-zA-Z]*\\s*\n(.*?)```")
	trailingRe = regexp.MustCompile(`,(\s*[}\]])`)
)

// Clean turns raw model text into JSON bytes.
func Clean(raw []byte) (Result, error) {
	if json.Valid(raw) {
		return Result{JSON: bytes.TrimSpace(raw)}, nil
	}
	var res Result
	s := raw
	if m := fenceRe.FindSubmatch(s); m != nil {
		s = m[1]
		res.Stages = append(res.Stages, "fence")
	}
	if i := bytes.IndexAny(s, "{["); i > 0 {
		s = s[i:]
		res.Stages = append(res.Stages, "prose")
	} else if i < 0 {
		return res, ErrNoJSON
	}
	if j := bytes.LastIndexAny(s, "}]"); j >= 0 && j < len(s)-1 {
		s = s[:j+1]
	}
	if t := trailingRe.ReplaceAll(s, []byte("$1")); !bytes.Equal(t, s) {
		s = t
		res.Stages = append(res.Stages, "trailing_commas")
	}
	if !json.Valid(s) {
		return res, ErrTruncated
	}
	res.JSON = s
	return res, nil
}
