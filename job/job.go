// Package job holds the job message as it is submitted: one JSON object
// that asks for Schema to be extracted from Input, its decoding (Parse) and
// the rules of its ids. The id is the deduplication key end to end: it
// becomes the Nats-Msg-Id of the job, its result and its dead letter.
//
//	j, err := job.Parse([]byte(`{"id":"inv-0001","schema":"invoice","input":"..."}`))
//	if errors.Is(err, job.ErrInvalid) { ... } // the error names the field
//
// Job ids and schema ids are what users name things with: file names,
// paths, e-mail addresses, URLs, "ticket.v2", "My Invoice". Neither is
// restricted to what NATS allows where it carries them; the broker and the
// ledger encode them there (broker.SchemaToken, ledger.Key).
package job

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"unicode"
	"unicode/utf8"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
)

const (
	// MaxJobIDBytes bounds a job id.
	MaxJobIDBytes = 512
	// MaxSchemaIDBytes bounds a schema id: a file name's 255 bytes.
	MaxSchemaIDBytes = 255
)

// jobIDRule says what a job id may be, for error messages.
const jobIDRule = "use 1-512 bytes of printable UTF-8, not beginning or ending with a space"

// SchemaIDRule says what a schema id may be (ValidSchemaID), for error
// messages.
const SchemaIDRule = "use 1-255 bytes of printable UTF-8"

// printable reports whether s is valid UTF-8 whose every character is
// printable in the sense of unicode.IsPrint (a letter, mark, number,
// punctuation, symbol or the ASCII space), and not U+FFFD, what invalid
// UTF-8 decodes to: two ids that differ in their invalid bytes would be one.
// Control and format characters (zero-width, bidirectional overrides) and
// other spaces than U+0020 are refused: they hide in logs and terminals,
// and a line break would end the Nats-Msg-Id header.
func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if c := s[i]; c >= utf8.RuneSelf {
			return printableUTF8(s[i:])
		} else if c < ' ' || c == 0x7f {
			return false
		}
	}
	return true
}

func printableUTF8(s string) bool {
	if !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if !unicode.IsPrint(r) || r == utf8.RuneError {
			return false
		}
	}
	return true
}

// isJobID reports whether s can be a job id: 1 to MaxJobIDBytes bytes of
// printable UTF-8 (see printable), spaces inside included, so the ids batch
// inputs come with pass as they are: "inv-0001.pdf", "docs/2024/a.json",
// "ana@example.com", "https://x.example/a?b=c", "inv 7.pdf", "..". It may
// not begin or end with a space: NATS drops the spaces a header value
// begins with, so " a" would be deduplicated as "a", and no table shows
// the spaces a value ends with.
func isJobID(s string) bool {
	return len(s) >= 1 && len(s) <= MaxJobIDBytes && s[0] != ' ' && s[len(s)-1] != ' ' && printable(s)
}

// ValidSchemaID reports whether id can be a schema id: 1 to
// MaxSchemaIDBytes bytes of printable UTF-8 (see printable), dots and
// spaces included ("ticket.v2", "foo-1.0.0", "My Invoice").
func ValidSchemaID(id string) bool {
	return len(id) >= 1 && len(id) <= MaxSchemaIDBytes && printable(id)
}

// jobIDError says why id is not a job id.
func jobIDError(id string) string {
	if len(id) > MaxJobIDBytes {
		return fmt.Sprintf("field \"id\" is %d bytes, over the limit of %d: %s", len(id), MaxJobIDBytes, jobIDRule)
	}
	return fmt.Sprintf("field \"id\" %q: %s", id, jobIDRule)
}

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
	// Files are images and PDFs the model reads with Input (see File);
	// Input may then be empty.
	Files []File `json:"files,omitempty"`
	// Chunking overrides submit's --chunk-chars and --chunk-overlap for
	// this job (chunk.go).
	Chunking *Chunking `json:"chunking,omitempty"`
	// Chunk is set on the chunk jobs submit makes of a long document: which
	// part of which document this job's input is (chunk.go).
	Chunk *ChunkOf `json:"chunk,omitempty"`
}

// ErrInvalid is wrapped by every error Parse returns.
var ErrInvalid = errors.New("invalid job")

// jobOptions decode a job as encoding/json always has, with json v2's
// speed: member names match case-insensitively (but "i_d" is not "id"), a
// member given twice counts once (the last), invalid UTF-8 reads as U+FFFD.
// Anything after the object is an error.
func jobOptions() jsonv2.Options { return jobOpts }

// jobOpts are jobOptions joined once (JoinOptions allocates); never changed.
var jobOpts = jsonv2.JoinOptions(jsonv2.MatchCaseInsensitiveNames(true), jsonv1.MatchCaseSensitiveDelimiter(true),
	jsontext.AllowDuplicateNames(true), jsontext.AllowInvalidUTF8(true))

// Parse decodes and checks one job. The error says which field is wrong
// and why, and wraps ErrInvalid.
func Parse(data []byte) (Job, error) {
	var j Job
	if err := jsonv2.Unmarshal(data, &j, jobOptions()); err != nil {
		return Job{}, fmt.Errorf("%w: %s", ErrInvalid, decodeProblem(err))
	}
	switch {
	case j.ID == "":
		return j, fmt.Errorf("%w: missing required field \"id\"", ErrInvalid)
	case !isJobID(j.ID):
		return j, fmt.Errorf("%w: %s", ErrInvalid, jobIDError(j.ID))
	case j.Schema == "":
		return j, fmt.Errorf("%w: missing required field \"schema\"", ErrInvalid)
	case !ValidSchemaID(j.Schema):
		return j, fmt.Errorf("%w: field \"schema\" %q: %s", ErrInvalid, j.Schema, SchemaIDRule)
	case j.Input == "" && len(j.Files) == 0:
		return j, fmt.Errorf("%w: missing required field \"input\" (or \"files\")", ErrInvalid)
	}
	for i, f := range j.Files {
		if p := checkFile(i, f); p != "" {
			return j, fmt.Errorf("%w: field %s", ErrInvalid, p)
		}
	}
	if len(j.Metadata) > 0 && j.Metadata[0] != '{' {
		return j, fmt.Errorf("%w: field \"metadata\" must be an object", ErrInvalid)
	}
	if err := j.checkChunk(); err != nil {
		return j, fmt.Errorf("%w: %s", ErrInvalid, err)
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
		switch {
		case field == "metadata":
			want = "an object"
		case field == "files":
			want = "an array of paths or {\"path\"|\"url\", \"name\"} objects"
		case strings.HasPrefix(field, "files/"):
			want = "a path or an object"
			if strings.Count(field, "/") > 1 {
				want = "a string"
			}
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
