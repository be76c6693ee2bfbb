package heal

import "github.com/llmpipeline/pipeline/schemas"

// truthCheck is how one job's answers meet the schema's truth checks
// (x-grounded, x-rules).
type truthCheck struct {
	// in is the input as grounding searches it; nil for a job with files,
	// whose values may come from the files (the pipeline does not read
	// them): nothing is grounded.
	in *schemas.Input
	// part: the job is one chunk of a longer document; a rule that cannot
	// be evaluated on its answer (a field another chunk reads) is left to
	// the document's merge.
	part bool
}

// truthOf is the truth checks of t's answers. What in learns of the text
// serves every attempt of the job.
func truthOf(t Task) truthCheck {
	tc := truthCheck{part: t.Part}
	if len(t.Files) == 0 {
		tc.in = schemas.NewInput(t.Input)
	}
	return tc
}

func (tc truthCheck) check(s *schemas.Schema, doc []byte, max int) ([]schemas.Diagnostic, int, []schemas.Grounding, error) {
	if tc.part {
		return s.CheckPart(doc, tc.in, max)
	}
	return s.Check(doc, tc.in, max)
}
