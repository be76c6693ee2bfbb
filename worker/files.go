package worker

import (
	"context"
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
