package report

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/index"
)

func openStore(t *testing.T) *index.Store {
	t.Helper()
	st, err := index.Open(filepath.Join(t.TempDir(), "pipeline.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// partRun is one run of a job of schema "part" at a version: dead on
// /code (pattern, twice) or valid at the first call.
func partRun(id, version string, run int, dead bool, i int) job.Outcome {
	s := spec{id: id, schema: "part", attempts: [][]job.Diagnostic{nil}}
	if dead {
		s.dead, s.class = true, "exhausted"
		s.attempts = [][]job.Diagnostic{{d("/code", "pattern", `"x1"`)}, {d("/code", "pattern", `"x2"`)}}
	}
	o := s.outcome(i)
	o.SchemaVersion, o.Run = version, run
	return o
}

// replayLoop writes four dead letters of part on /code at version v1, then
// (replays true) the replay of each, run 1 at version v2, all succeeded,
// marked as `dlq replay` marks them.
func replayLoop(t *testing.T, st *index.Store, v1, v2 string, replays int) {
	t.Helper()
	var outs []job.Outcome
	for k := 0; k < 4; k++ {
		outs = append(outs, partRun(fmt.Sprintf("p-%d", k), v1, 0, true, k))
	}
	for k := 0; k < replays; k++ {
		outs = append(outs, partRun(fmt.Sprintf("p-%d", k), v2, 1, false, 10+k))
	}
	if err := st.Write(t.Context(), outs); err != nil {
		t.Fatal(err)
	}
	for k := 0; k < replays; k++ {
		if err := st.MarkReplayed(t.Context(), fmt.Sprintf("p-%d", k), 0); err != nil {
			t.Fatal(err)
		}
	}
}

// TestReplayedHealedNoLongerFlags is the operator's loop: a field the model
// cannot satisfy is flagged; after a schema fix and a replay in which
// every job succeeded, the report no longer lists it as impossible. By
// default it covers the fixed version only; with --version all the old
// version's cluster shows its dead letters as replayed, healed, unflagged.
// A replay under the same version heals the same way.
func TestReplayedHealedNoLongerFlags(t *testing.T) {
	t.Parallel()
	const v1, v2 = "1111aaaa", "2222bbbb"
	code := func(version string) string {
		return cluster.ID(cluster.Fingerprint{Schema: "part", Version: version, Path: "/code", Keyword: "pattern"})
	}
	find := func(r *Report, id string) *Cluster {
		for i := range r.Clusters {
			if r.Clusters[i].ID == id {
				return &r.Clusters[i]
			}
		}
		return nil
	}

	t.Run("before the replay", func(t *testing.T) {
		t.Parallel()
		st := openStore(t)
		replayLoop(t, st, v1, v2, 0)
		r, err := Build(t.Context(), st, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if c := find(r, code(v1)); c == nil || !c.Impossible || c.ReplayedHealed != 0 {
			t.Fatalf("before the replay: /code = %+v, want impossible", c)
		}
	})
	t.Run("fixed version, default", func(t *testing.T) {
		t.Parallel()
		st := openStore(t)
		replayLoop(t, st, v1, v2, 4)
		r, err := Build(t.Context(), st, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if len(r.Impossible()) != 0 || find(r, code(v1)) != nil {
			t.Errorf("after the fix and replay the default report still flags %+v", r.Impossible())
		}
		if want := map[string][]string{"part": {v2}}; !reflect.DeepEqual(r.Versions, want) || r.Filter.Version != VersionLatest {
			t.Errorf("versions covered %v (%s), want %v (latest)", r.Versions, r.Filter.Version, want)
		}
		if r.Totals.Jobs != 4 || r.Totals.Succeeded != 4 || r.Totals.DeadLettered != 0 {
			t.Errorf("totals %+v, want the 4 replays only", r.Totals)
		}
	})
	t.Run("fixed version, all versions", func(t *testing.T) {
		t.Parallel()
		st := openStore(t)
		replayLoop(t, st, v1, v2, 4)
		r, err := Build(t.Context(), st, Options{Version: VersionAll})
		if err != nil {
			t.Fatal(err)
		}
		c := find(r, code(v1))
		if c == nil || c.Impossible || c.Masked || c.ReplayedHealed != 4 || c.DeadLetters != 4 || c.Reason != "" {
			t.Errorf("--version all: /code of v1 = %+v, want 4 dead letters, all replayed, healed, no flag", c)
		}
		f := r.Funnel["part@"+v1[:8]]
		if f == nil || f.ReplayedHealed != 4 || f.DeadLettered != 4 || f.Version != v1 {
			t.Errorf("--version all: funnel of v1 = %+v, want 4 dead letters replayed, healed", f)
		}
		if r.Totals.ReplayedHealed != 4 || r.Totals.Jobs != 8 {
			t.Errorf("totals %+v", r.Totals)
		}
		// one version by the prefix the tables show
		old, err := Build(t.Context(), st, Options{Version: v1[:4]})
		if err != nil {
			t.Fatal(err)
		}
		if want := map[string][]string{"part": {v1}}; !reflect.DeepEqual(old.Versions, want) || len(old.Clusters) != 1 || old.Clusters[0].ID != code(v1) {
			t.Errorf("--version %s covers %v with clusters %+v, want %v", v1[:4], old.Versions, old.Clusters, want)
		}
		var buf bytes.Buffer
		if err := r.Render(&buf, "table"); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(buf.String(), "every version (--version all)") || !strings.Contains(buf.String(), "4 replayed, healed") {
			t.Errorf("table does not name the scope and the replays:\n%s", buf.String())
		}
	})
	t.Run("same version", func(t *testing.T) {
		t.Parallel()
		st := openStore(t)
		replayLoop(t, st, v1, v1, 3)
		r, err := Build(t.Context(), st, Options{})
		if err != nil {
			t.Fatal(err)
		}
		// the 4th dead letter alone is counted: too few to flag, and the
		// replayed ones are not a streak
		c := find(r, code(v1))
		if c == nil || c.Impossible || c.Masked || c.ReplayedHealed != 3 || c.Jobs != 4 {
			t.Errorf("/code after 3 of 4 replays healed = %+v, want 3 replayed, healed and no flag", c)
		}
		for _, ex := range c.Examples {
			if ex != "p-3" {
				t.Errorf("example %s is a replayed, healed dead letter", ex)
			}
		}
	})
}

// TestFlaggedClustersNameTheirVersion: every flag section names the
// schema version, in every format.
func TestFlaggedClustersNameTheirVersion(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	replayLoop(t, st, "1111aaaa", "2222bbbb", 0)
	r, err := Build(t.Context(), st, Options{})
	if err != nil {
		t.Fatal(err)
	}
	for format, want := range map[string]string{
		"table":    "part@1111aaaa /code (pattern)\n  why:",
		"markdown": "(`pattern`, version `1111aaaa`,",
		"html":     `(pattern, version <code class="version">1111aaaa</code>,`,
	} {
		var buf bytes.Buffer
		if err := r.Render(&buf, format); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(buf.String(), want) {
			t.Errorf("%s: impossible field without its version (want %q):\n%s", format, want, buf.String())
		}
	}
}

// TestHeaderSaysWhatItCovers: every format opens with the index, the time
// range of the outcomes, when it was generated and the totals.
func TestHeaderSaysWhatItCovers(t *testing.T) {
	t.Parallel()
	st, specs := load(t)
	r, err := Build(t.Context(), st, Options{Now: clock})
	if err != nil {
		t.Fatal(err)
	}
	var js bytes.Buffer
	if err := r.Render(&js, "json"); err != nil {
		t.Fatal(err)
	}
	var doc struct {
		GeneratedAt time.Time `json:"generated_at"`
		Source      string    `json:"source"`
		Range       struct {
			From time.Time `json:"from"`
			To   time.Time `json:"to"`
		} `json:"range"`
		Totals struct {
			Jobs         int `json:"jobs"`
			Succeeded    int `json:"succeeded"`
			DeadLettered int `json:"dead_lettered"`
			Tokens       int `json:"tokens"`
		} `json:"totals"`
		ClustersTotal int               `json:"clusters_total"`
		Clusters      []json.RawMessage `json:"clusters"`
	}
	if err := json.Unmarshal(js.Bytes(), &doc); err != nil {
		t.Fatal(err)
	}
	var jobs, ok, dead, tokens int
	for i, s := range specs {
		o := s.outcome(i)
		jobs++
		if s.dead {
			dead++
		} else {
			ok++
		}
		for _, a := range o.Trace {
			tokens += a.PromptTokens + a.CompletionTokens
		}
	}
	last := at(len(specs) - 1)
	if !doc.GeneratedAt.Equal(generated) || doc.Source != st.Path() || !doc.Range.From.Equal(at(0)) || !doc.Range.To.Equal(last) {
		t.Errorf("header generated_at %v source %q range %v..%v, want %v %q %v..%v", doc.GeneratedAt, doc.Source, doc.Range.From, doc.Range.To,
			generated, st.Path(), at(0), last)
	}
	if doc.Totals.Jobs != jobs || doc.Totals.Succeeded != ok || doc.Totals.DeadLettered != dead || doc.Totals.Tokens != tokens {
		t.Errorf("totals %+v, want %d jobs %d ok %d dead %d tokens", doc.Totals, jobs, ok, dead, tokens)
	}
	if doc.ClustersTotal != len(doc.Clusters) || doc.ClustersTotal == 0 {
		t.Errorf("clusters_total %d beside %d clusters", doc.ClustersTotal, len(doc.Clusters))
	}
	totals := fmt.Sprintf("%d jobs, %d succeeded, %d dead-lettered, %d tokens", jobs, ok, dead, tokens)
	for _, format := range []string{"table", "markdown", "html"} {
		var buf bytes.Buffer
		if err := r.Render(&buf, format); err != nil {
			t.Fatal(err)
		}
		out := buf.String()
		head := out[:strings.Index(out, "Fingerprint v1")+1]
		if format == "table" {
			head = out[:strings.Index(out, "FAILURE CLUSTERS")]
		}
		for _, want := range []string{st.Path(), "2025-03-02 09:30:00 UTC", day(at(0)) + " .. " + day(last) + " UTC", totals, "latest of each schema"} {
			if !strings.Contains(head, want) {
				t.Errorf("%s header lacks %q:\n%s", format, want, head)
			}
		}
	}
}

// TestTopSaysHowMany: a report cut by Top says how many clusters there
// are in all, in every format.
func TestTopSaysHowMany(t *testing.T) {
	t.Parallel()
	st, _ := load(t)
	all, err := Build(t.Context(), st, Options{})
	if err != nil {
		t.Fatal(err)
	}
	n := len(all.Clusters)
	r, err := Build(t.Context(), st, Options{Top: 2})
	if err != nil {
		t.Fatal(err)
	}
	if r.ClustersTotal != n || len(r.Clusters) != 2 || all.ClustersTotal != n {
		t.Fatalf("Top 2: %d clusters of %d, want 2 of %d", len(r.Clusters), r.ClustersTotal, n)
	}
	want := fmt.Sprintf("2 of %d clusters (--top 0 for all)", n)
	for _, format := range []string{"table", "markdown", "html"} {
		var buf bytes.Buffer
		if err := r.Render(&buf, format); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(buf.String(), want) {
			t.Errorf("%s lacks %q", format, want)
		}
		buf.Reset()
		if err := all.Render(&buf, format); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(buf.String(), " of ") && strings.Contains(buf.String(), "--top 0 for all") {
			t.Errorf("%s of the whole report says it is cut", format)
		}
	}
	var js bytes.Buffer
	if err := r.Render(&js, "json"); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(js.Bytes(), []byte(fmt.Sprintf(`"clusters_total": %d`, n))) {
		t.Errorf("JSON lacks clusters_total %d", n)
	}
}

// TestNoSuccessNoTokensPerSuccess: a schema version with no success has no
// tokens per success (JSON null, "-" in the tables), never 0.
func TestNoSuccessNoTokensPerSuccess(t *testing.T) {
	t.Parallel()
	st := openStore(t)
	replayLoop(t, st, "1111aaaa", "2222bbbb", 0)
	r, err := Build(t.Context(), st, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if f := r.Funnel["part"]; f == nil || f.Succeeded != 0 || f.TokensPerSucceeded != nil {
		t.Fatalf("funnel %+v, want no success and no tokens per success", f)
	}
	var js bytes.Buffer
	if err := r.Render(&js, "json"); err != nil {
		t.Fatal(err)
	}
	if !bytes.Contains(js.Bytes(), []byte(`"tokens_per_succeeded": null`)) {
		t.Errorf("JSON tokens_per_succeeded is not null:\n%s", js.String())
	}
	// the tokens-per-success cell, just before the share of tokens on healing
	for format, want := range map[string]string{"table": "  -          65.6%", "markdown": "| - | 65.6% |", "html": `<td class="n">-</td><td class="n">65.6%</td>`} {
		var buf bytes.Buffer
		if err := r.Render(&buf, format); err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(buf.String(), want) {
			t.Errorf("%s funnel does not show - for tokens per success (want %q):\n%s", format, want, buf.String())
		}
	}
}
