package payload_test

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"io"
	"strings"
	"testing"

	"github.com/llmpipeline/pipeline/internal/brokertest"
	"github.com/llmpipeline/pipeline/internal/payload"
)

func digest(b []byte) string {
	s := sha256.Sum256(b)
	return hex.EncodeToString(s[:])
}

// TestFilesStoredOnce: a file put twice is stored once (the second put
// writes nothing), reads back whole with its media type, and a content
// that does not hash to its digest is refused and not kept.
func TestFilesStoredOnce(t *testing.T) {
	store := brokertest.NewConn(t).Payloads()
	ctx := t.Context()
	data := []byte("%PDF-1.4\n" + strings.Repeat("x", 300<<10))
	d := digest(data)
	for i, want := range []bool{true, false} {
		stored, err := store.PutFile(ctx, d, "application/pdf", int64(len(data)), bytes.NewReader(data))
		if err != nil || stored != want {
			t.Fatalf("put %d: stored %v, %v; want %v", i+1, stored, err, want)
		}
	}
	if list, err := store.Files(ctx); err != nil || len(list) != 1 || list[0] != d {
		t.Fatalf("Files = %v, %v; want the one digest", list, err)
	}
	info, ok, err := store.StatFile(ctx, d)
	if err != nil || !ok || info.Size != int64(len(data)) || info.MediaType != "application/pdf" {
		t.Fatalf("StatFile = %+v, %v, %v", info, ok, err)
	}
	r, err := store.OpenFile(ctx, d)
	if err != nil {
		t.Fatal(err)
	}
	got, err := io.ReadAll(r)
	r.Close()
	if err != nil || !bytes.Equal(got, data) {
		t.Fatalf("read back %d bytes, %v", len(got), err)
	}

	other := []byte("not what the digest says")
	if _, err := store.PutFile(ctx, digest([]byte("something else")), "image/png", int64(len(other)), bytes.NewReader(other)); !errors.Is(err, payload.ErrCorrupt) {
		t.Fatalf("put of a content that is not its digest: %v, want ErrCorrupt", err)
	}
	if list, _ := store.Files(ctx); len(list) != 1 {
		t.Errorf("the refused content was kept: %v", list)
	}
	if err := store.DeleteFile(ctx, d); err != nil {
		t.Fatal(err)
	}
	if _, err := store.OpenFile(ctx, d); !errors.Is(err, payload.ErrMissing) {
		t.Errorf("OpenFile after DeleteFile: %v, want ErrMissing", err)
	}
}
