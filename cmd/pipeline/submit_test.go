package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/llmpipeline/pipeline/internal/app"
	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/queue"
	"github.com/llmpipeline/pipeline/schemas"
)

// TestSubmitReadsTheInputTwice: a first pass checks, a second publishes
// what it accepted (the first line of a repeated id, not the repeat).
func TestSubmitReadsTheInputTwice(t *testing.T) {
	t.Parallel()
	reg, err := schemas.Load("")
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	for i := range 2500 {
		fmt.Fprintf(&b, `{"id":"j-%d","schema":"invoice","input":"text %d"}`+"\n", i, i)
	}
	b.WriteString(`{"id":"j-7","schema":"invoice","input":"the repeat"}` + "\n\nnot json\n")
	opens := 0
	src := func() (io.ReadCloser, error) {
		opens++
		return io.NopCloser(strings.NewReader(b.String())), nil
	}
	jc := app.NewJobCheck(reg, 1<<20)
	defer jc.Close()
	var bad []string
	if err := jc.ScanFrom(src, func(n int, reason string) { bad = append(bad, fmt.Sprintf("%d: %s", n, reason)) }); err != nil {
		t.Fatal(err)
	}
	if jc.Valid != 2500 || len(bad) != 2 || !strings.HasPrefix(bad[0], `2501: job id "j-7" repeats line 8`) || !strings.HasPrefix(bad[1], "2503: ") {
		t.Fatalf("first pass: %d valid, bad %q", jc.Valid, bad)
	}

	dir := t.TempDir()
	conn, err := broker.Connect(t.Context(), broker.Config{DataDir: dir})
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	var last int
	stats, err := app.SubmitChecked(t.Context(), conn, jc, src, app.RerunNone, func(n int) {
		if n >= 0 {
			last = n
		}
	})
	if err != nil || stats.Published != 2500 || opens != 2 || last != 2500 {
		t.Fatalf("publish pass: %+v, %v; opened %d times (want 2), progress ended at %d", stats, err, opens, last)
	}
	// The stream holds 2500 jobs; j-7's is the first line's, not the repeat.
	jobs, err := conn.JetStream().Stream(t.Context(), broker.StreamJobs)
	if err != nil {
		t.Fatal(err)
	}
	if n := jobs.CachedInfo().State.Msgs; n != 2500 {
		t.Errorf("%d jobs on the stream, want 2500", n)
	}
	m, err := jobs.GetLastMsgForSubject(t.Context(), broker.SubjectJobs+".invoice")
	if err != nil || !strings.Contains(string(m.Data), `"text 2499"`) {
		t.Errorf("last job on the stream: %v; want j-2499's line", err)
	}
	for seq := uint64(1); seq <= 10; seq++ {
		m, err := jobs.GetMsg(t.Context(), seq)
		if err != nil {
			t.Fatal(err)
		}
		if m.Header.Get("Nats-Msg-Id") == "j-7" && !strings.Contains(string(m.Data), `"text 7"`) {
			t.Errorf("job j-7 on the stream is %q; want the first line, not the repeat", m.Data)
		}
	}

	// The input changed between the passes: an error, not a silent skip.
	changed := func() (io.ReadCloser, error) {
		return io.NopCloser(strings.NewReader(`{"id":"other","schema":"invoice","input":"x"}` + "\n")), nil
	}
	if _, err := app.SubmitChecked(t.Context(), conn, jc, changed, app.RerunNone, nil); err == nil || !strings.Contains(err.Error(), "changed since it was checked") {
		t.Errorf("changed input: %v", err)
	}
}

// TestSubmitFromStdin: stdin is spooled to a temporary file, read twice,
// published, and the file removed; on a terminal, a notice says stdin is
// being read.
func TestSubmitFromStdin(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	file, ids := jobsFile(t, 40)
	jobs := mustRead(t, file)
	out := mustCLI(t, string(jobs), "submit", "--data-dir", t.TempDir(), "--json")
	var s map[string]int
	if err := json.Unmarshal([]byte(out), &s); err != nil || s["published"] != len(ids) {
		t.Fatalf("submit from stdin: %q (%v), want %d published", out, err, len(ids))
	}
	if left, _ := os.ReadDir(tmp); len(left) != 0 {
		t.Errorf("the spooled stdin was left behind: %s", left[0].Name())
	}

	for _, tty := range []bool{false, true} {
		var o, e bytes.Buffer
		app := newAppEnv(&env{stdin: bytes.NewReader(jobs), stdout: &o, stderr: &e,
			terminal: func(s any) bool { return tty && s != any(&o) }})
		if err := runApp(context.Background(), app, []string{"pipeline", "submit", "--data-dir", t.TempDir()}); err != nil {
			t.Fatal(err)
		}
		notice := strings.Contains(e.String(), "reading jobs (JSONL) from stdin")
		if notice != tty {
			t.Errorf("stdin a terminal %v: notice shown %v (stderr %q)", tty, notice, e.String())
		}
		// The progress bar is drawn on a terminal only.
		if bar := strings.Contains(e.String(), "submitted"); bar != tty {
			t.Errorf("stderr a terminal %v: progress bar drawn %v (stderr %q)", tty, bar, e.String())
		}
	}
}

// TestSubmitReadsWhatEditorsWrite: a file that starts with a UTF-8 byte
// order mark and ends its lines with CRLF (as Windows tools write JSON
// Lines) is read as its jobs, none of them holding the mark or the CR;
// a pretty-printed file, a JSON array, a UTF-16 file and a line that is
// not UTF-8 are refused with how to convert them.
func TestSubmitReadsWhatEditorsWrite(t *testing.T) {
	t.Parallel()
	reg, err := schemas.Builtin()
	if err != nil {
		t.Fatal(err)
	}
	in := "\ufeff{\"id\":\"w1\",\"schema\":\"invoice\",\"input\":\"x\"}\r\n{\"id\":\"w2\",\"schema\":\"invoice\",\"input\":\"y\"}\r\n\r\n"
	jc := app.NewJobCheck(reg, 1<<20)
	defer jc.Close()
	var bad []string
	if err := jc.ScanFrom(app.BytesSource([]byte(in)), func(n int, reason string) { bad = append(bad, fmt.Sprintf("%d: %s", n, reason)) }); err != nil {
		t.Fatal(err)
	}
	if len(bad) > 0 || jc.Valid != 2 {
		t.Fatalf("BOM and CRLF: %d valid, refused %q; want 2 valid", jc.Valid, bad)
	}
	var got []string
	if err := jc.ItemsFrom(app.BytesSource([]byte(in)), app.RerunNone, func(it queue.SubmitItem) error {
		got = append(got, string(it.Data))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := []string{`{"id":"w1","schema":"invoice","input":"x"}`, `{"id":"w2","schema":"invoice","input":"y"}`}
	if !slices.Equal(got, want) {
		t.Errorf("published %q, want %q", got, want)
	}

	for _, tc := range []struct{ name, in, hint string }{
		{"pretty-printed", "\n{\n  \"id\": \"p1\",\n  \"schema\": \"invoice\",\n  \"input\": \"x\"\n}\n", "convert a pretty-printed file with: jq -c . FILE"},
		{"array", `[{"id":"a1","schema":"invoice","input":"x"}]`, "the input is a JSON array"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			jc := app.NewJobCheck(reg, 1<<20)
			defer jc.Close()
			var bad []string
			if err := jc.ScanFrom(app.BytesSource([]byte(tc.in)), func(n int, reason string) { bad = append(bad, reason) }); err != nil {
				t.Fatal(err)
			}
			if len(bad) == 0 || !strings.Contains(bad[0], tc.hint) {
				t.Fatalf("first refusal %q, want the hint %q", bad, tc.hint)
			}
			for _, b := range bad[1:] {
				if strings.Contains(b, "JSON Lines") {
					t.Errorf("the hint is repeated past the first line: %q", b)
				}
			}
		})
	}
	// UTF-16 with its byte order mark (Windows PowerShell 5's redirect):
	// the first line says so and how to convert.
	utf16 := []byte{0xff, 0xfe}
	for _, c := range "{\"id\":\"u1\",\"schema\":\"invoice\",\"input\":\"x\"}\n" {
		utf16 = append(utf16, byte(c), 0)
	}
	jc = app.NewJobCheck(reg, 1<<20)
	bad = nil
	if err := jc.ScanFrom(app.BytesSource(utf16), func(n int, reason string) { bad = append(bad, reason) }); err != nil {
		t.Fatal(err)
	}
	if len(bad) == 0 || !strings.Contains(bad[0], "iconv -f utf-16 -t utf-8 FILE") || jc.Valid != 0 {
		t.Errorf("UTF-16 file: %d valid, refusals %q; want the first to say how to convert", jc.Valid, bad)
	}

	// Latin-1 bytes (an export from a spreadsheet) are refused, where they
	// are, not read as U+FFFD; the conversion is told once. UTF-8 passes.
	latin1 := "{\"id\":\"l1\",\"schema\":\"invoice\",\"input\":\"M\xfcller GmbH, total 3 EUR\"}\n" +
		"{\"id\":\"l2\",\"schema\":\"invoice\",\"input\":\"M\u00fcller GmbH, total 3 EUR\"}\n" +
		"{\"id\":\"l3\",\"schema\":\"invoice\",\"input\":\"x\",\"metadata\":{\"city\":\"K\xf6ln\"}}\n"
	jc = app.NewJobCheck(reg, 1<<20)
	bad = nil
	if err := jc.ScanFrom(app.BytesSource([]byte(latin1)), func(n int, reason string) { bad = append(bad, fmt.Sprintf("%d: %s", n, reason)) }); err != nil {
		t.Fatal(err)
	}
	if len(bad) != 2 || jc.Valid != 1 {
		t.Fatalf("Latin-1 lines: %d valid, refused %q; want lines 1 and 3 refused, line 2 valid", jc.Valid, bad)
	}
	if !strings.HasPrefix(bad[0], "1: not UTF-8 at byte 40 (0xFC)") || !strings.Contains(bad[0], "iconv -f windows-1252 -t utf-8 FILE") {
		t.Errorf("line 1 refused with %q; want the byte, its value and the conversion", bad[0])
	}
	if !strings.HasPrefix(bad[1], "3: not UTF-8 at byte 63 (0xF6)") || strings.Contains(bad[1], "iconv") {
		t.Errorf("line 3 refused with %q; want the byte and its value, without the conversion told again", bad[1])
	}

	// A JSON Lines file whose first line is broken gets no hint.
	jc = app.NewJobCheck(reg, 1<<20)
	bad = nil
	if err := jc.ScanFrom(app.BytesSource([]byte("{\"id\":\"b1\",\"schema\":\"invoice\",\"input\":\"x\"\n{\"id\":\"b2\",\"schema\":\"invoice\",\"input\":\"y\"}\n")), func(n int, reason string) { bad = append(bad, reason) }); err != nil {
		t.Fatal(err)
	}
	if len(bad) != 1 || strings.Contains(bad[0], "JSON Lines") {
		t.Errorf("a truncated first line of JSON Lines: refusals %q, want one without the hint", bad)
	}
}
