package faults

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/nats-io/nats.go/jetstream"

	"github.com/llmpipeline/pipeline/internal/poll"
)

// Settings of the full-disk scenario.
const (
	diskSize = "64m"
	// diskFullHold is how long the disk stays full once the pipeline said
	// so: the span over which deliveries must not climb.
	diskFullHold = 5 * time.Second
	// recoverWithin is the give-up deadline for the run to finish once
	// space is freed (a hang detector, not a timing assertion).
	recoverWithin = 90 * time.Second
)

// mountTmpfs mounts a tmpfs of size on a fresh directory and unmounts it
// at the end of the test. It skips the test, saying why, where it cannot
// (not root, or no mount allowed in this container).
func mountTmpfs(t *testing.T, size string) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "disk")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if os.Geteuid() != 0 {
		t.Skipf("full-disk scenario skipped: it mounts a %s tmpfs to fill, which needs root (running as uid %d)", size, os.Geteuid())
	}
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, "size="+size); err != nil {
		t.Skipf("full-disk scenario skipped: cannot mount a %s tmpfs on %s here: %v", size, dir, err)
	}
	// Registered after the mount and before any process starts: it runs
	// after they are killed, before t.TempDir removes the directory.
	t.Cleanup(func() {
		if err := syscall.Unmount(dir, syscall.MNT_DETACH); err != nil {
			t.Errorf("unmounting the tmpfs at %s: %v", dir, err)
		}
	})
	return dir
}

// fillDisk writes zeros to path until the filesystem has no room left.
func fillDisk(t *testing.T, path string) int64 {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatalf("creating the filler: %v", err)
	}
	defer f.Close()
	chunk := make([]byte, 1<<20)
	var n int64
	for {
		w, err := f.Write(chunk)
		n += int64(w)
		if errors.Is(err, syscall.ENOSPC) {
			return n
		}
		if err != nil {
			t.Fatalf("filling the disk: %v", err)
		}
	}
}

// scrape returns the value of the metric line that starts with series
// (name and labels, e.g. `pipeline_store_errors_total{store="nats"}`), or
// -1 when the line is missing or the endpoint does not answer.
func scrape(addr, series string) float64 {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+addr+"/metrics", nil)
	if err != nil {
		return -1
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return -1
	}
	defer resp.Body.Close()
	sc := bufio.NewScanner(io.LimitReader(resp.Body, 8<<20))
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, series+" "); ok {
			f, err := strconv.ParseFloat(strings.TrimSpace(v), 64)
			if err != nil {
				return -1
			}
			return f
		}
	}
	return -1
}

// deliveries is the workers consumer's delivery count (every delivery,
// redeliveries included) and its waiting pull requests.
func deliveries(t *testing.T, js jetstream.JetStream) (uint64, int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := js.Consumer(ctx, broker.StreamJobs, broker.WorkerConsumer)
	if err != nil {
		t.Fatalf("reading the workers consumer: %v", err)
	}
	info := c.CachedInfo()
	return info.Delivered.Consumer, info.NumWaiting
}

// 9. The data dir on a 64 MiB tmpfs that fills up mid-run: the pipeline
// says which store cannot write and where, counts the failed writes,
// stops fetching, and finishes by itself once space is freed.
func scenarioDiskFull(t *testing.T) row {
	disk := mountTmpfs(t, diskSize)
	dir := filepath.Join(disk, "data")
	jobs := exampleJobs(t, 200)
	env := childEnv()
	submitFile(t, env, writeJobs(t, t.TempDir(), jobs), "--data-dir", dir)

	metricsAddr := fmt.Sprintf("127.0.0.1:%d", freePort(t))
	run := pipeline(t, "run", env, runArgs("--data-dir", dir, "--until-idle", "--metrics-addr", metricsAddr)...)
	_, js := connectJS(t, embeddedURL(t, run, dir))
	waitStored(t, run, js, 30)

	filled := fillDisk(t, filepath.Join(disk, "filler"))
	storeDir := filepath.Join(dir, "nats")
	// The first failed write is logged at error level, naming the store
	// and its path.
	var natsLine string
	poll.Until(t, 60*time.Second, "the error line naming the nats store", func() bool {
		if run.exited() {
			t.Fatalf("run exited %d while the disk was full; stderr:\n%s", run.code, tail(run.stderr.String(), 30))
		}
		for line := range strings.SplitSeq(run.stderr.String(), "\n") {
			if strings.Contains(line, "level=ERROR") && strings.Contains(line, `store="nats store"`) &&
				strings.Contains(line, "path="+storeDir) {
				natsLine = line
				return true
			}
		}
		return false
	})
	if !strings.Contains(natsLine, "no space left on device") {
		t.Errorf("the nats store's error line does not give the cause: %s", natsLine)
	}
	poll.Until(t, 10*time.Second, "the nats store counted as failing", func() bool {
		return scrape(metricsAddr, `pipeline_store_failing{store="nats"}`) == 1
	})
	if n := scrape(metricsAddr, `pipeline_store_errors_total{store="nats"}`); n < 1 {
		t.Errorf(`pipeline_store_errors_total{store="nats"} = %v while the nats store fails, want >= 1`, n)
	}

	// Workers do not fetch while the store fails: once the pull requests
	// issued before the gate closed have expired (at most one fetch wait),
	// no delivery is made (and so none burnt) over the time the disk stays
	// full.
	poll.Until(t, 10*time.Second, "no pull request left waiting on the consumer", func() bool {
		_, waiting := deliveries(t, js)
		return waiting == 0
	})
	before, _ := deliveries(t, js)
	<-time.After(diskFullHold) // the fault's length, not a wait for a result
	after, waiting := deliveries(t, js)
	if after != before {
		t.Errorf("deliveries climbed from %d to %d while the nats store could not write", before, after)
	}
	if waiting != 0 {
		t.Errorf("%d pull requests waiting on the consumer while the nats store could not write, want 0", waiting)
	}
	natsErrs := scrape(metricsAddr, `pipeline_store_errors_total{store="nats"}`)
	sqliteErrs := scrape(metricsAddr, `pipeline_store_errors_total{store="sqlite"}`)
	sqliteNamed := strings.Contains(run.stderr.String(), `store="sqlite index" path=`+filepath.Join(dir, "pipeline.db"))
	if sqliteErrs > 0 && !sqliteNamed {
		t.Errorf("%v failed sqlite writes counted but no error line names the index and its path", sqliteErrs)
	}

	if err := os.Remove(filepath.Join(disk, "filler")); err != nil {
		t.Fatal(err)
	}
	freed := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	storedAtFree, err := storedCount(ctx, js)
	cancel()
	if err != nil {
		t.Fatalf("reading the streams at the free: %v", err)
	}
	// Polled together: when the store is writable again (its log line),
	// and when the first new outcome lands on the streams.
	var writable, resumed time.Duration
	poll.Until(t, recoverWithin, "the nats store writable again and a new outcome stored", func() bool {
		if writable == 0 && strings.Contains(run.stderr.String(), "nats store can be written again") {
			writable = time.Since(freed)
		}
		if resumed == 0 {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			n, err := storedCount(ctx, js)
			cancel()
			if err == nil && n > storedAtFree {
				resumed = time.Since(freed)
			}
		}
		if run.exited() && (writable == 0 || resumed == 0) {
			t.Fatalf("run exited %d before the store recovered; stderr:\n%s", run.code, tail(run.stderr.String(), 30))
		}
		return writable > 0 && resumed > 0
	})
	if code := run.wait(t, recoverWithin); code != 0 {
		t.Fatalf("run exited %d after the free; stderr:\n%s", code, tail(run.stderr.String(), 30))
	}
	finished := time.Since(freed)
	r := auditEmbedded(t, dir).check(t, "", ids(jobs))
	alsoSQLite := ""
	if sqliteNamed {
		alsoSQLite = " (and the sqlite index and its file)"
	}
	r.Note = fmt.Sprintf("%s tmpfs filled (%d MiB) after >= 30 outcomes, full for %v: error line names the nats store and <data-dir>/nats%s; "+
		"store errors counted: nats %v, sqlite %v; deliveries flat at %d while full; store reloaded %.1fs after the free, first new outcome %.1fs after, run done %.1fs after",
		diskSize, filled>>20, diskFullHold, alsoSQLite,
		natsErrs, sqliteErrs, before, writable.Seconds(), resumed.Seconds(), finished.Seconds())
	return r
}
