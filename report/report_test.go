package report

import (
	"bytes"
	"encoding/json"
	"flag"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/index"
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
	attempts [][]job.Diagnostic
}

func d(path, keyword, received string) job.Diagnostic {
	return job.Diagnostic{Path: path, Keyword: keyword, Message: keyword, Received: received}
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
			attempts: [][]job.Diagnostic{{d("/total", "type", `"120.50"`)}, {d("/total", "type", `"120.5"`)}}})
	}
	// /items/*/price minimum: 10 jobs, 8 healed at attempt 2.
	for i := 0; i < 10; i++ {
		s := spec{id: id("price"), schema: "invoice", attempts: [][]job.Diagnostic{{d(fmt.Sprintf("/items/%d/price", i%3), "minimum", "-1")}}}
		if i < 2 {
			s.dead, s.class = true, "no_progress"
			s.attempts = append(s.attempts, []job.Diagnostic{d("/items/0/price", "minimum", "-1")})
		} else {
			s.attempts = append(s.attempts, nil)
		}
		add(s)
	}
	// /currency enum: 2 healed first, then 3 dead in a row -> impossible by streak.
	for i := 0; i < 5; i++ {
		s := spec{id: id("cur"), schema: "invoice", attempts: [][]job.Diagnostic{{d("/currency", "enum", `"eur"`)}}}
		if i >= 2 {
			s.dead, s.class = true, "exhausted"
			s.attempts = append(s.attempts, []job.Diagnostic{d("/currency", "enum", `"Eur"`)})
		} else {
			s.attempts = append(s.attempts, nil)
		}
		add(s)
	}
	// /vendor required: 2 dead only -> too few to flag.
	for i := 0; i < 2; i++ {
		add(spec{id: id("ven"), schema: "receipt", dead: true, class: "truncated", attempts: [][]job.Diagnostic{{d("/vendor", "required", "")}}})
	}
	// /date format: 3 dead then a success -> the streak is broken, 25% healed.
	for i := 0; i < 4; i++ {
		s := spec{id: id("date"), schema: "receipt", attempts: [][]job.Diagnostic{{d("/date", "format", `"1/3/25"`)}}}
		if i < 3 {
			s.dead, s.class = true, "exhausted"
		} else {
			s.attempts = append(s.attempts, nil)
		}
		add(s)
	}
	// shipment: every job dies of /code (pattern, never fixed), while the
	// model fixes /carrier (enum) on the heal turn -> /code impossible,
	// /carrier masked, not impossible. Two of the /code failures are the
	// last attempt's only diagnostic.
	for i := 0; i < 4; i++ {
		add(spec{id: id("shp"), schema: "shipment", dead: true, class: "exhausted", attempts: [][]job.Diagnostic{
			{d("/carrier", "enum", `"dhl"`), d("/code", "pattern", `"x1"`)},
			{d("/code", "pattern", `"x2"`)}}})
	}
	// clean first-pass successes
	for i := 0; i < 6; i++ {
		schema := "invoice"
		if i%2 == 1 {
			schema = "receipt"
		}
		add(spec{id: id("ok"), schema: schema, attempts: [][]job.Diagnostic{nil}})
	}
	return out
}

func (s spec) outcome(i int) job.Outcome {
	o := job.Outcome{JobID: s.id, Schema: s.schema, SchemaVersion: "ver-" + s.schema, Status: job.StatusSucceeded, Model: "sim",
		Attempts: len(s.attempts), StartedAt: at(i).Add(-time.Second), FinishedAt: at(i)}
	if s.dead {
		o.Status, o.Class = job.StatusDeadLettered, s.class
	}
	for k, ds := range s.attempts {
		o.Trace = append(o.Trace, job.Attempt{N: k + 1, Raw: "{}", Diagnostics: ds, PromptTokens: 100 * (k + 1), CompletionTokens: 10})
	}
	return o
}

func at(i int) time.Time { return t0.Add(time.Duration(i) * time.Minute) }

func load(t testing.TB) (*index.Store, []spec) {
	t.Helper()
	st, err := index.Open(filepath.Join(t.TempDir(), "pipeline.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	specs := dataset()
	var outs []job.Outcome
	for i, s := range specs {
		outs = append(outs, s.outcome(i))
	}
	if err := st.Write(t.Context(), outs); err != nil {
		t.Fatal(err)
	}
	return st, specs
}

type want struct {
	jobs, dead, fixed int
	flagged, masked   bool
	last              []end // in time order
}

type end struct{ dead, fixed bool }

// expect derives every cluster's numbers from the dataset: a cluster is
// fixed in a job when the job's last attempt has no diagnostic of it.
func expect(specs []spec, o Options) map[string]*want {
	o = o.withDefaults()
	m := map[string]*want{}
	id := func(s spec, dg job.Diagnostic) string {
		return cluster.ID(cluster.Fingerprint{Schema: s.schema, Version: "ver-" + s.schema, Path: dg.Path, Keyword: dg.Keyword})
	}
	for _, s := range specs {
		atEnd := map[string]bool{}
		for _, dg := range s.attempts[len(s.attempts)-1] {
			atEnd[id(s, dg)] = true
		}
		seen := map[string]bool{}
		for _, ds := range s.attempts {
			for _, dg := range ds {
				c := id(s, dg)
				if seen[c] {
					continue
				}
				seen[c] = true
				w := m[c]
				if w == nil {
					w = &want{}
					m[c] = w
				}
				w.jobs++
				if s.dead {
					w.dead++
				}
				if !atEnd[c] {
					w.fixed++
				}
				w.last = append(w.last, end{s.dead, !atEnd[c]})
			}
		}
	}
	for _, w := range m {
		heal := float64(w.jobs-w.dead) / float64(w.jobs)
		fix := float64(w.fixed) / float64(w.jobs)
		lowHeal := w.jobs >= o.MinJobs && heal <= o.MaxHealRate
		deadStreak, stuckStreak := len(w.last) >= Streak, len(w.last) >= Streak
		for _, e := range w.last[max(0, len(w.last)-Streak):] {
			deadStreak = deadStreak && e.dead
			stuckStreak = stuckStreak && e.dead && !e.fixed
		}
		w.flagged = (lowHeal && fix <= o.MaxHealRate) || stuckStreak
		w.masked = !w.flagged && (lowHeal || deadStreak)
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
			if want := float64(w.fixed) / float64(w.jobs); math.Abs(c.FixRate-want) > 1e-9 {
				t.Errorf("fix rate = %v, want %v", c.FixRate, want)
			}
			if c.Impossible != w.flagged || c.Masked != w.masked {
				t.Errorf("impossible, masked = %v, %v (%s), want %v, %v", c.Impossible, c.Masked, c.Reason, w.flagged, w.masked)
			}
			if c.Impossible && (c.Reason == "" || c.Suggestion == "" || len(c.Examples) == 0) {
				t.Errorf("a flag without evidence: %+v", c)
			}
			if c.Masked && !strings.HasPrefix(c.Reason, "masked: ") {
				t.Errorf("masked cluster with reason %q", c.Reason)
			}
			if !c.Impossible && !c.Masked && c.Reason != "" {
				t.Errorf("reason %q on a cluster neither impossible nor masked", c.Reason)
			}
			if strings.Contains(c.Path, "/items/") && c.Path != "/items/*/price" {
				t.Errorf("path %q not a pattern", c.Path)
			}
		})
		if c.Impossible {
			flagged++
		}
	}
	if flagged != 3 {
		t.Errorf("%d impossible clusters, the dataset builds exactly 3 (heal rate twice, streak)", flagged)
	}
	// the rules, by name
	byPath := map[string]Cluster{}
	for _, c := range r.Clusters {
		byPath[c.Path] = c
	}
	if c := byPath["/total"]; !c.Impossible || !strings.Contains(c.Reason, "healed in 0") {
		t.Errorf("/total %q, want impossible by the heal-rate rule", c.Reason)
	}
	if c := byPath["/currency"]; !c.Impossible || !strings.Contains(c.Reason, "last 3") {
		t.Errorf("/currency %q, want impossible by the streak rule", c.Reason)
	}
	// A field the model fixed in every job, whose jobs all died of another
	// field, is not impossible: its reason names the field that killed them.
	if c := byPath["/carrier"]; c.Impossible || !c.Masked || c.HealRate != 0 || c.FixRate != 1 ||
		!strings.Contains(c.Reason, "/code (pattern) in 4") || !strings.Contains(c.Suggestion, "/code") {
		t.Errorf("/carrier = %+v, want masked by /code, heal rate 0, fix rate 1", c)
	}
	if c := byPath["/code"]; !c.Impossible || c.FixRate != 0 {
		t.Errorf("/code = %+v, want impossible, fix rate 0", c)
	}
	// sorted by dead letters still failing there, then dead letters
	stuck := func(c Cluster) int { return c.Jobs - c.Fixed }
	if !sort.SliceIsSorted(r.Clusters, func(i, j int) bool {
		a, b := r.Clusters[i], r.Clusters[j]
		return stuck(a) > stuck(b) || stuck(a) == stuck(b) && a.DeadLetters > b.DeadLetters
	}) {
		t.Errorf("clusters not sorted by dead letters still failing, then dead letters")
	}
	rank := map[string]int{}
	for i, c := range r.Clusters {
		rank[c.Path] = i
	}
	if rank["/carrier"] < rank["/code"] {
		t.Errorf("masked /carrier ranked %d, above /code (%d) that killed its jobs", rank["/carrier"], rank["/code"])
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
				if c.Jobs != w.jobs || c.DeadLetters != w.dead || c.Impossible != w.flagged || c.Masked != w.masked {
					t.Errorf("%s: jobs %d dead %d flagged %v masked %v, want %d %d %v %v", c.Path, c.Jobs, c.DeadLetters, c.Impossible, c.Masked,
						w.jobs, w.dead, w.flagged, w.masked)
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
	for _, schema := range []string{"invoice", "receipt", "shipment"} {
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
		if ok == 0 {
			if f.TokensPerSucceeded != nil {
				t.Errorf("%s: tokens per succeeded %v with no success, want none (null)", schema, *f.TokensPerSucceeded)
			}
		} else if f.TokensPerSucceeded == nil {
			t.Errorf("%s: no tokens per succeeded", schema)
		} else {
			near("tokens per succeeded", *f.TokensPerSucceeded, float64(okTokens)/float64(ok))
		}
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

// generated is the clock of the golden reports.
var generated = time.Date(2025, 3, 2, 9, 30, 0, 0, time.UTC)

func clock() time.Time { return generated }

// goldenStore is the dataset plus the operator's loop on a schema "part":
// its version 1 dead-letters every job on /code (pattern); after a schema
// fix (version 2) two of them are replayed and succeed, and one new job
// dies on /name. One /total dead letter of invoice is replayed under the
// same version and succeeds. Then ten more /code dead letters make the
// cluster count of the default view exceed --top.
func goldenStore(t *testing.T) *index.Store {
	t.Helper()
	st, specs := load(t)
	i := len(specs)
	var outs []job.Outcome
	next := func(s spec, version string, run int) {
		o := s.outcome(i)
		o.SchemaVersion, o.Run = version, run
		outs = append(outs, o)
		i++
	}
	code := [][]job.Diagnostic{{d("/code", "pattern", `"x1"`)}, {d("/code", "pattern", `"x2"`)}}
	for k := 0; k < 3; k++ {
		next(spec{id: fmt.Sprintf("part-%d", k), schema: "part", dead: true, class: "exhausted", attempts: code}, "part-v1", 0)
	}
	for k := 0; k < 2; k++ {
		next(spec{id: fmt.Sprintf("part-%d", k), schema: "part", attempts: [][]job.Diagnostic{nil}}, "part-v2", 1)
	}
	next(spec{id: "part-3", schema: "part", dead: true, class: "exhausted", attempts: [][]job.Diagnostic{{d("/name", "required", "")}, {d("/name", "required", "")}}}, "part-v2", 0)
	next(spec{id: specs[0].id, schema: "invoice", attempts: [][]job.Diagnostic{nil}}, "ver-invoice", 1)
	if err := st.Write(t.Context(), outs); err != nil {
		t.Fatal(err)
	}
	for k := 0; k < 2; k++ {
		if err := st.MarkReplayed(t.Context(), fmt.Sprintf("part-%d", k), 0); err != nil {
			t.Fatal(err)
		}
	}
	return st
}

func goldenOptions() Options {
	return Options{Lint: lint(), Top: 6, Now: clock, Source: "/var/lib/pipeline/pipeline.db"}
}

func checkGolden(t *testing.T, name string, got []byte) {
	t.Helper()
	golden := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(golden, got, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(golden)
	if err != nil {
		t.Fatalf("%v (run go test -update)", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("output differs from %s (go test ./report -run TestRenderGolden -update to accept):\n%s", golden, got)
	}
}

func TestRenderGolden(t *testing.T) {
	t.Parallel()
	st := goldenStore(t)
	r, err := Build(t.Context(), st, goldenOptions())
	if err != nil {
		t.Fatal(err)
	}
	for format, ext := range map[string]string{"table": "txt", "json": "json", "markdown": "md", "html": "html"} {
		t.Run(format, func(t *testing.T) {
			var buf bytes.Buffer
			if err := r.Render(&buf, format); err != nil {
				t.Fatal(err)
			}
			checkGolden(t, "report."+ext, buf.Bytes())
		})
	}
	t.Run("all versions", func(t *testing.T) {
		o := goldenOptions()
		o.Version, o.Top = VersionAll, 0
		r, err := Build(t.Context(), st, o)
		if err != nil {
			t.Fatal(err)
		}
		var buf bytes.Buffer
		if err := r.Render(&buf, "table"); err != nil {
			t.Fatal(err)
		}
		checkGolden(t, "report-all.txt", buf.Bytes())
	})
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
	for _, k := range []string{"id", "schema", "version", "path", "keyword", "dead_letters", "jobs", "heal_rate", "fix_rate", "impossible", "masked", "reason", "suggestion", "examples", "received", "first_seen", "last_seen"} {
		if _, ok := doc.Clusters[0][k]; !ok {
			t.Errorf("cluster JSON lacks %q", k)
		}
	}
	for _, k := range []string{"schema", "version", "jobs", "succeeded", "dead_lettered", "first_pass", "succeeded_at", "dead_by_class", "tokens_per_succeeded", "heal_token_share"} {
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
	st, err := index.Open(filepath.Join(t.TempDir(), "pipeline.db"))
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

// TestVersionsNeverMix writes the same schema under two versions: the
// funnel and the clusters keep them apart, and --version selects one.
func TestVersionsNeverMix(t *testing.T) {
	t.Parallel()
	st, err := index.Open(filepath.Join(t.TempDir(), "pipeline.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	const v1, v2 = "aaaaaaaa1111", "bbbbbbbb2222"
	var outs []job.Outcome
	for i := 0; i < 6; i++ {
		s := spec{id: fmt.Sprintf("v-%d", i), schema: "invoice", attempts: [][]job.Diagnostic{nil}}
		version := v1
		if i%3 == 0 { // v2: dead on /total
			version = v2
			s.dead, s.class = true, "exhausted"
			s.attempts = [][]job.Diagnostic{{d("/total", "type", `"1"`)}}
		} else if i%3 == 1 { // v1: healed on /total
			s.attempts = [][]job.Diagnostic{{d("/total", "type", `"1"`)}, nil}
		}
		o := s.outcome(i)
		o.SchemaVersion = version
		outs = append(outs, o)
	}
	if err := st.Write(t.Context(), outs); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name     string
		o        Options
		keys     []string
		clusters map[string]int // version -> dead letters of /total
	}{
		{"all", Options{Version: VersionAll}, []string{"invoice@aaaaaaaa", "invoice@bbbbbbbb"}, map[string]int{v1: 0, v2: 2}},
		{"version", Options{Version: v2}, []string{"invoice"}, map[string]int{v2: 2}},
		// the latest outcome (i = 5) is of v1
		{"latest", Options{}, []string{"invoice"}, map[string]int{v1: 0}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r, err := Build(t.Context(), st, tc.o)
			if err != nil {
				t.Fatal(err)
			}
			if got := r.Schemas(); !reflect.DeepEqual(got, tc.keys) {
				t.Fatalf("funnel keys %v, want %v", got, tc.keys)
			}
			for _, k := range tc.keys {
				f := r.Funnel[k]
				var jobs, dead int
				for _, o := range outs {
					if o.SchemaVersion == f.Version {
						jobs++
						if o.Status == job.StatusDeadLettered {
							dead++
						}
					}
				}
				if f.Schema != "invoice" || f.Jobs != jobs || f.DeadLettered != dead {
					t.Errorf("funnel %s = %+v, want %d jobs, %d dead of version %s only", k, f, jobs, dead, f.Version)
				}
			}
			got := map[string]int{}
			for _, c := range r.Clusters {
				got[c.Version] = c.DeadLetters
			}
			if !reflect.DeepEqual(got, tc.clusters) {
				t.Errorf("clusters by version %v, want %v", got, tc.clusters)
			}
		})
	}
}
