package app

import (
	"errors"

	"github.com/llmpipeline/pipeline/sanitize"
	"github.com/llmpipeline/pipeline/schemas"
)

// Verdict is `pipeline validate`'s judgement of one raw answer.
type Verdict struct {
	Valid       bool                 `json:"valid"`
	Schema      string               `json:"schema"`
	Version     string               `json:"version"`
	Class       string               `json:"class,omitempty"`
	Error       string               `json:"error,omitempty"`
	Repairs     []string             `json:"repairs"`
	Diagnostics []schemas.Diagnostic `json:"diagnostics"`
	Omitted     int                  `json:"omitted"`
	Grounding   []schemas.Grounding  `json:"grounding,omitempty"`
}

// Validate judges raw as a worker judges a model's answer: sanitized,
// validated against sc (at most max diagnostics), then the schema's truth
// checks (x-rules; x-grounded against in, skipped when in is nil).
func Validate(sc *schemas.Schema, raw []byte, in *schemas.Input, max int) Verdict {
	v := Verdict{Schema: sc.ID, Version: sc.Version, Diagnostics: []schemas.Diagnostic{}}
	res, cerr := sanitize.Clean(raw)
	v.Repairs = append([]string{}, res.Stages...)
	switch {
	case errors.Is(cerr, sanitize.ErrTruncated):
		v.Class, v.Error = "truncated", cerr.Error()
	case cerr != nil:
		v.Class, v.Error = "grammar", cerr.Error()
	default:
		ds, omitted, err := sc.Validate(res.JSON, max)
		if err == nil && len(ds) == 0 {
			ds, omitted, v.Grounding, err = sc.Check(res.JSON, in, max)
		}
		if err != nil {
			v.Class, v.Error = "grammar", err.Error()
		} else {
			v.Diagnostics, v.Omitted = append(v.Diagnostics, ds...), omitted
			v.Valid = len(ds) == 0
			if !v.Valid {
				v.Class = "schema"
			}
		}
	}
	return v
}
