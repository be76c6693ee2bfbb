package report

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/dlq"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/")

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

// spec is one job run of the hand-built dataset: per attempt, the failing
// (path, keyword, received) triples; a succeeded job's last attempt is clean.
type spec struct {
	id       string
	schema   string
	dead     bool
	class    string
	attempts [][]dlq.Diagnostic
}

func d(path, keyword, received string) dlq.Diagnostic {
	return dlq.Diagnostic{Path: path, Keyword: keyword, Message: keyword, Received: received}
}

// dataset: each cluster is built to exercise one rule; the expected numbers
// are derived from it by expect(), not written down.
func dataset() []spec {
	var out []spec
	add := func(s spec) { out = append(out, s) }
	n := 0
	id := func(p string) string { n++; return fmt.Sprintf("%s-%03d", p, n) }
	// /total type: always fails, never healed -> impossible by heal rate.
	for i := 0; i < 5; i++ {
		add(spec{id: id("tot"), schema: "invoice", dead: true, class: "exhausted",
			attempts: [][]dlq.Diagnostic{{d("/total", "type", `"120.50"`)}, {d("/total", "type", `"120.5"`)}}})
	}
	// /items/*/price minimum: 10 jobs, 8 healed at attempt 2.
	for i := 0; i < 10; i++ {
		s := spec{id: id("price"), schema: "invoice", attempts: [][]dlq.Diagnostic{{d(fmt.Sprintf("/items/%d/price", i%3), "minimum", "-1")}}}
		if i < 2 {
			s.dead, s.class = true, "no_progress"
			s.attempts = append(s.attempts, []dlq.Diagnostic{d("/items/0/price", "minimum", "-1")})
		} else {
			s.attempts = append(s.attempts, nil)
		}
		add(s)
	}
	// /currency enum: 2 healed first, then 3 dead in a row -> impossible by streak.
	for i := 0; i < 5; i++ {
		s := spec{id: id("cur"), schema: "invoice", attempts: [][]dlq.Diagnostic{{d("/currency", "enum", `"eur"`)}}}
		if i >= 2 {
			s.dead, s.class = true, "exhausted"
			s.attempts = append(s.attempts, []dlq.Diagnostic{d("/currency", "enum", `"Eur"`)})
		} else {
			s.attempts = append(s.attempts, nil)
		}
		add(s)
	}
	// /vendor required: 2 dead only -> too few to flag.
	for i := 0; i < 2; i++ {
		add(spec{id: id("ven"), schema: "receipt", dead: true, class: "truncated", attempts: [][]dlq.Diagnostic{{d("/vendor", "required", "")}}})
	}
	// /date format: 3 dead then a success -> the streak is broken, 25% healed.
	for i := 0; i < 4; i++ {
		s := spec{id: id("date"), schema: "receipt", attempts: [][]dlq.Diagnostic{{d("/date", "format", `"1/3/25"`)}}}
		if i < 3 {
			s.dead, s.class = true, "exhausted"
		} else {
			s.attempts = append(s.attempts, nil)
		}
		add(s)
	}
	// clean first-pass successes
	for i := 0; i < 6; i++ {
		schema := "invoice"
		if i%2 == 1 {
			schema = "receipt"
		}
		add(spec{id: id("ok"), schema: schema, attempts: [][]dlq.Diagnostic{nil}})
	}
	return out
}

func (s spec) outcome(i int) dlq.Outcome {
	o := dlq.Outcome{JobID: s.id, Schema: s.schema, SchemaVersion: "ver-" + s.schema, Status: dlq.StatusSucceeded, Model: "sim",
		Attempts: len(s.attempts), StartedAt: at(i).Add(-time.Second), FinishedAt: at(i)}
	if s.dead {
		o.Status, o.Class = dlq.StatusDeadLettered, s.class
	}
	for k, ds := range s.attempts {
		o.Trace = append(o.Trace, dlq.Attempt{N: k + 1, Raw: "{}", Diagnostics: ds, PromptTokens: 100 * (k + 1), CompletionTokens: 10})
	}
	return o
}

func at(i int) time.Time { return t0.Add(time.Duration(i) * time.Minute) }

func load(t testing.TB) (*dlq.Store, []spec) {
	t.Helper()
	st, err := dlq.Open(filepath.Join(t.TempDir(), "pipeline.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	specs := dataset()
	var outs []dlq.Outcome
	for i, s := range specs {
		outs = append(outs, s.outcome(i))
	}
	if err := st.Write(t.Context(), outs); err != nil {
		t.Fatal(err)
	}
	return st, specs
}

type want struct {
	jobs, dead int
	flagged    bool
	last       []bool // dead flags in time order
}

// expect derives every cluster's numbers from the dataset.
func expect(specs []spec, o Options) map[string]*want {
	o = o.withDefaults()
	m := map[string]*want{}
	for _, s := range specs {
		seen := map[string]bool{}
		for _, ds := range s.attempts {
			for _, dg := range ds {
				id := dlq.ClusterID(dlq.Fingerprint{Schema: s.schema, Version: "ver-" + s.schema, Path: dg.Path, Keyword: dg.Keyword})
				if seen[id] {
					continue
				}
				seen[id] = true
				w := m[id]
				if w == nil {
					w = &want{}
					m[id] = w
				}
				w.jobs++
				if s.dead {
					w.dead++
				}
				w.last = append(w.last, s.dead)
			}
		}
	}
	for _, w := range m {
		heal := float64(w.jobs-w.dead) / float64(w.jobs)
		streak := len(w.last) >= Streak && !slices.Contains(w.last[len(w.last)-Streak:], false)
		w.flagged = (w.jobs >= o.MinJobs && heal <= o.MaxHealRate) || streak
	}
	return m
}

func TestBuildClusters(t *testing.T) {
	t.Parallel()
	st, specs := load(t)
	r, err := Build(t.Context(), st, Options{})
	if err != nil {
		t.Fatal(err)
	}
	exp := expect(specs, Options{})
	if len(r.Clusters) != len(exp) {
		t.Fatalf("%d clusters, want %d", len(r.Clusters), len(exp))
	}
	flagged := 0
	for _, c := range r.Clusters {
		t.Run(c.Schema+c.Path, func(t *testing.T) {
			w := exp[c.ID]
			if w == nil {
				t.Fatalf("unexpected cluster %+v", c)
			}
			if c.Jobs != w.jobs || c.DeadLetters != w.dead {
				t.Errorf("jobs/dead = %d/%d, want %d/%d", c.Jobs, c.DeadLetters, w.jobs, w.dead)
			}
			if want := float64(w.jobs-w.dead) / float64(w.jobs); math.Abs(c.HealRate-want) > 1e-9 {
				t.Errorf("heal rate = %v, want %v", c.HealRate, want)
			}
			if c.Impossible != w.flagged {
				t.Errorf("impossible = %v (%s), want %v", c.Impossible, c.Reason, w.flagged)
			}
			if c.Impossible && (c.Reason == "" || c.Suggestion == "" || len(c.Examples) == 0) {
				t.Errorf("a flag without evidence: %+v", c)
			}
			if strings.Contains(c.Path, "/items/") && c.Path != "/items/*/price" {
				t.Errorf("path %q not a pattern", c.Path)
			}
		})
		if c.Impossible {
			flagged++
		}
	}
	if flagged != 2 {
		t.Errorf("%d impossible clusters, the dataset builds exactly 2 (heal rate, streak)", flagged)
	}
	// both rules, by name
	reasons := map[string]string{}
	for _, c := range r.Clusters {
		reasons[c.Path] = c.Reason
	}
	if !strings.Contains(reasons["/total"], "healed in 0") {
		t.Errorf("/total reason %q, want the heal-rate rule", reasons["/total"])
	}
	if !strings.Contains(reasons["/currency"], "last 3") {
		t.Errorf("/currency reason %q, want the streak rule", reasons["/currency"])
	}
	// sorted by dead letters
	if !sort.SliceIsSorted(r.Clusters, func(i, j int) bool { return r.Clusters[i].DeadLetters > r.Clusters[j].DeadLetters }) {
		t.Errorf("clusters not sorted by dead letters")
	}
}

func TestBuildThresholdsAndFilters(t *testing.T) {
	t.Parallel()
	st, specs := load(t)
	tests := []struct {
		name string
		o    Options
	}{
		{"lenient", Options{MaxHealRate: 0.5}},
		{"strict", Options{MinJobs: 6, MaxHealRate: -1}},
		{"schema", Options{Schema: "receipt"}},
		{"since", Options{Since: at(10)}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			r, err := Build(t.Context(), st, tc.o)
			if err != nil {
				t.Fatal(err)
			}
			var sel []spec
			for i, s := range specs {
				if (tc.o.Schema == "" || s.schema == tc.o.Schema) && !at(i).Before(tc.o.Since) {
					sel = append(sel, s)
				}
			}
			exp := expect(sel, tc.o)
			if len(r.Clusters) != len(exp) {
				t.Fatalf("%d clusters, want %d", len(r.Clusters), len(exp))
			}
			for _, c := range r.Clusters {
				w := exp[c.ID]
				if c.Jobs != w.jobs || c.DeadLetters != w.dead || c.Impossible != w.flagged {
					t.Errorf("%s: jobs %d dead %d flagged %v, want %d %d %v", c.Path, c.Jobs, c.DeadLetters, c.Impossible, w.jobs, w.dead, w.flagged)
				}
			}
		})
	}
}

func TestBuildFunnel(t *testing.T) {
	t.Parallel()
	st, specs := load(t)
	r, err := Build(t.Context(), st, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, schema := range []string{"invoice", "receipt"} {
		var jobs, ok, first, dead, tokens, okTokens, healTokens int
		byAttempt := map[int]int{}
		byClass := map[string]int{}
		for i, s := range specs {
			if s.schema != schema {
				continue
			}
			o := s.outcome(i)
			jobs++
			for k, a := range o.Trace {
				tokens += a.PromptTokens + a.CompletionTokens
				if k > 0 {
					healTokens += a.PromptTokens + a.CompletionTokens
				}
				if !s.dead {
					okTokens += a.PromptTokens + a.CompletionTokens
				}
			}
			if s.dead {
				dead++
				byClass[s.class]++
				continue
			}
			ok++
			byAttempt[len(s.attempts)]++
			if len(s.attempts) == 1 {
				first++
			}
		}
		f := r.Funnel[schema]
		if f == nil {
			t.Fatalf("no funnel for %s", schema)
		}
		if f.Jobs != jobs || f.Succeeded != ok || f.DeadLettered != dead || f.Tokens != tokens {
			t.Errorf("%s funnel %+v, want jobs %d ok %d dead %d tokens %d", schema, f, jobs, ok, dead, tokens)
		}
		near := func(name string, got, want float64) {
			if math.Abs(got-want) > 1e-9 {
				t.Errorf("%s %s = %v, want %v", schema, name, got, want)
			}
		}
		near("first pass", f.FirstPass, float64(first)/float64(jobs))
		near("tokens per succeeded", f.TokensPerSucceeded, float64(okTokens)/float64(ok))
		near("heal token share", f.HealTokenShare, float64(healTokens)/float64(tokens))
		for _, s := range f.SucceededAt {
			near(fmt.Sprintf("succeeded at %d", s.Attempt), s.Share, float64(byAttempt[s.Attempt])/float64(jobs))
		}
		for _, c := range f.DeadByClass {
			near("dead "+c.Class, c.Share, float64(byClass[c.Class])/float64(jobs))
		}
	}
}

func lint() []LintFinding {
	return []LintFinding{{Schema: "receipt", File: "schemas/receipt.json", Path: "/properties/total", Rule: "min_gt_max",
		Message: "minimum 10 > maximum 5", Suggestion: "swap or fix the bounds"}}
}

func TestRenderGolden(t *testing.T) {
	t.Parallel()
	st, _ := load(t)
	r, err := Build(t.Context(), st, Options{Lint: lint()})
	if err != nil {
		t.Fatal(err)
	}
	for format, ext := range map[string]string{"table": "txt", "json": "json", "markdown": "md", "html": "html"} {
		t.Run(format, func(t *testing.T) {
			var buf bytes.Buffer
			if err := r.Render(&buf, format); err != nil {
				t.Fatal(err)
			}
			golden := filepath.Join("testdata", "report."+ext)
			if *update {
				if err := os.WriteFile(golden, buf.Bytes(), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run go test -update)", err)
			}
			if !bytes.Equal(buf.Bytes(), want) {
				t.Errorf("%s output differs from %s (go test -run TestRenderGolden -update to accept):\n%s", format, golden, buf.String())
			}
		})
	}
	if err := r.Render(&bytes.Buffer{}, "pdf"); err == nil {
		t.Errorf("Render(pdf) succeeded")
	}
}

func TestJSONContract(t *testing.T) {
	t.Parallel()
	st, _ := load(t)
	r, err := Build(t.Context(), st, Options{Lint: lint()})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := r.Render(&buf, "json"); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		Clusters []map[string]json.RawMessage `json:"clusters"`
		Funnel   map[string]map[string]json.RawMessage
		Lint     []map[string]json.RawMessage
	}
	if err := json.Unmarshal(buf.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"id", "schema", "version", "path", "keyword", "dead_letters", "jobs", "heal_rate", "impossible", "reason", "suggestion", "examples", "received", "first_seen", "last_seen"} {
		if _, ok := doc.Clusters[0][k]; !ok {
			t.Errorf("cluster JSON lacks %q", k)
		}
	}
	for _, k := range []string{"jobs", "succeeded", "dead_lettered", "first_pass", "succeeded_at", "dead_by_class", "tokens_per_succeeded", "heal_token_share"} {
		if _, ok := doc.Funnel["invoice"][k]; !ok {
			t.Errorf("funnel JSON lacks %q", k)
		}
	}
	if len(doc.Lint) != 1 || string(doc.Lint[0]["rule"]) != `"min_gt_max"` {
		t.Errorf("lint JSON = %v", doc.Lint)
	}
}

func TestHTMLIsSelfContained(t *testing.T) {
	t.Parallel()
	st, _ := load(t)
	r, err := Build(t.Context(), st, Options{})
	if err != nil {
		t.Fatal(err)
	}
	var buf bytes.Buffer
	if err := r.Render(&buf, "html"); err != nil {
		t.Fatal(err)
	}
	h := buf.String()
	for _, bad := range []string{"<script", "<link", "src=", "url(", "@import", "https://"} {
		if strings.Contains(h, bad) {
			t.Errorf("html contains %q: it must not load anything", bad)
		}
	}
	if strings.Count(h, "<svg") != 2 {
		t.Errorf("want two inline SVG charts (clusters, funnel), got %d", strings.Count(h, "<svg"))
	}
}

func TestEmptyStore(t *testing.T) {
	t.Parallel()
	st, err := dlq.Open(filepath.Join(t.TempDir(), "pipeline.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	r, err := Build(t.Context(), st, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range Formats() {
		var buf bytes.Buffer
		if err := r.Render(&buf, f); err != nil {
			t.Errorf("%s: %v", f, err)
		}
	}
	js, _ := json.Marshal(r)
	if !bytes.Contains(js, []byte(`"clusters":[]`)) || !bytes.Contains(js, []byte(`"lint":[]`)) {
		t.Errorf("empty report JSON %s: want empty arrays, not null", js)
	}
}
