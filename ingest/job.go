package ingest

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"regexp"
	"strings"
)

// Job is one extraction request: extract Schema from Input. ID is the
// deduplication key end to end (it becomes the Nats-Msg-Id of the job, its
// result and its dead letter).
type Job struct {
	ID           string          `json:"id"`
	Schema       string          `json:"schema"`
	Input        string          `json:"input"`
	Instructions string          `json:"instructions,omitempty"`
	Metadata     json.RawMessage `json:"metadata,omitempty"`
}

// ErrInvalidJob is wrapped by every error ParseJob returns.
var ErrInvalidJob = errors.New("invalid job")

// validToken is what a job id or schema id may hold: they become parts of
// NATS subjects and message ids, so no spaces, dots, wildcards or controls.
var validToken = regexp.MustCompile(`^[A-Za-z0-9_\-:~@+=]{1,200}$`)

// isToken reports whether s matches validToken, without the regexp (it runs
// for every job).
func isToken(s string) bool {
	if len(s) < 1 || len(s) > 200 {
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

// ParseJob decodes and checks one job. The error says which field is wrong
// and why, and wraps ErrInvalidJob.
func ParseJob(data []byte) (Job, error) {
	// The common shape in one pass; anything else by one json.Unmarshal
	// (it rejects trailing data after the object too).
	j, ok := parseJobFast(data)
	if !ok {
		if err := json.Unmarshal(data, &j); err != nil {
			return Job{}, fmt.Errorf("%w: %s", ErrInvalidJob, decodeProblem(err))
		}
	}
	switch {
	case j.ID == "":
		return j, fmt.Errorf("%w: missing required field \"id\"", ErrInvalidJob)
	case !isToken(j.ID):
		return j, fmt.Errorf("%w: field \"id\" %q: use 1-200 of A-Z a-z 0-9 _ - : ~ @ + =", ErrInvalidJob, j.ID)
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

// decodeProblem says in a job author's terms what encoding/json found
// wrong: which field has which JSON type, or where the JSON breaks; never a
// Go type name.
func decodeProblem(err error) string {
	var te *json.UnmarshalTypeError
	var se *json.SyntaxError
	switch {
	case errors.As(err, &te) && te.Field == "":
		return "a job must be a JSON object, got " + withArticle(te.Value)
	case errors.As(err, &te):
		return fmt.Sprintf("field %q must be a string, got %s", te.Field, withArticle(te.Value))
	case errors.As(err, &se):
		return fmt.Sprintf("not valid JSON at byte %d: %s", se.Offset, strings.TrimPrefix(se.Error(), "json: "))
	case errors.Is(err, io.ErrUnexpectedEOF) || strings.Contains(err.Error(), "unexpected end of JSON input"):
		return "not valid JSON: it ends before the object is closed"
	default:
		return "not a JSON object: " + strings.TrimPrefix(err.Error(), "json: ")
	}
}

// withArticle names a JSON type as encoding/json's UnmarshalTypeError
// reports it ("array", "number", "string", "bool", "object").
func withArticle(jsonType string) string {
	switch jsonType {
	case "array", "object":
		return "an " + jsonType
	case "bool":
		return "true or false"
	case "":
		return "another type"
	default:
		if strings.HasPrefix(jsonType, "number") {
			return "a number"
		}
		return "a " + jsonType
	}
}
