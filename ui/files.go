package ui

import (
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	"github.com/llmpipeline/pipeline/job"
)

// file serves a job's file from the object store by its digest: with its
// media type as Content-Type, inline for an image, as an attachment
// (named by ?name=) for anything else, so a PDF is downloaded, never
// rendered in the console's origin.
func (s *Server) file(w http.ResponseWriter, r *http.Request) {
	digest := r.PathValue("digest")
	if !job.ValidDigest(digest) {
		s.fail(w, r, http.StatusBadRequest, errors.New("a file is named by its sha256: 64 lowercase hex digits"))
		return
	}
	if s.cfg.Conn == nil {
		s.fail(w, r, http.StatusServiceUnavailable, errors.New("no connection to the broker: files are not served"))
		return
	}
	store := s.cfg.Conn.Payloads()
	info, ok, err := store.StatFile(r.Context(), digest)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	if !ok {
		s.fail(w, r, http.StatusNotFound, fmt.Errorf("file %s is not in the object store (purged with the last job that named it?)", digest))
		return
	}
	rc, err := store.OpenFile(r.Context(), digest)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	defer rc.Close()
	mt := info.MediaType
	if mt == "" {
		mt = "application/octet-stream"
	}
	name := r.URL.Query().Get("name")
	if name == "" {
		name = digest[:12]
	}
	h := w.Header()
	h.Set("Content-Type", mt)
	h.Set("Content-Length", strconv.FormatInt(info.Size, 10))
	h.Set("X-Content-Type-Options", "nosniff")
	disposition := "attachment"
	if strings.HasPrefix(mt, "image/") {
		disposition = "inline"
	}
	h.Set("Content-Disposition", mime.FormatMediaType(disposition, map[string]string{"filename": name}))
	_, _ = io.Copy(w, rc) // a failed copy (the client went away, a digest mismatch) ends the body short
}
