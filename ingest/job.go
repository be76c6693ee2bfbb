package ingest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
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

// ParseJob decodes and checks one job. The error says which field is wrong
// and why, and wraps ErrInvalidJob.
func ParseJob(data []byte) (Job, error) {
	var j Job
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&j); err != nil {
		return Job{}, fmt.Errorf("%w: not a JSON object: %v", ErrInvalidJob, err)
	}
	if dec.More() {
		return Job{}, fmt.Errorf("%w: trailing data after the JSON object", ErrInvalidJob)
	}
	switch {
	case j.ID == "":
		return j, fmt.Errorf("%w: missing required field \"id\"", ErrInvalidJob)
	case !validToken.MatchString(j.ID):
		return j, fmt.Errorf("%w: field \"id\" %q: use 1-200 of A-Z a-z 0-9 _ - : ~ @ + =", ErrInvalidJob, j.ID)
	case j.Schema == "":
		return j, fmt.Errorf("%w: missing required field \"schema\"", ErrInvalidJob)
	case !validToken.MatchString(j.Schema):
		return j, fmt.Errorf("%w: field \"schema\" %q: use 1-200 of A-Z a-z 0-9 _ - : ~ @ + =", ErrInvalidJob, j.Schema)
	case j.Input == "":
		return j, fmt.Errorf("%w: missing required field \"input\"", ErrInvalidJob)
	}
	if len(j.Metadata) > 0 && j.Metadata[0] != '{' {
		return j, fmt.Errorf("%w: field \"metadata\" must be an object", ErrInvalidJob)
	}
	return j, nil
}
