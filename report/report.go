package report

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/llmpipeline/pipeline/index"
	"github.com/llmpipeline/pipeline/job"
	"github.com/llmpipeline/pipeline/report/cluster"
)

// Defaults of the empirical impossible-field rule.
const (
	DefaultMinJobs     = 3
	DefaultMaxHealRate = 0.10
	// Streak is how many consecutive dead letters on a fingerprint, with no
	// success in between, flag it whatever its heal rate.
	Streak = 3
	// Examples and Received bound the evidence kept per cluster.
	Examples = 3
	Received = 5
)

// Version selections of Options.Version besides a version hash.
const (
	// VersionLatest covers each schema's latest version: the version of
	// its most recent outcome in the selection (the default).
	VersionLatest = "latest"
	// VersionAll covers every version, each cluster and funnel row
	// labelled with its own.
	VersionAll = "all"
)

// Options select and tune a report. The zero value reports each schema's
// latest version with the default thresholds.
type Options struct {
	Schema string
	// Version is VersionLatest (also ""), VersionAll, or a version hash or
	// its prefix (the tables show 8 characters): the versions it starts.
	Version string
	Since   time.Time
	// Model limits the report to the jobs whose final answer came from
	// this model spec (the funnel and the clusters).
	Model string
	// MinJobs is the number of distinct job runs a fingerprint must fail in
	// before its heal rate can flag it (default DefaultMinJobs).
	MinJobs int
	// MaxHealRate flags a fingerprint both healed and fixed in at most this
	// share of the jobs where it failed (default DefaultMaxHealRate;
	// negative means 0).
	MaxHealRate float64
	// Lint holds the static schema findings, filled by the CLI.
	Lint []LintFinding
	// Top keeps the first Top clusters (0 keeps all); ClustersTotal says
	// how many there were.
	Top int
	// Source names the index in the header (default: the store's file).
	Source string
	// Now is the clock that stamps GeneratedAt (default time.Now).
	Now func() time.Time
}

func (o Options) withDefaults() Options {
	if o.MinJobs <= 0 {
		o.MinJobs = DefaultMinJobs
	}
	if o.MaxHealRate == 0 {
		o.MaxHealRate = DefaultMaxHealRate
	} else if o.MaxHealRate < 0 {
		o.MaxHealRate = 0
	}
	if o.Version == "" {
		o.Version = VersionLatest
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	return o
}

// LintFinding is one static finding on a schema (minimum > maximum, empty
// enum, a required property forbidden by additionalProperties: false, ...).
type LintFinding struct {
	Schema     string `json:"schema"`
	File       string `json:"file"`
	Path       string `json:"path"`
	Rule       string `json:"rule"`
	Message    string `json:"message"`
	Suggestion string `json:"suggestion"`
}

// Report is the failure report: clusters of failures by fingerprint, the
// heal funnel per schema and the lint findings. Its JSON form is documented
// in the package doc and stable.
type Report struct {
	// GeneratedAt is when Build ran (Options.Now).
	GeneratedAt time.Time `json:"generated_at"`
	// Source is the index file the report read (Options.Source).
	Source string `json:"source"`
	// Range spans the finish times of the outcomes covered; nil when none.
	Range *Range `json:"range"`
	// Totals count the outcomes covered.
	Totals Totals `json:"totals"`
	Filter Filter `json:"filter"`
	// Versions lists, per schema, the versions covered.
	Versions           map[string][]string `json:"versions"`
	FingerprintVersion int                 `json:"fingerprint_version"`
	Thresholds         Thresholds          `json:"thresholds"`
	// ClustersTotal counts the clusters of the selection; Clusters holds
	// the first Options.Top of them.
	ClustersTotal int                `json:"clusters_total"`
	Clusters      []Cluster          `json:"clusters"`
	Funnel        map[string]*Funnel `json:"funnel"`
	Lint          []LintFinding      `json:"lint"`
	// Evals is the latest stored eval of every schema version of the
	// selection's schemas that has one, covered or not (f1 over versions);
	// absent when there is none.
	Evals []*EvalFigures `json:"evals,omitempty"`
	// Conflicts count, per schema and field path, the long documents
	// whose chunks answered different values there (merge conflicts).
	Conflicts []index.ConflictCount `json:"conflicts,omitempty"`
}

// Range is a time span, both ends included.
type Range struct {
	From time.Time `json:"from"`
	To   time.Time `json:"to"`
}

// Totals count the job runs a report covers.
type Totals struct {
	Jobs         int `json:"jobs"`
	Succeeded    int `json:"succeeded"`
	DeadLettered int `json:"dead_lettered"`
	// ReplayedHealed counts the dead letters among DeadLettered whose job
	// succeeded on a later run (a replay).
	ReplayedHealed int `json:"replayed_healed"`
	// Tokens is every prompt and completion token of these runs.
	Tokens int `json:"tokens"`
	// CostUSD is their known cost in US dollars; nil when no price was known.
	CostUSD *float64 `json:"cost_usd"`
	// Batch is the attempts made through provider batches (batch mode)
	// and their cost, part of CostUSD.
	Batch Batch `json:"batch"`
}

// Batch counts attempts made through provider batches, priced with the
// model's batch discount.
type Batch struct {
	Attempts int     `json:"attempts"`
	CostUSD  float64 `json:"cost_usd"`
}

// Filter echoes the selection the report was built with.
type Filter struct {
	Schema string `json:"schema,omitempty"`
	// Version is "latest", "all" or a version hash.
	Version string     `json:"version"`
	Since   *time.Time `json:"since,omitempty"`
	// Model is the model of the final answer the report is limited to.
	Model string `json:"model,omitempty"`
}

// Thresholds echoes the impossible-field rule's parameters.
type Thresholds struct {
	MinJobs     int     `json:"min_jobs"`
	MaxHealRate float64 `json:"max_heal_rate"`
	Streak      int     `json:"streak"`
}

// Cluster is every failure with one fingerprint.
type Cluster struct {
	ID      string `json:"id"`
	Schema  string `json:"schema"`
	Version string `json:"version"`
	Path    string `json:"path"`
	Keyword string `json:"keyword"`
	// DeadLetters counts the dead-lettered job runs among Jobs.
	DeadLetters int `json:"dead_letters"`
	// Jobs counts the distinct job runs where the fingerprint failed at any attempt.
	Jobs int `json:"jobs"`
	// ReplayedHealed counts the dead letters among DeadLetters whose job
	// succeeded on a later run (a replay): they count toward no flag and
	// no rate.
	ReplayedHealed int `json:"replayed_healed"`
	// HealRate is the share of the counted runs (Jobs - ReplayedHealed)
	// that still succeeded.
	HealRate float64 `json:"heal_rate"`
	// Fixed counts the Jobs in which a later attempt no longer failed on
	// the fingerprint (index.ClusterCount.Fixed): every healed job, and dead
	// letters that died of other fields.
	Fixed int `json:"fixed"`
	// FixRate is the share of the counted runs in which the fingerprint
	// was fixed (replayed, healed ones left out); FixRate >= HealRate.
	FixRate    float64 `json:"fix_rate"`
	Impossible bool    `json:"impossible"`
	// Masked is set when the heal rate alone would flag the cluster but the
	// model did fix it: its jobs were dead-lettered for other fields.
	Masked     bool               `json:"masked"`
	Reason     string             `json:"reason"`
	Suggestion string             `json:"suggestion"`
	Examples   []string           `json:"examples"`
	Received   []index.ValueCount `json:"received"`
	FirstSeen  time.Time          `json:"first_seen"`
	LastSeen   time.Time          `json:"last_seen"`
}

// Funnel is what became of the jobs of one schema version.
type Funnel struct {
	Schema       string `json:"schema"`
	Version      string `json:"version"`
	Jobs         int    `json:"jobs"`
	Succeeded    int    `json:"succeeded"`
	DeadLettered int    `json:"dead_lettered"`
	// ReplayedHealed counts the dead letters among DeadLettered whose job
	// succeeded on a later run.
	ReplayedHealed int `json:"replayed_healed"`
	// FirstPass is the share of jobs valid at the first model call.
	FirstPass float64 `json:"first_pass"`
	// SucceededAt has one step per attempt count k: the jobs that succeeded
	// at their k-th call and their share of all jobs.
	SucceededAt []Step `json:"succeeded_at"`
	// DeadByClass shares the dead letters by failure class (of all jobs).
	DeadByClass []ClassShare `json:"dead_by_class"`
	// Tokens is every prompt and completion token of these jobs.
	Tokens int `json:"tokens"`
	// TokensPerSucceeded is the tokens of succeeded jobs per succeeded job;
	// nil (JSON null) when none succeeded.
	TokensPerSucceeded *float64 `json:"tokens_per_succeeded"`
	// HealTokenShare is the share of Tokens spent on attempts after the first.
	HealTokenShare float64 `json:"heal_token_share"`
	// CostUSD is the known cost of these jobs in US dollars, every attempt
	// of every job (failed attempts and dead letters too); nil (JSON null)
	// when no model's price was known. See cost.go for the rest.
	CostUSD          *float64 `json:"cost_usd"`
	CostPerSucceeded *float64 `json:"cost_per_succeeded"`
	HealCostShare    float64  `json:"heal_cost_share"`
	HealedByFallback int      `json:"healed_by_fallback"`
	// Batch is the attempts of these jobs made through provider batches.
	Batch Batch `json:"batch"`
	// Models splits the jobs by the model of their final answer.
	Models []ModelShare `json:"models"`
	// Eval is the latest stored eval of this schema version (`pipeline
	// eval`); absent when there is none.
	Eval *EvalFigures `json:"eval,omitempty"`
}

// Step is the jobs that succeeded at one attempt count.
type Step struct {
	Attempt int     `json:"attempt"`
	Jobs    int     `json:"jobs"`
	Share   float64 `json:"share"`
}

// ClassShare is the dead letters of one failure class.
type ClassShare struct {
	Class job.Class `json:"class"`
	Jobs  int       `json:"jobs"`
	Share float64   `json:"share"`
}

// Build computes the report from the store's aggregates; it only reads.
func Build(ctx context.Context, s *index.Store, o Options) (*Report, error) {
	o = o.withDefaults()
	// The versions are chosen from the funnel rows below; the reads by
	// cluster are by id, which holds the version.
	f := index.Filter{Schema: o.Schema, Since: o.Since, Model: o.Model}
	r := &Report{
		GeneratedAt:        o.Now().UTC(),
		Source:             o.Source,
		Filter:             Filter{Schema: o.Schema, Version: o.Version, Model: o.Model},
		Versions:           map[string][]string{},
		FingerprintVersion: cluster.FingerprintVersion,
		Thresholds:         Thresholds{MinJobs: o.MinJobs, MaxHealRate: o.MaxHealRate, Streak: Streak},
		Clusters:           []Cluster{},
		Funnel:             map[string]*Funnel{},
		Lint:               []LintFinding{},
	}
	if r.Source == "" {
		r.Source = s.Path()
	}
	if !o.Since.IsZero() {
		since := o.Since.UTC()
		r.Filter.Since = &since
	}
	for _, l := range o.Lint {
		if o.Schema == "" || l.Schema == o.Schema {
			r.Lint = append(r.Lint, l)
		}
	}

	// The funnel rows say which versions the report covers; the cluster
	// counts do not depend on them (they are kept by version below), so
	// the two scans, the report's longest, run at once on two of the
	// store's read connections.
	var (
		wg                sync.WaitGroup
		rows              []index.FunnelRow
		all               []index.ClusterCount
		funnelErr, cntErr error
	)
	an := s.Analytics()
	conflicts, err := s.ConflictCounts(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("building the report: %w", err)
	}
	r.Conflicts = conflicts
	wg.Go(func() { all, cntErr = an.ClusterCounts(ctx, f) })
	rows, funnelErr = an.Funnel(ctx, f)
	wg.Wait()
	if err := errors.Join(funnelErr, cntErr); err != nil {
		return nil, fmt.Errorf("building the report: %w", err)
	}
	switch o.Version {
	case VersionLatest:
		rows = latestOnly(rows)
	case VersionAll:
	default:
		kept := rows[:0]
		for _, row := range rows {
			if strings.HasPrefix(row.Version, o.Version) {
				kept = append(kept, row)
			}
		}
		rows = kept
	}
	covered := map[[2]string]bool{}
	for _, row := range rows {
		covered[[2]string{row.Schema, row.Version}] = true
	}
	healed, err := an.ReplayHealed(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("building the report: %w", err)
	}
	r.Funnel = funnel(rows, healed)
	r.cover(rows)
	if r.Evals, err = Evals(ctx, s, o.Schema); err != nil {
		return nil, fmt.Errorf("building the report: %w", err)
	}
	attachEvals(r.Funnel, r.Evals)
	if len(r.Evals) == 0 {
		r.Evals = nil
	}

	counts := all[:0]
	for _, c := range all {
		if covered[[2]string{c.Schema, c.Version}] {
			counts = append(counts, c)
		}
	}
	// The fingerprints that kill jobs first: counted dead letters where
	// the field was still failing at the end, then counted dead letters,
	// then jobs.
	sort.Slice(counts, func(i, j int) bool {
		a, b := counted(counts[i]), counted(counts[j])
		if sa, sb := a.DeadLetters-a.DeadFixed, b.DeadLetters-b.DeadFixed; sa != sb {
			return sa > sb
		}
		if a.DeadLetters != b.DeadLetters {
			return a.DeadLetters > b.DeadLetters
		}
		if a.Jobs != b.Jobs {
			return a.Jobs > b.Jobs
		}
		if a.Schema != b.Schema {
			return a.Schema < b.Schema
		}
		if a.Version != b.Version {
			return a.Version < b.Version
		}
		if a.Path != b.Path {
			return a.Path < b.Path
		}
		return a.Keyword < b.Keyword
	})
	r.ClustersTotal = len(counts)
	if o.Top > 0 && len(counts) > o.Top {
		counts = counts[:o.Top]
	}
	for _, c := range counts {
		cl, err := buildCluster(ctx, an, f, o, c)
		if err != nil {
			return nil, fmt.Errorf("building the report: %w", err)
		}
		r.Clusters = append(r.Clusters, cl)
	}
	return r, nil
}

// latestOnly keeps the funnel rows of each schema's latest version: the
// version of its most recent outcome (ties to the greater version, so the
// choice is stable).
func latestOnly(rows []index.FunnelRow) []index.FunnelRow {
	type when struct {
		version string
		last    time.Time
	}
	latest := map[string]when{}
	for _, row := range rows {
		w, ok := latest[row.Schema]
		if !ok || row.Last.After(w.last) || row.Last.Equal(w.last) && row.Version > w.version {
			latest[row.Schema] = when{row.Version, row.Last}
		}
	}
	out := rows[:0]
	for _, row := range rows {
		if latest[row.Schema].version == row.Version {
			out = append(out, row)
		}
	}
	return out
}

// cover fills the header: the versions covered, the time range and the
// totals of the funnel rows.
func (r *Report) cover(rows []index.FunnelRow) {
	seen := map[[2]string]bool{}
	for _, row := range rows {
		if k := [2]string{row.Schema, row.Version}; !seen[k] {
			seen[k] = true
			r.Versions[row.Schema] = append(r.Versions[row.Schema], row.Version)
		}
		if r.Range == nil {
			r.Range = &Range{From: row.First, To: row.Last}
		}
		if row.First.Before(r.Range.From) {
			r.Range.From = row.First
		}
		if row.Last.After(r.Range.To) {
			r.Range.To = row.Last
		}
	}
	for _, vs := range r.Versions {
		sort.Strings(vs)
	}
	for _, fu := range r.Funnel {
		r.Totals.Jobs += fu.Jobs
		r.Totals.Succeeded += fu.Succeeded
		r.Totals.DeadLettered += fu.DeadLettered
		r.Totals.ReplayedHealed += fu.ReplayedHealed
		r.Totals.Tokens += fu.Tokens
		r.Totals.Batch.Attempts += fu.Batch.Attempts
		r.Totals.Batch.CostUSD += fu.Batch.CostUSD
		if fu.CostUSD != nil {
			c := *fu.CostUSD
			if r.Totals.CostUSD != nil {
				c += *r.Totals.CostUSD
			}
			r.Totals.CostUSD = &c
		}
	}
}

// counted is a cluster's counts without its replayed, healed dead letters:
// the runs that count toward its flag and rates.
func counted(c index.ClusterCount) index.ClusterCount {
	c.Jobs -= c.Replayed
	c.DeadLetters -= c.Replayed
	c.Fixed -= c.ReplayedFixed
	c.DeadFixed -= c.ReplayedFixed
	c.Replayed, c.ReplayedFixed = 0, 0
	return c
}

func buildCluster(ctx context.Context, a *index.Analytics, f index.Filter, o Options, c index.ClusterCount) (Cluster, error) {
	cl := Cluster{
		ID: c.ID, Schema: c.Schema, Version: c.Version, Path: c.Path, Keyword: c.Keyword,
		DeadLetters: c.DeadLetters, Jobs: c.Jobs, ReplayedHealed: c.Replayed, Fixed: c.Fixed,
		FirstSeen: c.FirstSeen, LastSeen: c.LastSeen,
	}
	// Replayed, healed dead letters count toward no rate and no flag.
	c = counted(c)
	cl.HealRate = ratio(c.Jobs-c.DeadLetters, c.Jobs)
	cl.FixRate = ratio(c.Fixed, c.Jobs)
	var err error
	if cl.Examples, err = a.ClusterExamples(ctx, c.ID, f, Examples); err != nil {
		return Cluster{}, err
	}
	if cl.Received, err = a.ClusterReceived(ctx, c.ID, f, Received); err != nil {
		return Cluster{}, err
	}
	if cl.Examples == nil {
		cl.Examples = []string{}
	}
	if cl.Received == nil {
		cl.Received = []index.ValueCount{}
	}

	// The heal rate alone blames a field for jobs that died of another
	// one; the fix rate says whether the model satisfied the field itself.
	healed := c.Jobs - c.DeadLetters
	lowHeal := c.Jobs >= o.MinJobs && cl.HealRate <= o.MaxHealRate
	var ends []index.RunEnd
	if c.DeadLetters >= Streak {
		if ends, err = a.ClusterRecentEnds(ctx, c.ID, f, Streak); err != nil {
			return Cluster{}, err
		}
	}
	deadStreak := len(ends) == Streak && all(ends, func(e index.RunEnd) bool { return e.Dead })
	stuckStreak := len(ends) == Streak && all(ends, func(e index.RunEnd) bool { return e.Dead && !e.Fixed })
	switch {
	case lowHeal && cl.FixRate <= o.MaxHealRate:
		cl.Impossible = true
		cl.Reason = fmt.Sprintf("failed in %d jobs, healed in %d (%s), fixed in %d (%s), at or below %s",
			c.Jobs, healed, pct(cl.HealRate), c.Fixed, pct(cl.FixRate), pct(o.MaxHealRate))
	case stuckStreak:
		cl.Impossible = true
		cl.Reason = fmt.Sprintf("the last %d jobs that failed here were dead-lettered with it still failing, none healed or fixed in between (%d of %d healed, %d fixed before)",
			Streak, healed, c.Jobs, c.Fixed)
	case lowHeal || deadStreak:
		cl.Masked = true
		blockers, err := a.ClusterBlockers(ctx, c.ID, f, 1)
		if err != nil {
			return Cluster{}, err
		}
		cl.Reason = fmt.Sprintf("masked: fixed in %s of its jobs (%d of %d), which were dead-lettered for other fields", pct(cl.FixRate), c.Fixed, c.Jobs)
		cl.Suggestion = "not this field: fix what kills these jobs first"
		if len(blockers) > 0 {
			b := blockers[0]
			name := path(b.Path) + " (" + b.Keyword + ")"
			if b.Schema != c.Schema || b.Version != c.Version {
				name = b.Schema + "@" + short(b.Version) + " " + name
			}
			cl.Reason += fmt.Sprintf(", most often %s in %d", name, b.Runs)
			cl.Suggestion = fmt.Sprintf("not this field: %s kills these jobs, fix it first", name)
		}
	}
	if cl.Impossible {
		cl.Suggestion = suggest(cl)
	}
	if cl.ReplayedHealed > 0 && (cl.Impossible || cl.Masked) {
		cl.Reason += fmt.Sprintf("; %s replayed, healed, not counted", plural(cl.ReplayedHealed, "more dead letter"))
	}
	return cl, nil
}

func all[T any](xs []T, ok func(T) bool) bool {
	for _, x := range xs {
		if !ok(x) {
			return false
		}
	}
	return true
}

// suggest is the one-line advice for an impossible field, by keyword.
func suggest(c Cluster) string {
	field := c.Path
	if field == "" {
		field = "the root"
	}
	seen := "nothing"
	if len(c.Received) > 0 {
		seen = c.Received[0].Value
		if len(c.Received) > 1 {
			seen += ", " + c.Received[1].Value
		}
	}
	switch c.Keyword {
	case "required":
		return fmt.Sprintf("%s is missing in most outputs: make it optional, or say in the instructions where the input holds it", field)
	case "type":
		return fmt.Sprintf("models send %s at %s: accept that type (or coerce it before validation), or state the type in the field's description", seen, field)
	case "enum", "const":
		return fmt.Sprintf("models answer %s at %s: add the value to the enum (or normalise it), or list the allowed values in the description", seen, field)
	case "pattern", "format":
		return fmt.Sprintf("values like %s at %s do not match: relax the %s or show an example in the description", seen, field, c.Keyword)
	case "minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum", "multipleOf":
		return fmt.Sprintf("values like %s at %s break the %s bound: check the bound against real inputs", seen, field, c.Keyword)
	case "minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties", "uniqueItems":
		return fmt.Sprintf("%s at %s is not met (received %s): relax it or explain it in the description", c.Keyword, field, seen)
	case "additionalProperties", "unevaluatedProperties":
		return fmt.Sprintf("models add %s: allow the property or name it in the schema", field)
	case "x-grounded":
		return fmt.Sprintf("models answer %s at %s, which the inputs do not hold: make the field nullable if inputs may lack it, or drop x-grounded if the value is derived (a total, a normalised code)", seen, field)
	default:
		if strings.HasPrefix(c.Keyword, "x-rules/") {
			return fmt.Sprintf("the rule %s at %s never holds (received %s): check it against real inputs (pipeline validate --input), or explain it in the description", c.Keyword, field, seen)
		}
		return fmt.Sprintf("no attempt satisfied %s at %s: review that part of the schema and the instructions", c.Keyword, field)
	}
}

// plural is n and the noun, with an s unless n is 1.
func plural(n int, noun string) string {
	if n == 1 {
		return "1 " + noun
	}
	return fmt.Sprintf("%d %ss", n, noun)
}

func ratio(a, b int) float64 {
	if b == 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func pct(f float64) string {
	s := fmt.Sprintf("%.1f", f*100)
	return strings.TrimSuffix(s, ".0") + "%"
}

// Schemas returns the funnel's keys (schema ids, or schema@version when a
// schema has several versions in the selection), sorted.
func (r *Report) Schemas() []string {
	out := make([]string, 0, len(r.Funnel))
	for s := range r.Funnel {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// Masked returns the clusters the heal rate alone would have flagged but
// the model fixed: their jobs died of other fields.
func (r *Report) Masked() []Cluster {
	var out []Cluster
	for _, c := range r.Clusters {
		if c.Masked {
			out = append(out, c)
		}
	}
	return out
}

// Impossible returns the flagged clusters.
func (r *Report) Impossible() []Cluster {
	var out []Cluster
	for _, c := range r.Clusters {
		if c.Impossible {
			out = append(out, c)
		}
	}
	return out
}
