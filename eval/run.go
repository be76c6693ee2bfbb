package eval

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/llmpipeline/pipeline/index"
)

// Store is what an eval reads: each job's latest run (index.Store).
type Store interface {
	LatestRuns(ctx context.Context, ids []string, fn func(index.LatestRun) error) error
}

var _ Store = (*index.Store)(nil)

// The groupings of Options.By.
const (
	ByModel   = "model"
	ByVersion = "version"
)

// NoOutcome is the model and version key of labelled ids the index has no
// run of, in Result.By.
const NoOutcome = "(no outcome)"

// NoValue is the key, in Result.By, of records whose latest run has no
// model (a dead letter before any answer) or no version (a run superseded
// by one the index no longer holds).
const NoValue = "(none)"

// Options are the knobs of one eval; the zero value scores every labelled
// record, ungrouped, listing no mismatch.
type Options struct {
	// Schema keeps only the records whose latest run is of this schema
	// (and the labelled ids with no run at all, which count as no result).
	Schema string
	// By adds figures per model (of the final answer) or per schema
	// version: ByModel or ByVersion.
	By string
	// ShowErrors keeps up to that many wrong and missing values.
	ShowErrors int
	// Batch is how many labelled ids are looked up at a time (default 512).
	Batch int
}

func (o Options) withDefaults() Options {
	if o.Batch <= 0 {
		o.Batch = 512
	}
	return o
}

func (o Options) validate() error {
	switch o.By {
	case "", ByModel, ByVersion:
	default:
		return fmt.Errorf("eval: by %q: want %q or %q", o.By, ByModel, ByVersion)
	}
	if o.ShowErrors < 0 {
		return fmt.Errorf("eval: show-errors %d: want 0 or more", o.ShowErrors)
	}
	return nil
}

// Summary is the figures of a set of records.
type Summary struct {
	Records    int `json:"records"`
	WithResult int `json:"with_result"`
	NoResult   int `json:"no_result"`
	// NotIndexed counts the labelled ids the index has no run of (part of
	// NoResult): a typo in the file, or jobs not run yet.
	NotIndexed int              `json:"not_indexed"`
	Exact      int              `json:"exact"`
	Overall    Score            `json:"overall"`
	Fields     map[string]Score `json:"fields"`
}

// Result is one eval: the summary, the figures per model or version when
// asked, the mismatches kept, and the groups (schema, version, model) that
// are stored in the index.
type Result struct {
	Summary
	By     map[string]*Summary `json:"by,omitempty"`
	Errors []Mismatch          `json:"errors,omitempty"`

	File   string            `json:"-"`
	Digest string            `json:"-"`
	At     time.Time         `json:"-"`
	Groups []index.EvalGroup `json:"-"`
}

// Stored is r as the index keeps it.
func (r *Result) Stored() index.Eval {
	return index.Eval{At: r.At, File: r.File, Digest: r.Digest, Groups: r.Groups}
}

// ErrNoData is returned for a result whose data the index does not hold.
var ErrNoData = errors.New("the index holds this result without its data (indexed by a binary older than index migration 9): run `pipeline dlq rebuild` to index the streams again, data included")

// groupKey is one group of records: the schema, version and model of
// their latest run; noRun is set for labelled ids with no run at all.
type groupKey struct {
	schema, version, model string
	noRun                  bool
}

type tally struct {
	records, withResult, noResult, notIndexed, exact int
	total                                            Counts
	fields                                           map[string]*Counts
}

// Run scores the labelled file at path against the latest run of each of
// its jobs in st. The file is read twice: once to check every line (a line
// that is not a label is a *LineError and nothing is scored), then to score
// it a batch of ids at a time, so memory does not grow with the file but
// for the set of its ids.
func Run(ctx context.Context, st Store, path string, opt Options) (*Result, error) {
	opt = opt.withDefaults()
	if err := opt.validate(); err != nil {
		return nil, err
	}
	digest, _, err := check(path)
	if err != nil {
		return nil, err
	}
	s := &scorer{opt: opt, cmp: newComparer(), dec: newDecoder(), groups: map[groupKey]*tally{}}
	s.cmp.keep = opt.ShowErrors > 0
	// Two stages, one goroutine each, a few batches apart: reading and
	// decoding the labels and the produced data (and the index's lookups),
	// then comparing. Memory holds at most cap(batches)+2 batches.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	batches := make(chan *batch, 2)
	read := make(chan error, 1)
	go func() {
		defer close(batches)
		read <- readBatches(ctx, st, path, opt.Batch, batches)
	}()
	var scoreErr error
	for b := range batches {
		if scoreErr != nil {
			continue // drain: the reader stops at ctx
		}
		for _, l := range b.labels {
			if err := s.score(l, b.runs[l.id]); err != nil {
				scoreErr = err
				cancel()
				break
			}
		}
	}
	if err := errors.Join(<-read, scoreErr); err != nil {
		return nil, err
	}
	return s.result(path, digest), nil
}

// batch is labels and the latest runs of their jobs, decoded.
type batch struct {
	labels []label
	runs   map[string]*found
}

type found struct {
	run index.LatestRun
	raw []byte // the data, decoded by the scorer
}

// readBatches reads the checked file at path, size labels at a time, looks
// their jobs' latest runs up in st and sends each batch to out.
func readBatches(ctx context.Context, st Store, path string, size int, out chan<- *batch) error {
	dec := newDecoder()
	b := &batch{}
	ids := make([]string, 0, size)
	send := func() error {
		if len(b.labels) == 0 {
			return nil
		}
		ids = ids[:0]
		for _, l := range b.labels {
			ids = append(ids, l.id)
		}
		b.runs = make(map[string]*found, len(b.labels))
		err := st.LatestRuns(ctx, ids, func(r index.LatestRun) error {
			if r.NoData {
				return fmt.Errorf("job %q: %w", r.JobID, ErrNoData)
			}
			f := &found{run: r}
			if r.Data != nil {
				f.raw = append([]byte(nil), r.Data...) // the driver's buffer
				f.run.Data = nil
			}
			b.runs[r.JobID] = f
			return nil
		})
		if err != nil {
			return fmt.Errorf("joining labels with outcomes: %w", err)
		}
		select {
		case out <- b:
		case <-ctx.Done():
			return ctx.Err()
		}
		b = &batch{labels: make([]label, 0, size)}
		return nil
	}
	err := lines(path, nil, func(n int, line []byte) error {
		// checked: one decode gives the id and the expected tree
		v, err := dec.decode(line)
		m, _ := v.(object)
		var id string
		var exp object
		if i := m.index("id", nil); i >= 0 {
			id, _ = m[i].val.(string)
		}
		if i := m.index("expected", nil); i >= 0 {
			exp, _ = m[i].val.(object)
		}
		if err != nil || id == "" || exp == nil {
			return &LineError{File: path, Line: n, Msg: "the file changed while it was read; run the eval again"}
		}
		b.labels = append(b.labels, label{line: n, id: id, tree: exp})
		if len(b.labels) == size {
			return send()
		}
		return nil
	})
	if err != nil {
		return err
	}
	return send()
}

type scorer struct {
	opt    Options
	cmp    *comparer
	dec    *decoder
	groups map[groupKey]*tally
	errs   []Mismatch
}

// score adds one label, joined with its job's latest run (nil: none).
func (s *scorer) score(l label, f *found) error {
	exp := l.tree
	if f != nil && s.opt.Schema != "" && f.run.Schema != s.opt.Schema {
		return nil
	}
	var produced any
	if f != nil && f.raw != nil {
		v, err := s.dec.decode(f.raw)
		if err != nil {
			return fmt.Errorf("job %q: its data in the index is not JSON: %w", l.id, err)
		}
		produced = v
	}
	var key groupKey
	switch {
	case f != nil && f.run.Superseded && !f.run.Dead:
		// a later run, not in the index, superseded this result: its
		// version and model are not known. (A dead letter marked replayed
		// stays in its group: a dlq replay in flight marks it so, and it
		// counts as no result either way.)
		key.schema = f.run.Schema
	case f != nil:
		key = groupKey{schema: f.run.Schema, version: f.run.Version, model: f.run.Model}
	default:
		key = groupKey{schema: s.opt.Schema, noRun: true}
	}
	t := s.groups[key]
	if t == nil {
		t = &tally{fields: map[string]*Counts{}}
		s.groups[key] = t
	}
	t.records++
	var rec Counts
	s.cmp.mism = s.cmp.mism[:0]
	if f == nil || f.run.Dead || f.run.Superseded {
		t.noResult++
		if f == nil {
			t.notIndexed++
		}
		rec = s.cmp.record(t.fields, exp, nil)
	} else {
		t.withResult++
		rec = s.cmp.record(t.fields, exp, produced)
		if rec.Wrong == 0 && rec.Missing == 0 && rec.Extra == 0 {
			t.exact++
		}
	}
	add(&t.total, rec)
	for _, m := range s.cmp.mism {
		if len(s.errs) == s.opt.ShowErrors {
			break
		}
		m.JobID = l.id
		s.errs = append(s.errs, m)
	}
	return nil
}

func (s *scorer) result(file, digest string) *Result {
	r := &Result{File: file, Digest: digest, At: time.Now().UTC(), Errors: s.errs}
	keys := make([]groupKey, 0, len(s.groups))
	for k := range s.groups {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b groupKey) int {
		if c := cmp.Compare(a.schema, b.schema); c != 0 {
			return c
		}
		if c := cmp.Compare(a.version, b.version); c != 0 {
			return c
		}
		if c := cmp.Compare(a.model, b.model); c != 0 || a.noRun == b.noRun {
			return c
		}
		if a.noRun { // ids with no run after the runs of the same key
			return 1
		}
		return -1
	})
	all := &tally{fields: map[string]*Counts{}}
	by := map[string]*tally{}
	for _, k := range keys {
		t := s.groups[k]
		merge(all, t)
		if s.opt.By != "" {
			name := k.model
			if s.opt.By == ByVersion {
				name = k.version
			}
			switch {
			case k.noRun:
				name = NoOutcome
			case name == "":
				name = NoValue
			}
			if by[name] == nil {
				by[name] = &tally{fields: map[string]*Counts{}}
			}
			merge(by[name], t)
		}
		g := index.EvalGroup{Schema: k.schema, Version: k.version, Model: k.model, Records: t.records,
			WithResult: t.withResult, NoResult: t.noResult, Exact: t.exact, EvalCounts: t.total,
			Fields: make(map[string]Counts, len(t.fields))}
		for p, c := range t.fields {
			g.Fields[p] = *c
		}
		r.Groups = append(r.Groups, g)
	}
	r.Summary = all.summary()
	if s.opt.By != "" {
		r.By = make(map[string]*Summary, len(by))
		for k, t := range by {
			sum := t.summary()
			r.By[k] = &sum
		}
	}
	return r
}

func merge(dst, src *tally) {
	dst.records += src.records
	dst.withResult += src.withResult
	dst.noResult += src.noResult
	dst.notIndexed += src.notIndexed
	dst.exact += src.exact
	add(&dst.total, src.total)
	for p, c := range src.fields {
		d := dst.fields[p]
		if d == nil {
			d = &Counts{}
			dst.fields[p] = d
		}
		add(d, *c)
	}
}

func (t *tally) summary() Summary {
	s := Summary{Records: t.records, WithResult: t.withResult, NoResult: t.noResult, NotIndexed: t.notIndexed,
		Exact: t.exact, Overall: Of(t.total), Fields: make(map[string]Score, len(t.fields))}
	for p, c := range t.fields {
		s.Fields[p] = Of(*c)
	}
	return s
}
