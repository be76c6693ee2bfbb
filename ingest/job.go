package ingest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

// Job is one extraction request: extract Schema from Input. ID is the
// deduplication key end to end (it becomes the Nats-Msg-Id of the job, its
// result and its dead letter); it may be a file name, a path, an email
// address, a URL or any other printable text (see isJobID). Schema is a
// schema id (see ValidSchemaID).
type Job struct {
	ID           string          `json:"id"`
	Schema       string          `json:"schema"`
	Input        string          `json:"input"`
	Instructions string          `json:"instructions,omitempty"`
	Metadata     json.RawMessage `json:"metadata,omitempty"`
}

// ErrInvalidJob is wrapped by every error ParseJob returns.
var ErrInvalidJob = errors.New("invalid job")

// jobOptions decode a job as encoding/json always has, with json v2's
// speed: member names match case-insensitively (but "i_d" is not "id"), a
// member given twice counts once (the last), invalid UTF-8 reads as U+FFFD.
// Anything after the object is an error.
func jobOptions() jsonv2.Options { return jobOpts }

// jobOpts are jobOptions joined once (JoinOptions allocates); never changed.
var jobOpts = jsonv2.JoinOptions(jsonv2.MatchCaseInsensitiveNames(true), jsonv1.MatchCaseSensitiveDelimiter(true),
	jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))

// ParseJob decodes and checks one job. The error says which field is wrong
// and why, and wraps ErrInvalidJob.
func ParseJob(data []byte) (Job, error) {
	var j Job
	if err := jsonv2.Unmarshal(data, &j, jobOptions()); err != nil {
		return Job{}, fmt.Errorf("%w: %s", ErrInvalidJob, decodeProblem(err))
	}
	switch {
	case j.ID == "":
		return j, fmt.Errorf("%w: missing required field \"id\"", ErrInvalidJob)
	case !isJobID(j.ID):
		return j, fmt.Errorf("%w: %s", ErrInvalidJob, jobIDError(j.ID))
	case j.Schema == "":
		return j, fmt.Errorf("%w: missing required field \"schema\"", ErrInvalidJob)
	case !ValidSchemaID(j.Schema):
		return j, fmt.Errorf("%w: field \"schema\" %q: %s", ErrInvalidJob, j.Schema, schemaIDRule)
	case j.Input == "":
		return j, fmt.Errorf("%w: missing required field \"input\"", ErrInvalidJob)
	}
	if len(j.Metadata) > 0 && j.Metadata[0] != '{' {
		return j, fmt.Errorf("%w: field \"metadata\" must be an object", ErrInvalidJob)
	}
	return j, nil
}

// decodeProblem says in JSON's terms, never Go's, why a job did not decode:
// "a job must be a JSON object, got an array", "field "input" must be a
// string, got a number", "not valid JSON at byte 12: ...".
func decodeProblem(err error) string {
	var se *jsonv2.SemanticError
	var sy *jsontext.SyntacticError
	switch {
	case errors.Is(err, io.ErrUnexpectedEOF):
		return "not valid JSON: it ends before the object is closed"
	case errors.As(err, &sy):
		return fmt.Sprintf("not valid JSON at byte %d: %v", sy.ByteOffset, sy.Err)
	case errors.As(err, &se) && se.JSONPointer == "":
		return "a job must be a JSON object, got " + kindName(se.JSONKind)
	case errors.As(err, &se):
		field := strings.TrimPrefix(string(se.JSONPointer), "/")
		want := "a string"
		if field == "metadata" {
			want = "an object"
		}
		return fmt.Sprintf("field %q must be %s, got %s", field, want, kindName(se.JSONKind))
	default:
		return "not a JSON object: " + err.Error()
	}
}

// kindName names a JSON value's kind with its article.
func kindName(k jsontext.Kind) string {
	switch k {
	case '{':
		return "an object"
	case '[':
		return "an array"
	case '"':
		return "a string"
	case '0':
		return "a number"
	case 't', 'f':
		return "true or false"
	case 'n':
		return "null"
	}
	return "another type"
}
