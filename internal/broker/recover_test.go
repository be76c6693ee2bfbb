package broker

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/internal/poll"
	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

func TestIsStorageError(t *testing.T) {
	t.Parallel()
	api := func(code server.ErrorIdentifier) error {
		return fmt.Errorf("publishing: %w", &jetstream.APIError{ErrorCode: jetstream.ErrorCode(code), Code: 503, Description: "x"})
	}
	for _, tc := range []struct {
		name string
		err  error
		want bool
	}{
		{"insufficient resources", api(server.JSInsufficientResourcesErr), true},
		{"storage exceeded", api(server.JSStorageResourcesExceededErr), true},
		{"jetstream not enabled", api(server.JSNotEnabledErr), true},
		{"not enabled for account", jetstream.ErrJetStreamNotEnabledForAccount, true},
		{"store failed", api(server.JSStreamStoreFailedF), true},
		{"no space left", errors.New("write /x/1.blk: no space left on device"), true},
		{"nats store error", &StoreError{Store: StoreNATS, Path: "/d", Err: errors.New("x")}, true},
		{"sqlite store error", &StoreError{Store: StoreSQLite, Path: "/d", Err: errors.New("x")}, false},
		{"publish timeout", fmt.Errorf("publishing: %w", context.DeadlineExceeded), false},
		{"no responders", nats.ErrNoResponders, false},
		{"cluster electing", api(server.JSClusterNotAvailErr), false},
		{"stream not found", jetstream.ErrStreamNotFound, false},
		{"nil", nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := IsStorageError(tc.err); got != tc.want {
				t.Errorf("IsStorageError(%v) = %v, want %v", tc.err, got, tc.want)
			}
		})
	}
}

// mountTmpfs mounts a small tmpfs for the test, or skips it saying why.
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "disk")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		t.Skipf("skipped: the test fills a %s tmpfs, and mounting one needs root (uid %d)", size, os.Geteuid())
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("skipped: cannot mount a %s tmpfs here: %v", size, err)
	}
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmounting %s: %v", dir, err)
		}
	})
	return dir
}

func fill(t *testing.T, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	for {
		if _, err := f.Write(chunk); err != nil {
			if !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("filling the disk: %v", err)
			}
			return
		}
	}
}

// publishID publishes a 64 KiB message under id: more than a full disk
// has left in the store's last page.
func publishID(ctx context.Context, c *Conn, id string) (*jetstream.PubAck, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Second)
	defer cancel()
	data := fmt.Appendf(nil, `{"job_id":%q,"pad":"%s"}`, id, strings.Repeat("x", 64<<10))
	return c.js.PublishMsg(ctx, NewMsg(SubjectResults+".invoice", id, data))
}

// TestRecoverStoreAfterDiskFull fills the disk under the embedded server:
// the stream's write fails and stays failed after the disk has room again
// (nats-server's file store keeps its write error), until Store.Recover
// reloads the store; then writes go through and the duplicate window is
// still there.
func TestRecoverStoreAfterDiskFull(t *testing.T) {
	disk := mountTmpfs(t, "16m")
	c := newConn(t, func(cfg *Config) { cfg.DataDir = filepath.Join(disk, "data") })
	ctx := t.Context()
	if err := c.Store().Fault(); err != nil {
		t.Fatalf("Store.Fault on a fresh store: %v", err)
	}
	if _, err := publishID(ctx, c, "before"); err != nil {
		t.Fatal(err)
	}

	filler := filepath.Join(disk, "filler")
	fill(t, filler)
	if _, err := publishID(ctx, c, "during"); err == nil {
		t.Fatal("a publish on a full disk was acknowledged")
	}
	fault := c.Store().Fault()
	var se *StoreError
	if !errors.As(fault, &se) || se.Store != StoreNATS || se.Path != c.Store().Dir() {
		t.Fatalf("Store.Fault = %v, want a nats StoreError at %s", fault, c.Store().Dir())
	}
	if !strings.Contains(fault.Error(), "no space left on device") || !strings.Contains(fault.Error(), StreamResults) {
		t.Errorf("Store.Fault does not name the stream and the cause: %v", fault)
	}
	if err := c.Store().Recover(ctx); !errors.Is(err, ErrNoRoom) {
		t.Errorf("Store.Recover on a full disk = %v, want ErrNoRoom", err)
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	// Room again, and still the stream refuses: the fault this fixes.
	if _, err := publishID(ctx, c, "during"); err == nil {
		t.Log("the stream took a write after the free without a reload (nats-server changed?)")
	}
	if err := c.Store().Recover(ctx); err != nil {
		t.Fatalf("Store.Recover once the disk has room: %v", err)
	}
	if err := c.Store().Fault(); err != nil {
		t.Fatalf("Store.Fault after the reload: %v", err)
	}
	var ack *jetstream.PubAck
	poll.UntilOK(t, 10*time.Second, "a publish after the reload", func() (err error) {
		ack, err = publishID(ctx, c, "during")
		return err
	})
	if ack.Duplicate {
		t.Errorf("the write refused on the full disk was stored after all (ack %+v)", ack)
	}
	again, err := publishID(ctx, c, "before")
	if err != nil {
		t.Fatal(err)
	}
	if !again.Duplicate {
		t.Errorf("the message stored before the fault is not a duplicate after the reload: the duplicate window was lost (ack %+v)", again)
	}
	st, err := c.StreamState(ctx, StreamResults)
	if err != nil {
		t.Fatal(err)
	}
	if st.Msgs != 2 {
		t.Errorf("RESULTS holds %d messages, want 2", st.Msgs)
	}

	joined, err := Connect(ctx, Config{DataDir: filepath.Join(disk, "data")})
	if err != nil {
		t.Fatal(err)
	}
	defer joined.Close()
	if err := joined.Store().Recover(ctx); !errors.Is(err, ErrNotEmbedded) {
		t.Errorf("Store.Recover on a Conn that joined the server = %v, want ErrNotEmbedded", err)
	}
	if err := joined.Store().Fault(); err != nil {
		t.Errorf("Store.Fault on a Conn that joined the server = %v, want nil", err)
	}
}
