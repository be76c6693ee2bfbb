package broker_test

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/queue"
	"github.com/llmpipeline/pipeline/internal/queuetest"
)

// TestHelperSubmitter is not a test: run by TestAckedSurvivesKill9 in a
// child process, it submits jobs to its own embedded server, prints how many
// were acknowledged, and waits to be killed.
func TestHelperSubmitter(t *testing.T) {
	dir := os.Getenv("INGEST_HELPER_DATADIR")
	if dir == "" {
		t.Skip("helper process only")
	}
	c, err := broker.Connect(context.Background(), broker.Config{DataDir: dir})
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	st, err := queue.Submit(context.Background(), c, queuetest.JobItems("k9", "invoice", 500), nil)
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(1)
	}
	fmt.Printf("ACKED %d\n", st.Published)
	select {} // killed with SIGKILL: no Close, no flush, no fsync
}

// TestAckedSurvivesKill9: with the default sync interval, every message
// the embedded server acknowledged is still there after kill -9 of the
// process that ran it.
func TestAckedSurvivesKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a child process")
	}
	t.Parallel()
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestHelperSubmitter$", "-test.count=1")
	cmd.Env = append(os.Environ(), "INGEST_HELPER_DATADIR="+dir)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	defer cmd.Process.Kill()
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if l := sc.Text(); strings.HasPrefix(l, "ACKED") || strings.HasPrefix(l, "ERR") {
				lines <- l
				return
			}
		}
		close(lines)
	}()
	var acked int
	select {
	case l, ok := <-lines:
		if !ok {
			t.Fatal("helper exited without a result")
		}
		if _, err := fmt.Sscanf(l, "ACKED %d", &acked); err != nil {
			t.Fatalf("helper: %s", l)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("helper did not submit within 60s")
	}
	if err := cmd.Process.Signal(os.Kill); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()

	// nats.json still names the dead process: broker.Connect must start anew.
	c := newConn(t, func(cfg *broker.Config) { cfg.DataDir = dir })
	if !c.Embedded() {
		t.Error("joined a dead server")
	}
	p, err := queue.Pending(t.Context(), c)
	if err != nil {
		t.Fatal(err)
	}
	if acked != 500 || p.Jobs != uint64(acked) {
		t.Errorf("acknowledged %d, found %d after kill -9", acked, p.Jobs)
	}
}
