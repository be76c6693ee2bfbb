package faults

import (
	"bufio"
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	_ "github.com/mattn/go-sqlite3" // the locker child process opens the index
)

var update = flag.Bool("update", false, "write the scenario table to RESULTS.md")

// binaries are the programs TestMain builds once for every scenario.
type binaries struct {
	pipeline   string
	natsServer string
}

// bins is set once by TestMain before any test runs and only read after.
var bins binaries

// Environment of the locker child process (scenario "sqlite-locked").
const (
	lockerEnv     = "FAULTS_SQLITE_LOCKER" // path of the database to lock
	lockerHoldEnv = "FAULTS_SQLITE_HOLD"   // how long to hold it
	peakRSSEnv    = "FAULTS_PEAK_RSS_FILE" // where the measuring launcher writes its child's peak RSS
)

func TestMain(m *testing.M) {
	if path := os.Getenv(lockerEnv); path != "" {
		os.Exit(runLocker(path, os.Getenv(lockerHoldEnv)))
	}
	if path := os.Getenv(peakRSSEnv); path != "" {
		os.Exit(runMeasured(path, os.Args[1:]))
	}
	flag.Parse()
	dir, err := os.MkdirTemp("", "faults-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "faults:", err)
		os.Exit(2)
	}
	bins, err = build(dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "faults:", err)
		os.RemoveAll(dir)
		os.Exit(2)
	}
	code := m.Run()
	os.RemoveAll(dir)
	os.Exit(code)
}

// build compiles the pipeline and a nats-server from the module's own
// dependency, with -race when FAULTS_RACE=1.
func build(dir string) (binaries, error) {
	b := binaries{
		pipeline:   filepath.Join(dir, "pipeline"),
		natsServer: filepath.Join(dir, "nats-server"),
	}
	for _, x := range []struct{ out, pkg string }{
		{b.pipeline, "github.com/llmpipeline/pipeline/cmd/pipeline"},
		{b.natsServer, "github.com/nats-io/nats-server/v2"},
	} {
		args := []string{"build", "-o", x.out}
		if os.Getenv("FAULTS_RACE") == "1" {
			args = append(args, "-race")
		}
		cmd := exec.Command("go", append(args, x.pkg)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			return b, fmt.Errorf("building %s: %w\n%s", x.pkg, err, out)
		}
	}
	return b, nil
}

// runLocker is the child process of the sqlite-locked scenario: it takes
// an exclusive lock on the index, says LOCKED, holds it for hold, says
// RELEASING, waits for a line on stdin (the parent's last read under the
// lock), commits and exits.
func runLocker(path, hold string) int {
	d, err := time.ParseDuration(hold)
	if err != nil {
		fmt.Println("ERR hold:", err)
		return 2
	}
	db, err := sql.Open("sqlite3", "file:"+path+"?_busy_timeout=30000")
	if err != nil {
		fmt.Println("ERR", err)
		return 2
	}
	defer db.Close()
	ctx := context.Background()
	conn, err := db.Conn(ctx)
	if err != nil {
		fmt.Println("ERR", err)
		return 2
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, "BEGIN EXCLUSIVE"); err != nil {
		fmt.Println("ERR begin exclusive:", err)
		return 2
	}
	fmt.Println("LOCKED")
	<-time.After(d) // the fault's duration, not a wait for anything
	fmt.Println("RELEASING")
	line, _ := bufio.NewReader(os.Stdin).ReadString('\n')
	_ = strings.TrimSpace(line)
	if _, err := conn.ExecContext(ctx, "COMMIT"); err != nil {
		fmt.Println("ERR commit:", err)
		return 2
	}
	fmt.Println("UNLOCKED")
	return 0
}

// runMeasured is the measuring launcher: it runs argv as its child, with
// this process's standard streams and environment (without peakRSSEnv),
// writes the child's peak RSS in kilobytes to path and exits with the
// child's code. It exists because a child's rusage counts the memory of
// the process that started it: Go starts children with vfork, and Linux
// carries the parent's high-water mark across the exec into the child's
// ru_maxrss, so a child of the test process reports at least the test
// process's own peak (every scenario's servers and buffers). Started from
// this small launcher, the child's figure is its own, or the launcher's
// few megabytes.
func runMeasured(path string, argv []string) int {
	if len(argv) == 0 {
		fmt.Fprintln(os.Stderr, "faults: the measuring launcher needs a command")
		return 2
	}
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, peakRSSEnv+"=") {
			env = append(env, kv)
		}
	}
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Env = env
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	// The child dies with the launcher (a test's cleanup kills the launcher).
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	err := cmd.Run()
	var exitErr *exec.ExitError
	if err != nil && !errors.As(err, &exitErr) {
		fmt.Fprintln(os.Stderr, "faults: measuring launcher:", err)
		return 2
	}
	ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if !ok {
		fmt.Fprintln(os.Stderr, "faults: measuring launcher: no rusage")
		return 2
	}
	if err := os.WriteFile(path, []byte(strconv.FormatInt(ru.Maxrss, 10)), 0o600); err != nil {
		fmt.Fprintln(os.Stderr, "faults: measuring launcher:", err)
		return 2
	}
	return cmd.ProcessState.ExitCode()
}

// newLockerCmd re-executes this test binary as the locker child process.
func newLockerCmd(db, hold string) *exec.Cmd {
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(childEnv(), lockerEnv+"="+db, lockerHoldEnv+"="+hold)
	return cmd
}
