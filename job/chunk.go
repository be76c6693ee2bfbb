package job

import (
	"errors"
	"fmt"
	"strconv"
)

// Chunking is a job's own splitting: documents longer than Chars
// characters become chunk jobs of at most Chars characters, consecutive
// ones sharing Overlap characters. Chars 0 keeps the job whole.
type Chunking struct {
	Chars   int `json:"chars"`
	Overlap int `json:"overlap,omitzero"`
}

// ChunkOf says which part of a long document a chunk job is: chunk K of N
// (K from 1) of the document whose job id is Document, its characters
// [Start, End) of the document's Chars.
type ChunkOf struct {
	Document string `json:"document"`
	K        int    `json:"k"`
	N        int    `json:"n"`
	Start    int    `json:"start"`
	End      int    `json:"end"`
	Chars    int    `json:"chars,omitzero"`
	// Instructions are the document's own instructions (the chunk job's
	// begin with the line telling the model which part it reads).
	Instructions string `json:"instructions,omitempty"`
}

// ChunkID is the job id of chunk k of document id: "<id>#<k>".
func ChunkID(id string, k int) string { return id + "#" + strconv.Itoa(k) }

// MaxChunkedIDBytes bounds the id of a job that is split: its chunks' ids
// add "#" and up to 6 digits.
const MaxChunkedIDBytes = MaxJobIDBytes - 7

func (j *Job) checkChunk() error {
	if c := j.Chunking; c != nil {
		if c.Chars < 0 || c.Overlap < 0 || (c.Chars > 0 && c.Overlap*2 >= c.Chars) {
			return errors.New(`field "chunking": "chars" must be 0 or more and "overlap" from 0 to under half of "chars"`)
		}
	}
	c := j.Chunk
	if c == nil {
		return nil
	}
	switch {
	case c.Document == "" || !isJobID(c.Document):
		return errors.New(`field "chunk": "document" must be a job id`)
	case c.N < 1 || c.K < 1 || c.K > c.N:
		return fmt.Errorf(`field "chunk": part %d of %d: "k" must be from 1 to "n"`, c.K, c.N)
	case c.Start < 0 || c.End < c.Start:
		return fmt.Errorf(`field "chunk": range [%d, %d) is not a range`, c.Start, c.End)
	case j.ID != ChunkID(c.Document, c.K):
		return fmt.Errorf(`field "chunk": a chunk's id is %q, not %q`, ChunkID(c.Document, c.K), j.ID)
	}
	return nil
}
