package llm

import (
	"errors"
	"strings"
	"testing"

	"github.com/llmpipeline/pipeline/heal"
)

func TestEnqueuedTokenLimit(t *testing.T) {
	for _, tc := range []struct {
		name, msg string
		want      int
		ok        bool
	}{
		{"openai", "Enqueued token limit reached for gpt-4o-mini in organization org-snq6. Limit: 2,000,000 enqueued tokens. Please try again once some in_progress batches have been completed.", 2000000, true},
		{"no commas", "Limit: 90000 enqueued tokens.", 90000, true},
		{"none named", "Enqueued token limit reached.", 0, false},
		{"zero", "Limit: 0 enqueued tokens", 0, false},
		{"overflow", "Limit: 99999999999999999999999 enqueued tokens", 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := EnqueuedTokenLimit(tc.msg)
			if got != tc.want || ok != tc.ok {
				t.Errorf("EnqueuedTokenLimit(%q) = %d, %v; want %d, %v", tc.msg, got, ok, tc.want, tc.ok)
			}
		})
	}
}

func TestCustomIDOf(t *testing.T) {
	for _, tc := range []struct{ name, line, want string }{
		{"whole", `{"id":"batch_req_1","custom_id":"a-1","response":{"status_code":200}}`, "a-1"},
		{"cut after the id", `{"custom_id":"a-1","error":null,"id":"batch_req_1","response":{"body":{"choi`, "a-1"},
		{"cut before the id", `{"id":"batch_req_1","respo`, ""},
		{"garbage before the id", `{"id": 7, ]{"custom_id":"a-1"}`, ""},
		{"not an object", `["custom_id","a-1"]`, ""},
		{"id not a string", `{"custom_id":12}`, ""},
		{"empty", ``, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := customIDOf([]byte(tc.line)); got != tc.want {
				t.Errorf("customIDOf(%q) = %q, want %q", tc.line, got, tc.want)
			}
		})
	}
}

// readAll runs readResults over file: every result, in order.
func readAll(t testing.TB, file string, want func(string) bool) ([]BatchResult, error) {
	var out []BatchResult
	err := readResults(strings.NewReader(file), ProviderOpenAI, want, func(line []byte) (BatchResult, error) {
		var res BatchResult
		if strings.Contains(string(line), "PARSE-FAIL") {
			return res, errors.New("the answer does not parse")
		}
		res.CustomID, res.Type = customIDOf(line), ResultSucceeded
		return res, nil
	}, func(r BatchResult) error {
		out = append(out, r)
		return nil
	})
	return out, err
}

// TestReadResultsGoesOnPastBadLines: an unreadable line (cut, garbage,
// over the line limit, an answer that does not parse) is handed on as
// ResultUnreadable with its custom id when it can be made out, and the
// lines after it are read; lines want refuses are dropped.
func TestReadResultsGoesOnPastBadLines(t *testing.T) {
	long := `{"custom_id":"e-5","x":"` + strings.Repeat("x", batchLineLimit) + `"}`
	file := strings.Join([]string{
		`{"custom_id":"a-1","response":{}}`,
		`{"custom_id":"b-2","response":{"bo`,
		`{"id": 7, ]`,
		`{"custom_id":"stray-9","response":{}}`,
		`{"custom_id":"c-3","response":{"PARSE-FAIL":1}}`,
		long,
		`{"response":{}}`,
		`{"custom_id":"d-4","response":{}}`,
	}, "\n")
	got, err := readAll(t, file, func(id string) bool { return id != "stray-9" })
	if err != nil {
		t.Fatal(err)
	}
	type res struct{ id, typ string }
	want := []res{{"a-1", ResultSucceeded}, {"b-2", ResultUnreadable}, {"", ResultUnreadable}, {"c-3", ResultUnreadable},
		{"e-5", ResultUnreadable}, {"", ResultUnreadable}, {"d-4", ResultSucceeded}}
	if len(got) != len(want) {
		t.Fatalf("%d results, want %d: %+v", len(got), len(want), got)
	}
	for i, w := range want {
		if got[i].CustomID != w.id || got[i].Type != w.typ {
			t.Errorf("result %d: %q %s, want %q %s", i, got[i].CustomID, got[i].Type, w.id, w.typ)
		}
		if w.typ == ResultUnreadable {
			if model.KindOf(got[i].Err) != model.KindTransport || !strings.Contains(got[i].Err.Error(), "unreadable result line") {
				t.Errorf("result %d: err %v, want a transport error naming the line", i, got[i].Err)
			}
			if len(got[i].Err.Error()) > 400 {
				t.Errorf("result %d: err of %d bytes, want the line cut short", i, len(got[i].Err.Error()))
			}
		}
	}
}

func FuzzReadResults(f *testing.F) {
	for _, s := range []string{
		`{"custom_id":"a-1","response":{}}` + "\n" + `{"custom_id":"b-2","resp`,
		`{"id": 7, ]` + "\n\n" + `{"custom_id":"a"}`,
		"\n\n\n",
		`{"custom_id":"c-3","response":{"PARSE-FAIL":1}}`,
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, file string) {
		got, err := readAll(t, file, nil)
		if err != nil {
			t.Fatalf("readResults over a string: %v", err)
		}
		lines := 0
		for l := range strings.SplitSeq(file, "\n") {
			if strings.TrimSpace(l) != "" {
				lines++
			}
		}
		if len(got) != lines {
			t.Fatalf("%d results for %d lines", len(got), lines)
		}
		for _, r := range got {
			if (r.Type == ResultUnreadable) != (r.Err != nil) {
				t.Fatalf("result %+v: an unreadable result carries an error, and only it", r)
			}
		}
	})
}
