package sanitize

import (
	"bytes"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
)

// cleanCase is one unit case: the input, the JSON we must return (compared
// semantically, numbers exactly) or the error kind, and the stages that must
// be recorded (exactly, in order; nil means none).
type cleanCase struct {
	name   string
	in     string
	want   string
	err    error
	stages []string
}

func runCases(t *testing.T, cases []cleanCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			res, err := Clean([]byte(tc.in))
			if tc.err != nil {
				if !errors.Is(err, tc.err) {
					t.Fatalf("Clean(%q) = %q, %v; want error %v", tc.in, res.JSON, err, tc.err)
				}
				var se *SyntaxError
				if !errors.As(err, &se) || se.Offset < 0 || se.Offset > len(tc.in) {
					t.Fatalf("error %v: want a *SyntaxError with an offset inside the input", err)
				}
				return
			}
			if err != nil {
				t.Fatalf("Clean(%q): %v", tc.in, err)
			}
			if !json.Valid(res.JSON) {
				t.Fatalf("Clean(%q) = %q: not valid JSON", tc.in, res.JSON)
			}
			got, err := decodeNumbers(res.JSON)
			if err != nil {
				t.Fatal(err)
			}
			want, err := decodeNumbers([]byte(tc.want))
			if err != nil {
				t.Fatalf("bad want %q: %v", tc.want, err)
			}
			if !sameJSON(got, want) {
				t.Errorf("Clean(%q) = %s, want %s", tc.in, res.JSON, tc.want)
			}
			if !slices.Equal(res.Stages, tc.stages) {
				t.Errorf("Clean(%q) stages = %q, want %q", tc.in, res.Stages, tc.stages)
			}
		})
	}
}

var fastPathCases = []cleanCase{
	{name: "object", in: `{"a":1}`, want: `{"a":1}`},
	{name: "surrounding whitespace", in: " \n\t{\"a\": [1, 2]} \n", want: `{"a":[1,2]}`},
	{name: "scalar", in: `42`, want: `42`},
	{name: "string that is not JSON", in: `"{a:b}"`, want: `"{a:b}"`},
	{name: "double encoded object", in: `"{\"a\":1}"`, want: `{"a":1}`, stages: []string{StageDoubleEncoded}},
	{name: "double encoded array", in: `" [1,2] "`, want: `[1,2]`, stages: []string{StageDoubleEncoded}},
}

func TestFastPath(t *testing.T) {
	t.Parallel()
	runCases(t, fastPathCases)
}

func TestFastPathAliasesInput(t *testing.T) {
	t.Parallel()
	in := []byte("  {\"a\":1}  ")
	res, err := Clean(in)
	if err != nil {
		t.Fatal(err)
	}
	if len(res.JSON) != 7 || &res.JSON[0] != &in[2] {
		t.Fatalf("fast path copied or mis-trimmed: %q", res.JSON)
	}
}

func TestNumbersKeepSpelling(t *testing.T) {
	t.Parallel()
	for _, num := range []string{"1e-7", "-0", "12345678901234567890123", "1.50", "2.3E+100", "0.000"} {
		t.Run(num, func(t *testing.T) {
			t.Parallel()
			// through the fast path and through the repair path
			for _, in := range []string{`{"n": ` + num + `}`, "```json\n{'n': " + num + ",}\n```"} {
				res, err := Clean([]byte(in))
				if err != nil {
					t.Fatalf("Clean(%q): %v", in, err)
				}
				if !bytes.Contains(res.JSON, []byte(":"+num)) && !bytes.Contains(res.JSON, []byte(": "+num)) {
					t.Errorf("Clean(%q) = %s: number spelling %s lost", in, res.JSON, num)
				}
			}
		})
	}
}

var stageCases = []cleanCase{
	{name: "bom", in: "\uFEFF{\"a\":1}", want: `{"a":1}`, stages: []string{StageBOM}},
	{name: "zero width between tokens", in: "{\"a\":\u200B1}", want: `{"a":1}`, stages: []string{StageBOM}},
	{name: "unicode spaces", in: "{\"a\":\u00A0\"x\u00A0y\"}", want: "{\"a\":\"x\u00A0y\"}", stages: []string{StageUnicodeSpaces}},
	{name: "thinking", in: "<think>maybe {\"a\":2}</think>\n{\"a\":1}", want: `{"a":1}`, stages: []string{StageThinking}},
	{name: "thinking then fence", in: "<thinking>x</thinking>```json\n{\"a\":1}\n```", want: `{"a":1}`, stages: []string{StageThinking, StageFence}},
	{name: "fence json", in: "```json\n{\"a\":1}\n```", want: `{"a":1}`, stages: []string{StageFence}},
	{name: "fence upper case info", in: "```JSON\n{\"a\":1}\n```", want: `{"a":1}`, stages: []string{StageFence}},
	{name: "fence bare", in: "```\n[1,2]\n```", want: `[1,2]`, stages: []string{StageFence}},
	{name: "fence tilde", in: "~~~\n{\"a\":1}\n~~~", want: `{"a":1}`, stages: []string{StageFence}},
	{name: "fence with prose around", in: "Sure! Here it is:\n```json\n{\"a\":1}\n```\nHope this helps.", want: `{"a":1}`, stages: []string{StageFence}},
	{name: "fence on one line", in: "```json{\"a\":1}```", want: `{"a":1}`, stages: []string{StageFence}},
	{name: "fence unclosed", in: "```json\n{\"a\":1}\n", want: `{"a":1}`, stages: []string{StageFence}},
	{name: "first fenced block holding JSON", in: "```bash\nrun it\n```\n```json\n{\"a\":1}\n```\n```json\n{\"a\":2}\n```", want: `{"a":1}`, stages: []string{StageFence}},
	{name: "later block is the only one that parses", in: "```json\n{\"a\": 1 \"b\" ]\n```\n```json\n{\"a\":2}\n```", want: `{"a":2}`, stages: []string{StageFence}},
	{name: "quote in prose before fence", in: "The \"answer\":\n```json\n{\"a\":1}\n```", want: `{"a":1}`, stages: []string{StageFence}},
	{name: "fence inside a string is content", in: "{\"code\": \"```js\\nx()\\n```\"}", want: "{\"code\": \"```js\\nx()\\n```\"}"},
	{name: "fenced scalar", in: "```\n42\n```", want: `42`, stages: []string{StageFence}},
	{name: "prose before", in: "Here is the JSON: {\"a\":1}", want: `{"a":1}`, stages: []string{StageProse}},
	{name: "prose after", in: "{\"a\":1}\nLet me know!", want: `{"a":1}`, stages: []string{StageProse}},
	{name: "prose braces in strings ignored", in: "Result: {\"a\":\"} and ]\"} done", want: `{"a":"} and ]"}`, stages: []string{StageProse}},
	{name: "prose bracket words skipped", in: "See [the docs] for details. {\"a\":1}", want: `{"a":1}`, stages: []string{StageProse}},
	{name: "jsonp", in: `callback({"a":1});`, want: `{"a":1}`, stages: []string{StageProse}},
	{name: "line comment", in: "{\"a\":1, // note\n\"b\":2}", want: `{"a":1,"b":2}`, stages: []string{StageComments}},
	{name: "block comment", in: `{"a":/* x */1}`, want: `{"a":1}`, stages: []string{StageComments}},
	{name: "hash comment", in: "{\"a\":1 # note\n}", want: `{"a":1}`, stages: []string{StageComments}},
	{name: "comment markers inside strings kept", in: `{"u":"http://x/*y*/#z",}`, want: `{"u":"http://x/*y*/#z"}`, stages: []string{StageTrailingCommas}},
	{name: "trailing comma object", in: `{"a":1,}`, want: `{"a":1}`, stages: []string{StageTrailingCommas}},
	{name: "trailing comma array", in: `[1,2,]`, want: `[1,2]`, stages: []string{StageTrailingCommas}},
	{name: "leading comma", in: `[,1]`, want: `[1]`, stages: []string{StageTrailingCommas}},
	{name: "missing comma", in: "{\"a\":1\n\"b\":2}", want: `{"a":1,"b":2}`, stages: []string{StageMissingCommas}},
	{name: "missing colon", in: `{"a" 1}`, want: `{"a":1}`, stages: []string{StageMissingColons}},
	{name: "single quotes", in: `{'a':'it"s'}`, want: `{"a":"it\"s"}`, stages: []string{StageSingleQuotes}},
	{name: "smart quotes", in: `{“a”:“b”}`, want: `{"a":"b"}`, stages: []string{StageSmartQuotes}},
	{name: "smart quotes inside strings kept", in: `{"a":"“b”",}`, want: `{"a":"“b”"}`, stages: []string{StageTrailingCommas}},
	{name: "unquoted keys", in: `{a: 1, b_c: 2}`, want: `{"a":1,"b_c":2}`, stages: []string{StageUnquotedKeys}},
	{name: "unquoted value", in: `{"a": hello world}`, want: `{"a":"hello world"}`, stages: []string{StageUnquotedValues}},
	{name: "leading zeros kept as string", in: `{"zip": 01234}`, want: `{"zip":"01234"}`, stages: []string{StageUnquotedValues}},
	{name: "date kept as string", in: `{"d": 2024-10-18}`, want: `{"d":"2024-10-18"}`, stages: []string{StageUnquotedValues}},
	{name: "python literals", in: `{"a": True, "b": False, "c": None}`, want: `{"a":true,"b":false,"c":null}`, stages: []string{StageLiterals}},
	{name: "js literals", in: `[NaN, Infinity, -Infinity, undefined]`, want: `[null,null,null,null]`, stages: []string{StageLiterals}},
	{name: "literal prefix is a word", in: `{"a": Trueish}`, want: `{"a":"Trueish"}`, stages: []string{StageUnquotedValues}},
	{name: "leading dot number", in: `{"a": .5, "b": -.25}`, want: `{"a":0.5,"b":-0.25}`, stages: []string{StageNumbers}},
	{name: "function wrapper", in: `{"id": ObjectId("x1")}`, want: `{"id":"x1"}`, stages: []string{StageFunctionCalls}},
	{name: "concatenation", in: `{"a": "x" + "y"}`, want: `{"a":"xy"}`, stages: []string{StageConcatenation}},
	{name: "inner quotes", in: `{"a": "the 24" screen"}`, want: `{"a":"the 24\" screen"}`, stages: []string{StageInnerQuotes}},
	{name: "control chars", in: "{\"a\": \"x\ny\tz\x01\"}", want: `{"a":"x\ny\tz\u0001"}`, stages: []string{StageControlChars}},
	{name: "escaped apostrophe", in: `{"a": "it\'s"}`, want: `{"a":"it's"}`, stages: []string{StageEscapes}},
	{name: "invalid escape keeps backslash", in: `{"re": "\d+"}`, want: `{"re":"\\d+"}`, stages: []string{StageEscapes}},
	{name: "escaped JSON without quotes", in: `{\"a\": \"b\"}`, want: `{"a":"b"}`, stages: []string{StageDoubleEncoded}},
	{name: "tuple", in: `{"p": (1, 2)}`, want: `{"p":[1,2]}`, stages: []string{StageLiterals}},
	{name: "regex literal", in: `{r: /a[/]b/g}`, want: `{"r":"/a[/]b/g"}`, stages: []string{StageUnquotedKeys, StageUnquotedValues}},
	{name: "many at once", in: "Sure:\n```json\n{\n  name: 'Ann', // who\n  tags: ['a', 'b',],\n  ok: True,\n}\n```",
		want:   `{"name":"Ann","tags":["a","b"],"ok":true}`,
		stages: []string{StageFence, StageComments, StageTrailingCommas, StageSingleQuotes, StageUnquotedKeys, StageLiterals}},
}

func TestStages(t *testing.T) {
	t.Parallel()
	runCases(t, stageCases)
}

var refusalCases = []cleanCase{
	{name: "empty", in: "", err: ErrNoJSON},
	{name: "whitespace", in: " \n\t", err: ErrNoJSON},
	{name: "refusal", in: "I'm sorry, but I can't help with that.", err: ErrNoJSON},
	{name: "prose only", in: "The invoice total is 42 dollars.", err: ErrNoJSON},
	{name: "empty fence", in: "```json\n```", err: ErrNoJSON},
	{name: "fence with prose only", in: "```\nnothing here\n```", err: ErrNoJSON},
	{name: "bare scalar in prose", in: "The answer is 42", err: ErrNoJSON},
	{name: "unclosed thinking", in: "<think>The user wants {\"a\": 1}, so", err: ErrTruncated},
	{name: "braced word in a refusal", in: "Sorry, I can't fill {that} in.", err: ErrUnrepairable},
	{name: "broken fence wins over prose", in: "```json\n{\"a\": 1 \"b\" ]\n```\nSee [1].", err: ErrUnrepairable},
	{name: "truncated object", in: `{"a": 1, "b": [1, 2`, err: ErrTruncated},
	{name: "truncated string", in: `{"a": "hello wor`, err: ErrTruncated},
	{name: "truncated number", in: `{"a": 12`, err: ErrTruncated},
	{name: "truncated after colon", in: `{"a":`, err: ErrTruncated},
	{name: "truncated after comma", in: `[1,`, err: ErrTruncated},
	{name: "truncated key", in: `{"ab`, err: ErrTruncated},
	{name: "truncated literal", in: `{"a": tru`, err: ErrTruncated},
	{name: "truncated escape", in: `{"a": "x\u00`, err: ErrTruncated},
	{name: "truncated in unclosed fence", in: "```json\n{\"a\": [1, 2", err: ErrTruncated},
	{name: "truncated in closed fence", in: "```json\n{\"a\": [1, 2\n```", err: ErrTruncated},
	{name: "truncated after prose", in: "Here you go: {\"a\": \"b", err: ErrTruncated},
	{name: "truncated in comment", in: `{"a": 1 /* and`, err: ErrTruncated},
	{name: "missing value", in: `{"a": , "b": 1}`, err: ErrUnrepairable},
	{name: "missing value at end", in: `{"a": }`, err: ErrUnrepairable},
	{name: "elided items", in: `[1, 2, ...]`, err: ErrUnrepairable},
	{name: "elided members", in: `{"a": 1, ...}`, err: ErrUnrepairable},
	{name: "incomplete number", in: `{"a": 2.}`, err: ErrUnrepairable},
	{name: "bad unicode escape", in: `{"a": "\uZZZZ"}`, err: ErrUnrepairable},
	{name: "mismatched bracket", in: `{"a": 1]`, err: ErrUnrepairable},
	{name: "too deep", in: strings.Repeat("[", maxDepth+1) + strings.Repeat("]", maxDepth), err: ErrUnrepairable},
}

func TestRefusals(t *testing.T) {
	t.Parallel()
	runCases(t, refusalCases)
}

func TestStagesListed(t *testing.T) {
	t.Parallel()
	all := Stages()
	seen := map[string]bool{}
	for _, s := range all {
		if seen[s] || s == "" {
			t.Fatalf("stage %q empty or listed twice", s)
		}
		seen[s] = true
	}
	for _, s := range []string{StageFence, StageProse, StageThinking, StageBOM, StageComments, StageTrailingCommas,
		StageSingleQuotes, StageSmartQuotes, StageUnquotedKeys, StageLiterals, StageControlChars, StageEscapes, StageDoubleEncoded} {
		if !seen[s] {
			t.Errorf("Stages() misses %q", s)
		}
	}
	all[0] = "changed"
	if Stages()[0] == "changed" {
		t.Error("Stages() exposes internal state")
	}
}

func TestErrorMessage(t *testing.T) {
	t.Parallel()
	_, err := Clean([]byte(`{"a": "b`))
	var se *SyntaxError
	if !errors.As(err, &se) {
		t.Fatalf("want *SyntaxError, got %T", err)
	}
	if se.Offset != 8 || !strings.Contains(err.Error(), "offset 8") || !strings.Contains(err.Error(), "string") {
		t.Errorf("error %q offset %d: want offset 8 and the reason", err, se.Offset)
	}
}

// Adversarial inputs of about 10 MB (1 MB under -race): Clean must return
// (with anything); the bound on time is the linear design, not an assertion.
func TestAdversarialLarge(t *testing.T) {
	t.Parallel()
	n := 10 << 20
	if raceEnabled {
		n = 1 << 20
	}
	inputs := map[string][]byte{
		"deep nesting":    []byte(strings.Repeat("[", n)),
		"deep objects":    []byte(strings.Repeat(`{"a":`, n/5)),
		"quote run":       []byte("{\"a\": " + strings.Repeat(`"`, n)),
		"quote word run":  []byte("[\"" + strings.Repeat(`a" `, n/3) + "]"),
		"brace run":       []byte(strings.Repeat("{", n/2) + strings.Repeat("}", n/2)),
		"prose brackets":  []byte(strings.Repeat("x [", n/3)),
		"prose braces":    []byte(strings.Repeat("{a} ", n/4)),
		"fences":          []byte(strings.Repeat("```\n[\n```\n", n/10)),
		"backslashes":     []byte("{\"a\": \"" + strings.Repeat(`\`, n) + "\"}"),
		"commas":          []byte("[" + strings.Repeat(",", n) + "1]"),
		"unquoted values": []byte("{" + strings.Repeat("a: b c d,", n/9) + "}"),
		"big valid array": []byte("[" + strings.Repeat("1,", n/2) + "1]"),
		"big repair":      []byte("{" + strings.Repeat("'k': 'v',\n", n/10) + "}"),
	}
	for name, in := range inputs {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			res, err := Clean(in)
			if err == nil && !json.Valid(res.JSON) {
				t.Fatalf("invalid JSON returned")
			}
		})
	}
}
