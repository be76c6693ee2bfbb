package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os/exec"
	"strconv"
	"strings"
	"time"
)

// microPkg is one package's go test -bench run.
type microPkg struct {
	Dir   string // ./sanitize
	Bench string // -bench pattern
}

func microPackages(o options) []microPkg {
	return []microPkg{
		{"./sanitize", "."},
		{"./schemas", "."},
		{"./heal", "."},
		{"./worker", "."},
		{"./index", "."},
		{"./internal/sink", "Sink"},
		{"./job", "ParseJob"},
		{"./report", o.ReportBench},
		{"./eval", "Run"},
	}
}

// benchLine is one parsed line of go test -bench output.
type benchLine struct {
	Pkg    string
	Name   string // without the -GOMAXPROCS suffix
	Iters  int64
	Values map[string]float64 // by unit: ns/op, B/op, allocs/op, custom
	Raw    string
}

// runMicro runs the package's benchmarks (no tests) and returns their
// lines. The error says why go test failed; the lines read so far are
// returned with it.
func runMicro(ctx context.Context, root string, p microPkg, benchtime string, stderr io.Writer) ([]benchLine, error) {
	ctx, cancel := context.WithTimeout(ctx, 20*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "test", "-run", "^$", "-bench", p.Bench, "-benchmem", "-benchtime", benchtime, "-count", "1", "-timeout", "20m", p.Dir)
	cmd.Dir = root
	var out bytes.Buffer
	cmd.Stdout = &out
	cmd.Stderr = stderr
	err := cmd.Run()
	lines := parseBench(p.Dir, out.Bytes())
	if err != nil {
		return lines, fmt.Errorf("go test -bench %s %s: %w (%s)", p.Bench, p.Dir, err, tailLines(out.String(), 5))
	}
	return lines, nil
}

// parseBench reads the Benchmark lines of go test output.
func parseBench(pkg string, out []byte) []benchLine {
	var lines []benchLine
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		if l, ok := parseBenchLine(pkg, sc.Text()); ok {
			lines = append(lines, l)
		}
	}
	return lines
}

func parseBenchLine(pkg, s string) (benchLine, bool) {
	f := strings.Fields(s)
	if len(f) < 4 || !strings.HasPrefix(f[0], "Benchmark") || len(f)%2 != 0 {
		return benchLine{}, false
	}
	iters, err := strconv.ParseInt(f[1], 10, 64)
	if err != nil {
		return benchLine{}, false
	}
	name := f[0]
	if i := strings.LastIndexByte(name, '-'); i > 0 {
		if _, err := strconv.Atoi(name[i+1:]); err == nil {
			name = name[:i]
		}
	}
	l := benchLine{Pkg: pkg, Name: name, Iters: iters, Values: map[string]float64{}, Raw: strings.Join(f, " ")}
	for i := 2; i+1 < len(f); i += 2 {
		v, err := strconv.ParseFloat(f[i], 64)
		if err != nil {
			return benchLine{}, false
		}
		l.Values[f[i+1]] = v
	}
	return l, true
}

// findBench returns the first line whose name is name.
func findBench(lines []benchLine, name string) (benchLine, bool) {
	for _, l := range lines {
		if l.Name == name {
			return l, true
		}
	}
	return benchLine{}, false
}
