package job

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
)

// Media types a job's file may have: the images and documents both
// providers take natively (OpenAI image_url and file parts, Anthropic
// image and document blocks).
const (
	MediaPNG  = "image/png"
	MediaJPEG = "image/jpeg"
	MediaGIF  = "image/gif"
	MediaWebP = "image/webp"
	MediaPDF  = "application/pdf"
)

// MaxFileNameBytes bounds a file's name.
const MaxFileNameBytes = 255

// File is one file of a job: an image or a PDF the model reads with the
// input. On a submitted line it is a path (a JSON string, or {"path": ...})
// or a data URL ({"url": "data:<media type>;base64,..."}), with an optional
// "name". Submit stores its bytes once in the object store, keyed by their
// SHA-256, and the job on the queue carries the reference: Name,
// MediaType, Bytes, SHA256 (and, for the token estimates, Width and Height
// of an image, Pages of a PDF), never the bytes.
type File struct {
	Path      string `json:"path,omitempty"`
	URL       string `json:"url,omitempty"`
	Name      string `json:"name,omitempty"`
	MediaType string `json:"media_type,omitempty"`
	Bytes     int64  `json:"bytes,omitzero"`
	SHA256    string `json:"sha256,omitempty"`
	Width     int    `json:"width,omitzero"`
	Height    int    `json:"height,omitzero"`
	Pages     int    `json:"pages,omitzero"`
}

// UnmarshalJSON reads a file given as a path string or as an object.
func (f *File) UnmarshalJSON(b []byte) error {
	b = bytes.TrimSpace(b)
	if len(b) > 0 && b[0] == '"' {
		*f = File{}
		return json.Unmarshal(b, &f.Path)
	}
	type plain File
	var p plain
	if err := json.Unmarshal(b, &p); err != nil {
		return err
	}
	*f = File(p)
	return nil
}

// Stored reports whether f is a reference to stored bytes (what submit
// publishes), not a path or a data URL to read.
func (f File) Stored() bool { return f.Path == "" && f.URL == "" && f.SHA256 != "" }

// Image reports whether f's media type is an image's.
func (f File) Image() bool { return strings.HasPrefix(f.MediaType, "image/") }

// Supported reports whether mediaType is one a job's file may have.
func Supported(mediaType string) bool {
	switch mediaType {
	case MediaPNG, MediaJPEG, MediaGIF, MediaWebP, MediaPDF:
		return true
	}
	return false
}

// SupportedTypes names the media types a file may have, for messages.
const SupportedTypes = "PNG, JPEG, WebP or GIF images, or PDF"

// Sniff decides a file's media type from its first bytes (512 are
// enough), never from its name: http.DetectContentType's signatures.
// ok is false for anything but a supported type; mediaType then says
// what the bytes look like ("text/plain", "application/octet-stream").
func Sniff(head []byte) (mediaType string, ok bool) {
	t := http.DetectContentType(head)
	if i := strings.IndexByte(t, ';'); i >= 0 {
		t = t[:i]
	}
	return t, Supported(t)
}

// checkFile says what is wrong with the i-th file of a job, "" when
// nothing.
func checkFile(i int, f File) string {
	at := fmt.Sprintf("files[%d]", i)
	given := 0
	for _, s := range []string{f.Path, f.URL} {
		if s != "" {
			given++
		}
	}
	switch {
	case given > 1:
		return at + ": give one of \"path\" or \"url\", not both"
	case given == 0 && f.SHA256 == "":
		return at + ": a file needs \"path\" or \"url\""
	case len(f.Name) > MaxFileNameBytes:
		return fmt.Sprintf("%s: \"name\" is %d bytes, over the limit of %d", at, len(f.Name), MaxFileNameBytes)
	case f.Name != "" && !printable(f.Name):
		return at + ": \"name\" must be printable UTF-8"
	case f.URL != "" && !strings.HasPrefix(f.URL, "data:"):
		return at + ": \"url\" must be a data URL (data:<media type>;base64,...)"
	case given == 0 && !ValidDigest(f.SHA256):
		return at + ": \"sha256\" must be 64 lowercase hex digits"
	case given == 0 && !Supported(f.MediaType):
		return fmt.Sprintf("%s: media type %q is not one of %s", at, f.MediaType, SupportedTypes)
	}
	return ""
}

// ValidDigest reports whether s is a SHA-256 as files are named by: 64
// lowercase hex digits.
func ValidDigest(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// Records names files as outcomes keep them: name, media type, bytes and
// sha256 of each (nil for none).
func Records(files []File) []File {
	if len(files) == 0 {
		return nil
	}
	out := make([]File, len(files))
	for i, f := range files {
		out[i] = File{Name: f.Name, MediaType: f.MediaType, Bytes: f.Bytes, SHA256: f.SHA256}
	}
	return out
}
