package ingest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
	"unicode"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

// Job is one extraction request: extract Schema from Input. ID is the
// deduplication key end to end (it becomes the Nats-Msg-Id of the job, its
// result and its dead letter); it may be a file name, a path, an email
// address or any other printable text without spaces (see isJobID).
type Job struct {
	ID           string          `json:"id"`
	Schema       string          `json:"schema"`
	Input        string          `json:"input"`
	Instructions string          `json:"instructions,omitempty"`
	Metadata     json.RawMessage `json:"metadata,omitempty"`
}

// ErrInvalidJob is wrapped by every error ParseJob returns.
var ErrInvalidJob = errors.New("invalid job")

// validToken is what a schema id may hold: it becomes a token of NATS
// subjects (pipeline.jobs.<schema>), so no spaces, dots, wildcards or
// controls.
var validToken = regexp.MustCompile(`^[A-Za-z0-9_\-:~@+=]{1,200}$`)

// isToken reports whether s matches validToken, without the regexp (it runs
// for every job).
func isToken(s string) bool {
	if len(s) < 1 || len(s) > maxIDBytes {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
		case c == '_', c == '-', c == ':', c == '~', c == '@', c == '+', c == '=':
		default:
			return false
		}
	}
	return true
}

// maxIDBytes bounds a job id (and a schema id).
const maxIDBytes = 200

// isJobID reports whether s can be a job id: 1 to maxIDBytes bytes of
// UTF-8 whose every character is printable (a letter, mark, digit,
// punctuation or symbol) and not a space. A job id is never a subject token
// itself (the ledger escapes it into its key, see LedgerKey), so the ids
// batch inputs come with pass as they are: "inv-0001.pdf",
// "docs/2024/a.json", "user@example.com", "façade-7" ("inv 7.pdf" does not,
// for its space). Spaces,
// control and format characters (zero-width, bidirectional overrides) are
// refused: they hide in logs and terminals, and a line break would end the
// Nats-Msg-Id header. So is U+FFFD, what invalid UTF-8 decodes to: two ids
// that differ in their invalid bytes would be one.
func isJobID(s string) bool {
	if len(s) < 1 || len(s) > maxIDBytes || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r >= utf8.RuneSelf {
			if !unicode.IsGraphic(r) || unicode.IsSpace(r) || r == utf8.RuneError {
				return false
			}
		} else if r <= ' ' || r == 0x7f {
			return false
		}
	}
	return true
}

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
		return j, fmt.Errorf("%w: field \"id\" %q: use 1-200 bytes of printable characters, without spaces", ErrInvalidJob, j.ID)
	case j.Schema == "":
		return j, fmt.Errorf("%w: missing required field \"schema\"", ErrInvalidJob)
	case !isToken(j.Schema):
		return j, fmt.Errorf("%w: field \"schema\" %q: use 1-200 of A-Z a-z 0-9 _ - : ~ @ + =", ErrInvalidJob, j.Schema)
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
