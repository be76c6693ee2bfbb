package payload

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// KindFiles prefixes the objects that hold jobs' files (images, PDFs):
// files/<sha-256>, one object per content whatever the number of jobs
// that name it.
const KindFiles = "files"

// HeaderFiles, on a job message, lists the SHA-256 of every file the job
// names, comma separated: what a purge reads to know which files jobs
// still on the queue need, without reading their bodies.
const HeaderFiles = "Pipeline-Files"

// headerMediaType is the object header that keeps a file's media type.
const headerMediaType = "Content-Type"

// FileObject is the object name of the file whose SHA-256 is digest.
func FileObject(digest string) string { return KindFiles + "/" + digest }

// FileInfo is what the object store says of a stored file.
type FileInfo struct {
	Digest    string
	Size      int64
	MediaType string
	// Stored is when the object store wrote the file.
	Stored time.Time
}

// StatFile returns the stored file of digest; ok is false when there is
// none (or none whole).
func (s *Store) StatFile(ctx context.Context, digest string) (FileInfo, bool, error) {
	ctx, cancel := WithDefaultTimeout(ctx, payloadOpTimeout)
	defer cancel()
	info, err := s.obs.GetInfo(ctx, FileObject(digest))
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return FileInfo{}, false, nil
	}
	if err != nil {
		return FileInfo{}, false, fmt.Errorf("looking up file %s in object store %s: %w", digest, Bucket, err)
	}
	fi := FileInfo{Digest: digest, Size: int64(info.Size), Stored: info.ModTime}
	if info.Headers != nil {
		fi.MediaType = info.Headers.Get(headerMediaType)
	}
	return fi, objectDigestIs(info.Digest, digest), nil
}

// PutFile stores size bytes of r, whose SHA-256 is digest (hex), as
// FileObject(digest), unless that object is stored already: the same
// file named by many jobs is stored once. stored reports whether this
// call wrote it. Content that does not hash to digest (the file changed
// while it was read) is deleted and refused.
func (s *Store) PutFile(ctx context.Context, digest, mediaType string, size int64, r io.Reader) (stored bool, err error) {
	if _, ok, err := s.StatFile(ctx, digest); err != nil || ok {
		return false, err
	}
	ctx, cancel := WithDefaultTimeout(ctx, payloadOpTimeout)
	defer cancel()
	name := FileObject(digest)
	meta := jetstream.ObjectMeta{Name: name, Headers: nats.Header{headerMediaType: []string{mediaType}}}
	info, err := s.obs.Put(ctx, meta, r)
	if err != nil {
		return false, fmt.Errorf("putting file %s (%d bytes) in object store %s: %w", digest, size, Bucket, err)
	}
	if !objectDigestIs(info.Digest, digest) || int64(info.Size) != size {
		s.Drop(ctx, name)
		return false, fmt.Errorf("putting file %s in object store %s: %w: the file changed while it was read (%d bytes stored, %d read first)", digest, Bucket, ErrCorrupt, info.Size, size)
	}
	return true, nil
}

// OpenFile opens the stored file of digest for reading; the object store
// checks its content against its digest at the end of the read (the
// reader's last Read then fails). A missing file is ErrMissing.
func (s *Store) OpenFile(ctx context.Context, digest string) (io.ReadCloser, error) {
	res, err := s.obs.Get(ctx, FileObject(digest))
	if errors.Is(err, jetstream.ErrObjectNotFound) {
		return nil, fmt.Errorf("reading file %s from object store %s: %w", digest, Bucket, ErrMissing)
	}
	if err != nil {
		return nil, fmt.Errorf("reading file %s from object store %s: %w", digest, Bucket, err)
	}
	return res, nil
}

// DeleteFile deletes the stored file of digest (none is not an error).
func (s *Store) DeleteFile(ctx context.Context, digest string) error {
	ctx, cancel := WithDefaultTimeout(ctx, payloadOpTimeout)
	defer cancel()
	if err := s.obs.Delete(ctx, FileObject(digest)); err != nil && !errors.Is(err, jetstream.ErrObjectNotFound) {
		return fmt.Errorf("deleting file %s from object store %s: %w", digest, Bucket, err)
	}
	return nil
}

// Files lists the digests of the stored files (ListFiles).
func (s *Store) Files(ctx context.Context) ([]string, error) {
	list, err := s.ListFiles(ctx)
	out := make([]string, 0, len(list))
	for _, f := range list {
		out = append(out, f.Digest)
	}
	return out, err
}

// ListFiles lists the stored files, with their size and when each was
// stored.
func (s *Store) ListFiles(ctx context.Context) ([]FileInfo, error) {
	ctx, cancel := WithDefaultTimeout(ctx, payloadOpTimeout)
	defer cancel()
	list, err := s.obs.List(ctx)
	if errors.Is(err, jetstream.ErrNoObjectsFound) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("listing object store %s: %w", Bucket, err)
	}
	var out []FileInfo
	for _, o := range list {
		if d, ok := strings.CutPrefix(o.Name, KindFiles+"/"); ok {
			out = append(out, FileInfo{Digest: d, Size: int64(o.Size), Stored: o.ModTime})
		}
	}
	return out, nil
}

// objectDigestIs reports whether the object store's digest of an object
// ("SHA-256=" and base64url) is hexDigest.
func objectDigestIs(objDigest, hexDigest string) bool {
	raw, err := jetstream.DecodeObjectDigest(objDigest)
	return err == nil && hex.EncodeToString(raw) == hexDigest
}
