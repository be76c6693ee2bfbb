package ui

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"sort"
	"sync"
	"time"

	"github.com/llmpipeline/pipeline/index"
	"github.com/llmpipeline/pipeline/internal/queue"
	"github.com/llmpipeline/pipeline/job"
	"github.com/llmpipeline/pipeline/report"
)

// Overview is the overview page's figures; /api/overview serves it as JSON.
//
// One definition everywhere: a job is a job id; a run is one outcome of a
// job (a replay makes a new run, the old one stays, superseded). Jobs,
// Succeeded, DeadLettered, AwaitingReplay and ByClass count jobs by their
// latest run; Runs, Tokens, Cost, PerMinute and the funnel count every run
// (what was tried and paid for stays, whatever replays follow).
type Overview struct {
	// Jobs counts the job ids in the index: Succeeded + DeadLettered +
	// AwaitingReplay.
	Jobs         int `json:"jobs"`
	Succeeded    int `json:"succeeded"`
	DeadLettered int `json:"dead_lettered"`
	// AwaitingReplay counts the jobs replayed whose new run has not ended
	// yet (a `pipeline run` must pick them up).
	AwaitingReplay int `json:"awaiting_replay"`
	// ByClass counts the dead-lettered jobs by failure class.
	ByClass map[job.Class]int `json:"by_class"`
	// Runs counts every run indexed, superseded ones included.
	Runs int `json:"runs"`
	// Tokens is every prompt and completion token of every run.
	Tokens int `json:"tokens"`
	// Pending and InFlight come from the JOBS stream; nil when the console
	// has no NATS connection or the stream could not be read.
	Pending  *uint64 `json:"pending"`
	InFlight *int    `json:"in_flight"`
	// PerMinute is the runs that ended in the last minute.
	PerMinute int `json:"per_minute"`
	// Cost is the model spend of every run in US dollars; nil, and not
	// shown, when no model's price is known.
	Cost *float64 `json:"cost"`
	// Breaker is the state of this process's model circuit breaker, ""
	// when no workers run in this process.
	Breaker string `json:"breaker"`
	// Funnel has one row per schema version, sorted by schema then version:
	// every run of its jobs.
	Funnel []*report.Funnel `json:"funnel"`
	// Error names what could not be read (the NATS connection's counts).
	Error string    `json:"error,omitempty"`
	At    time.Time `json:"at"`
}

// overviewCache keeps the overview's figures: pages and tabs are served
// from it. They are read again at most once a second, and no more often
// than every ten times the last read took (up to a minute), so over a
// large index the console costs at most a tenth of a core however many
// tabs refresh. A read runs in the background while the figures it
// replaces are served; the console's own actions drop them at once.
type overviewCache struct {
	mu    sync.Mutex
	o     Overview
	ok    bool
	read  time.Time     // when the figures were read (wall clock)
	took  time.Duration // how long that took
	busy  bool          // a read is under way
	gen   int           // bumped by invalidate: a read begun before is dropped
	build sync.Mutex    // one first read at a time
}

const (
	overviewEvery = time.Second
	overviewMax   = time.Minute
)

func (c *overviewCache) stale() bool {
	every := min(max(overviewEvery, 10*c.took), overviewMax)
	return time.Since(c.read) >= every
}

// invalidate makes the next request read the figures again (after an
// action changed them).
func (c *overviewCache) invalidate() {
	c.mu.Lock()
	c.ok = false
	c.gen++
	c.mu.Unlock()
}

// currentOverview returns the cached figures, starting a background read
// when they are stale; the first request (or the first after an action)
// reads them itself.
func (s *Server) currentOverview(ctx context.Context) (Overview, error) {
	c := &s.overview
	c.mu.Lock()
	if c.ok {
		o := c.o
		if !c.busy && c.stale() {
			c.busy = true
			go s.refresh(c.gen)
		}
		c.mu.Unlock()
		return s.live(o), nil
	}
	c.mu.Unlock()
	c.build.Lock()
	defer c.build.Unlock()
	c.mu.Lock()
	if c.ok { // another request read them meanwhile
		o := c.o
		c.mu.Unlock()
		return s.live(o), nil
	}
	gen := c.gen
	c.mu.Unlock()
	start := time.Now()
	o, err := s.buildOverview(ctx)
	if err != nil {
		return Overview{}, err
	}
	s.store(o, start, gen)
	return s.live(o), nil
}

func (s *Server) refresh(gen int) {
	ctx, cancel := context.WithTimeout(context.Background(), overviewMax)
	defer cancel()
	start := time.Now()
	o, err := s.buildOverview(ctx)
	if err != nil {
		s.cfg.Logger.Warn("console: reading the overview", "err", err)
		s.overview.mu.Lock()
		s.overview.busy, s.overview.read = false, time.Now() // try again later
		s.overview.mu.Unlock()
		return
	}
	s.store(o, start, gen)
}

func (s *Server) store(o Overview, start time.Time, gen int) {
	c := &s.overview
	c.mu.Lock()
	defer c.mu.Unlock()
	c.busy = false
	if gen != c.gen {
		return // an action changed the figures since this read began
	}
	c.o, c.ok, c.read, c.took = o, true, time.Now(), time.Since(start)
}

// live adds what is read at each request: the breaker of this process.
func (s *Server) live(o Overview) Overview {
	if s.cfg.Breaker != nil {
		o.Breaker = s.cfg.Breaker()
	}
	return o
}

func (s *Server) buildOverview(ctx context.Context) (Overview, error) {
	now := s.cfg.Now()
	jc, err := s.cfg.Store.Analytics().JobCounts(ctx)
	if err != nil {
		return Overview{}, err
	}
	funnels, totals, err := report.Funnels(ctx, s.cfg.Store)
	if err != nil {
		return Overview{}, err
	}
	o := Overview{
		Jobs: jc.Jobs, AwaitingReplay: jc.AwaitingReplay, ByClass: map[job.Class]int{},
		Runs: totals.Jobs, Tokens: totals.Tokens, Cost: totals.CostUSD, At: now.UTC(),
	}
	// jobs by their latest run: every dead-letter run but the replayed ones
	for _, f := range funnels {
		for _, c := range f.DeadByClass {
			o.ByClass[c.Class] += c.Jobs
		}
	}
	for class, n := range jc.ReplayedDead {
		if class == "" {
			class = "unknown" // as the funnel names it
		}
		if o.ByClass[class] -= n; o.ByClass[class] <= 0 {
			delete(o.ByClass, class)
		}
	}
	for _, n := range o.ByClass {
		o.DeadLettered += n
	}
	o.Succeeded = o.Jobs - o.DeadLettered - o.AwaitingReplay
	recent, err := s.cfg.Store.Analytics().Funnel(ctx, index.Filter{Since: now.Add(-time.Minute)})
	if err != nil {
		return Overview{}, err
	}
	for _, r := range recent {
		o.PerMinute += r.Jobs
	}
	if s.cfg.Conn != nil {
		if p, err := queue.Pending(ctx, s.cfg.Conn); err != nil {
			o.Error = "pending jobs unknown: " + err.Error()
		} else {
			o.Pending, o.InFlight = &p.Pending, &p.AckPending
		}
	}
	for _, f := range funnels {
		o.Funnel = append(o.Funnel, f)
	}
	sort.Slice(o.Funnel, func(i, j int) bool {
		if o.Funnel[i].Schema != o.Funnel[j].Schema {
			return o.Funnel[i].Schema < o.Funnel[j].Schema
		}
		return o.Funnel[i].Version < o.Funnel[j].Version
	})
	return o, nil
}

func (s *Server) overviewPage(w http.ResponseWriter, r *http.Request) {
	o, err := s.currentOverview(r.Context())
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	s.render(w, r, http.StatusOK, "overview", page{Title: "Overview", Nav: "overview", Refresh: true, Data: o})
}

// overviewLive serves the overview's figures alone (the "figures" block
// of the page), which the page's script swaps in every few seconds: every
// figure refreshes, formatted as the page formats it.
func (s *Server) overviewLive(w http.ResponseWriter, r *http.Request) {
	o, err := s.currentOverview(r.Context())
	if err != nil {
		http.Error(w, s.cfg.Secrets.String(err.Error()), http.StatusInternalServerError)
		return
	}
	s.renderBlock(w, r, "overview", "figures", page{Title: "Overview", Nav: "overview", Data: o})
}

func (s *Server) overviewJSON(w http.ResponseWriter, r *http.Request) {
	o, err := s.currentOverview(r.Context())
	if err != nil {
		http.Error(w, s.cfg.Secrets.String(err.Error()), http.StatusInternalServerError)
		return
	}
	b, err := json.Marshal(o)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_, _ = w.Write(s.cfg.Secrets.Bytes(b)) // a client gone away is no error of ours
}

// segments stacks a funnel row for its bar: successes by attempt, then dead
// letters by class, each as a share of the row's runs.
func segments(f *report.Funnel) []segment {
	var out []segment
	x := 0.0
	add := func(class, label string, n int) {
		if f.Jobs == 0 || n == 0 {
			return
		}
		w := float64(n) * 100 / float64(f.Jobs)
		out = append(out, segment{Class: class, Label: label, X: x, W: w})
		x += w
	}
	for _, s := range f.SucceededAt {
		class := "att1"
		if s.Attempt > 1 {
			class = "att2"
		}
		add(class, fmt.Sprintf("succeeded at attempt %d: %d runs", s.Attempt, s.Jobs), s.Jobs)
	}
	for _, c := range f.DeadByClass {
		add("dead", fmt.Sprintf("dead-lettered %s: %d runs", c.Class, c.Jobs), c.Jobs)
	}
	return out
}
