package worker

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"github.com/llmpipeline/pipeline/job"
	"github.com/llmpipeline/pipeline/model"
)

// files turns the job's file references into the model's files, each
// read from the object store when a provider writes its request. A file
// the store does not hold (or not whole) makes missing say which; err is
// a store that could not be asked (the job is handed back).
func (h *Handler) files(ctx context.Context, j job.Job) (files []model.File, missing string, err error) {
	if len(j.Files) == 0 {
		return nil, "", nil
	}
	if h.cfg.Files == nil {
		return nil, "", errors.New("this worker has no object store for files")
	}
	files = make([]model.File, 0, len(j.Files))
	for i, f := range j.Files {
		if !f.Stored() {
			return nil, fmt.Sprintf("files[%d] %q is not a stored file (submit it with `pipeline submit`, which stores it)", i, f.Name), nil
		}
		info, ok, err := h.cfg.Files.StatFile(ctx, f.SHA256)
		if err != nil {
			return nil, "", err
		}
		if !ok || info.Size != f.Bytes {
			return nil, fmt.Sprintf("files[%d] %q (sha256 %s, %d bytes) is missing from the object store", i, f.Name, f.SHA256, f.Bytes), nil
		}
		digest := f.SHA256
		files = append(files, model.File{Name: f.Name, MediaType: f.MediaType, Size: f.Bytes, SHA256: digest,
			Width: f.Width, Height: f.Height, Pages: f.Pages,
			Open: func(ctx context.Context) (io.ReadCloser, error) { return h.cfg.Files.OpenFile(ctx, digest) }})
	}
	return files, "", nil
}

// UseFiles sets where the handler reads the jobs' files (Config.Files),
// for a handler built before its connection; call it before serving.
func (h *Handler) UseFiles(fs FileStore) { h.cfg.Files = fs }

// withoutFileBytes returns the job JSON raw with the data URLs of its
// files (files[i].url) removed: a job published straight on the work
// queue (not through `pipeline submit`, which stores every file) may carry
// its files' bytes, and an outcome records the job, never a file's bytes.
// A job with no file URL is returned as it is.
func withoutFileBytes(raw json.RawMessage) json.RawMessage {
	if !bytes.Contains(raw, []byte(`"url"`)) {
		return raw
	}
	var top map[string]json.RawMessage
	if json.Unmarshal(raw, &top) != nil {
		return raw // not an object: a string of what arrived, no files
	}
	var files []json.RawMessage
	if json.Unmarshal(top["files"], &files) != nil {
		return raw
	}
	changed := false
	for i, f := range files {
		var item map[string]json.RawMessage
		if json.Unmarshal(f, &item) != nil {
			continue
		}
		if _, ok := item["url"]; !ok {
			continue
		}
		delete(item, "url")
		b, err := json.Marshal(item)
		if err != nil {
			continue
		}
		files[i], changed = b, true
	}
	if !changed {
		return raw
	}
	b, err := json.Marshal(files)
	if err != nil {
		return raw
	}
	top["files"] = b
	out, err := json.Marshal(top)
	if err != nil {
		return raw
	}
	return out
}
