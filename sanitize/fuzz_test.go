package sanitize

import (
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"
)

// fuzzTimeLimit bounds one Clean call on a fuzz input (at most a few KB;
// linear work takes microseconds). It is a hang detector, not a timing test.
const fuzzTimeLimit = 5 * time.Second

// fuzzSeeds are inputs beyond the unit tables: the shapes the fuzzer should
// start from.
var fuzzSeeds = []string{
	`{"a":1}`, `[1,2,3]`, `"{\"a\":1}"`, "```json\n{\"a\":1}\n```", `{'a': 'b',}`,
	`{a: b c, d: [1 2], e: "x" + "y", f: ObjectId("1"), g: (1, 2), h: /r[/]e/g}`,
	"<think>x</think>{\"a\":\"b\\u00e9\"}", `{"a": "24" screen", "b": NaN}`, `{\"a\": \"b\"}`,
	"\uFEFF{\"a\":\u00A0\"x\"}", `{"a": 01, "b": .5, "c": -Infinity, "d": 1e-7}`,
	`[1, 2, ...]`, `{"a":`, "```\n[\n```\n```\n{}\n```", `{"x": "a, {"k": 1}, "y": 2}`,
}

func FuzzClean(f *testing.F) {
	for _, s := range fuzzSeeds {
		f.Add([]byte(s))
	}
	for _, tbl := range [][]cleanCase{fastPathCases, stageCases, refusalCases} {
		for _, c := range tbl {
			f.Add([]byte(c.in))
		}
	}
	if vs, err := readVectors(); err == nil {
		for _, v := range vs {
			f.Add([]byte(v.Input))
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		// Bounded time: a run that takes seconds on a fuzz-sized input is a
		// loop or a quadratic path. Crash with the input and the stacks.
		watchdog := time.AfterFunc(fuzzTimeLimit, func() {
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			panic(fmt.Sprintf("Clean(%q) still running after %v\n%s", in, fuzzTimeLimit, buf))
		})
		res, err := Clean(in)
		watchdog.Stop()
		if err != nil {
			if !errors.Is(err, ErrTruncated) && !errors.Is(err, ErrNoJSON) && !errors.Is(err, ErrUnrepairable) {
				t.Fatalf("Clean(%q): untyped error %v", in, err)
			}
			if json.Valid(in) {
				t.Fatalf("Clean(%q) refused valid JSON: %v", in, err)
			}
			return
		}
		if !json.Valid(res.JSON) {
			t.Fatalf("Clean(%q) = %q: not valid JSON", in, res.JSON)
		}
		// UseNumber: 1e700 is valid JSON that a float64 cannot hold
		if _, err := decodeNumbers(res.JSON); err != nil {
			t.Fatalf("Clean(%q) = %q: does not decode: %v", in, res.JSON, err)
		}
		if json.Valid(in) {
			orig, err := decodeNumbers(in)
			if err != nil {
				return // valid but too deep to decode
			}
			if len(res.Stages) == 1 && res.Stages[0] == StageDoubleEncoded {
				return // a JSON string holding JSON is decoded on purpose
			}
			back, err := decodeNumbers(res.JSON)
			if err != nil || !sameJSON(orig, back) || len(res.Stages) != 0 {
				t.Fatalf("Clean(%q) = %q %q: valid JSON changed", in, res.JSON, res.Stages)
			}
			// Differential: the repair pass must agree with the fast path.
			slow, err := repair(in)
			if err != nil {
				t.Fatalf("repair(%q) refused valid JSON: %v", in, err)
			}
			if back, err := decodeNumbers(slow.JSON); err != nil || !sameJSON(orig, back) {
				t.Fatalf("repair(%q) = %q: valid JSON changed", in, slow.JSON)
			}
		}
	})
}
