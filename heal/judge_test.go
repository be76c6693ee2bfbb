package heal

import (
	"bytes"
	"errors"
	"reflect"
	"slices"
	"testing"

	"github.com/llmpipeline/pipeline/job"
	"github.com/llmpipeline/pipeline/model"
	"github.com/llmpipeline/pipeline/sanitize"
	"github.com/llmpipeline/pipeline/schemas"
)

// referenceJudge is judge as it was before it validated answers that are
// already JSON without sanitizing them first: Clean, then Validate.
func referenceJudge(l *Loop, s *schemas.Schema, resp model.Response, a *Attempt) ([]byte, string) {
	if isTruncation(resp) {
		a.Class = job.ClassTruncated
		return nil, ""
	}
	clean, err := sanitize.Clean([]byte(resp.Content))
	a.Stages = slices.Clone(clean.Stages)
	switch {
	case errors.Is(err, sanitize.ErrTruncated):
		a.Class = job.ClassTruncated
		return nil, ""
	case err != nil:
		a.Class = job.ClassGrammar
		return nil, grammarFeedback(err.Error())
	}
	diags, omitted, err := s.Validate(clean.JSON, l.cfg.MaxDiagnostics)
	if err != nil {
		a.Class = job.ClassGrammar
		return nil, grammarFeedback(err.Error())
	}
	if len(diags) == 0 {
		a.Class = job.ClassNone
		return bytes.Clone(clean.JSON), ""
	}
	a.Class = job.ClassSchema
	a.Diagnostics = diags
	a.DiagnosticsOmitted = omitted
	return nil, schemaFeedback(schemas.Lines(diags, omitted))
}

var judgeAnswers = []string{
	`{"total":12.5,"currency":"EUR"}`,
	" \n\t{\"total\":12.5,\"currency\":\"EUR\"}\r\n ",
	`{"total":12.5,"currency":"EUR",}`,
	`{"total":"12,50","currency":"eur"}`,
	"```json\n{\"total\":1,\"currency\":\"USD\"}\n```",
	`"{\"total\":1,\"currency\":\"USD\"}"`,
	`[{"total":1,"currency":"USD"}]`,
	`[1,2,]`,
	`{"total":1,"currency":"USD"} trailing words`,
	`{"total":1,"currency":"USD"}{"total":2}`,
	`{"total":`,
	`{"total":1e999999,"currency":"USD"}`,
	"{\"total\":1,\"currency\":\"USD\",\"note\":\"\xff\"}",
	`Here you go: {"total":1,"currency":"USD"}`,
	`no json at all`,
	``,
	`{`,
	`{}`,
}

// TestJudgeMatchesClean: validating an answer that is already JSON before
// sanitizing it gives the class, stages, diagnostics, feedback and data
// that sanitizing first gave.
func TestJudgeMatchesClean(t *testing.T) {
	t.Parallel()
	task := testTask(t)
	l, err := New(&scripted{}, Config{})
	if err != nil {
		t.Fatal(err)
	}
	for _, answer := range judgeAnswers {
		t.Run(answer, func(t *testing.T) {
			t.Parallel()
			checkJudge(t, l, task.Schema, answer)
		})
	}
}

func checkJudge(t *testing.T, l *Loop, s *schemas.Schema, answer string) {
	t.Helper()
	resp := model.Response{Content: answer, FinishReason: model.FinishStop}
	var got, want Attempt
	gotData, _, gotFeedback := l.judge(s, truthCheck{in: schemas.NewInput("")}, resp, &got)
	wantData, wantFeedback := referenceJudge(l, s, resp, &want)
	if !bytes.Equal(gotData, wantData) || gotFeedback != wantFeedback || !reflect.DeepEqual(got, want) {
		t.Fatalf("judge(%q):\n data %q\n feedback %q\n attempt %+v\nsanitizing first:\n data %q\n feedback %q\n attempt %+v",
			answer, gotData, gotFeedback, got, wantData, wantFeedback, want)
	}
}

func FuzzJudge(f *testing.F) {
	for _, a := range judgeAnswers {
		f.Add(a)
	}
	s, err := schemas.Compile("receipt", []byte(testSchema))
	if err != nil {
		f.Fatal(err)
	}
	l, err := New(&scripted{}, Config{})
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, answer string) {
		checkJudge(t, l, s, answer)
	})
}
