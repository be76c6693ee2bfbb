package cluster

import (
	"reflect"
	"testing"

	"github.com/llmpipeline/pipeline/job"
)

func att(class job.Class, diags ...job.Diagnostic) job.Attempt {
	return job.Attempt{Class: class, Raw: "{}", Diagnostics: diags}
}

func diag(path, keyword, received string) job.Diagnostic {
	return job.Diagnostic{Path: path, Keyword: keyword, Received: received}
}

// TestFailures: one failure per fingerprint per run, at its first failing
// attempt, fixed when the run's last validated attempt kept all its
// diagnostics and had none of it (the cases of the index's
// TestWriteRecordsFixed, read without a store).
func TestFailures(t *testing.T) {
	t.Parallel()
	a := diag("/a", "type", `"1"`)
	b := diag("/b", "enum", `"x"`)
	omitted := att(job.ClassSchema, b)
	omitted.DiagnosticsOmitted = 4
	s := job.ClassSchema
	tests := []struct {
		name  string
		trace []job.Attempt
		want  map[string]bool // path pattern -> fixed
	}{
		{"healed", []job.Attempt{att(s, a), att("")}, map[string]bool{"/a": true}},
		{"dead of another field", []job.Attempt{att(s, a, b), att(s, b)}, map[string]bool{"/a": true, "/b": false}},
		{"still failing at the end", []job.Attempt{att(s, a), att(s, a)}, map[string]bool{"/a": false}},
		{"fixed then broken again", []job.Attempt{att(s, a), att(s, b), att(s, a)}, map[string]bool{"/a": false, "/b": true}},
		{"last attempt truncated", []job.Attempt{att(s, a), att(job.ClassTruncated)}, map[string]bool{"/a": false}},
		{"last attempt not JSON", []job.Attempt{att(s, a, b), att(s, b), att(job.ClassGrammar)}, map[string]bool{"/a": true, "/b": false}},
		{"diagnostics omitted at the end", []job.Attempt{att(s, a, b), omitted}, map[string]bool{"/a": false, "/b": false}},
		{"one attempt", []job.Attempt{att(s, a)}, map[string]bool{"/a": false}},
		{"array indices are one cluster", []job.Attempt{
			att(s, diag("/items/0/p", "type", "1"), diag("/items/1/p", "type", "2")),
			att(s, diag("/items/2/p", "type", "3")),
		}, map[string]bool{"/items/*/p": false}},
		{"array item fixed", []job.Attempt{att(s, diag("/items/0/p", "type", "1"), diag("/items/1/p", "type", "2")), att("")},
			map[string]bool{"/items/*/p": true}},
	}
	var g Grouper
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			o := job.Outcome{JobID: "j", Schema: "invoice", SchemaVersion: "v1", Trace: tc.trace}
			fs := g.Failures(nil, &o)
			got := map[string]bool{}
			for _, f := range fs {
				if _, dup := got[f.Path]; dup {
					t.Errorf("two failures for %s", f.Path)
				}
				got[f.Path] = f.Fixed
				if want := ID(Fingerprint{Schema: "invoice", Version: "v1", Path: f.Path, Keyword: f.Keyword}); f.ID != want {
					t.Errorf("%s: id %s, want %s", f.Path, f.ID, want)
				}
				if d := first(tc.trace, f.Path); d != [2]int{f.Attempt, f.Seq} {
					t.Errorf("%s: first failing at attempt %d diagnostic %d, want %v", f.Path, f.Attempt, f.Seq, d)
				}
			}
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("fixed by path = %v, want %v", got, tc.want)
			}
		})
	}
}

// first is the attempt number (from 1) and the diagnostic's position where
// a path pattern first failed in trace.
func first(trace []job.Attempt, pattern string) [2]int {
	for k, a := range trace {
		for j, d := range a.Diagnostics {
			if PathPattern(d.Path) == pattern {
				return [2]int{k + 1, j}
			}
		}
	}
	return [2]int{}
}
