package ui

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/llmpipeline/pipeline/index"
)

// filterKeys are the dead-letter filters a URL (and an action's form) may hold.
var filterKeys = []string{"cluster", "schema", "version", "class", "path", "model", "since", "until"}

// readFilter reads a dead-letter filter from a URL query or a form.
func readFilter(q url.Values, now time.Time) (index.Filter, error) {
	since, err := index.ParseTime(q.Get("since"), now)
	if err != nil {
		return index.Filter{}, fmt.Errorf("since: %w", err)
	}
	until, err := index.ParseTime(q.Get("until"), now)
	if err != nil {
		return index.Filter{}, fmt.Errorf("until: %w", err)
	}
	f := index.Filter{
		Cluster: q.Get("cluster"), Schema: q.Get("schema"), Version: q.Get("version"), Class: q.Get("class"),
		Path: q.Get("path"), Model: q.Get("model"), Since: since, Until: until,
		IncludeReplayed: q.Get("replayed") == "1",
	}
	for _, id := range q["id"] {
		if id = strings.TrimSpace(id); id != "" {
			f.IDs = append(f.IDs, id)
		}
	}
	return f, nil
}

// filterValues is the part of q that selects dead letters, for links and
// hidden fields.
func filterValues(q url.Values) url.Values {
	out := url.Values{}
	for _, k := range filterKeys {
		if v := q.Get(k); v != "" {
			out.Set(k, v)
		}
	}
	return out
}

// maxPage bounds the rows a page may skip: deeper pages are refused, not
// read.
const maxPage = 10_000_000

// listView is the dead letters page.
type listView struct {
	Q       url.Values
	Entries []index.Entry
	Page    int
	From    int
	Prev    string
	Next    string
	// Filter is the selection as a query string, for the actions' forms.
	Filter   url.Values
	Filtered bool
	Replayed bool
}

func (s *Server) deadLetters(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	f, err := readFilter(q, s.cfg.Now())
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err)
		return
	}
	size := s.cfg.PageSize
	pageN := 0
	if p := q.Get("page"); p != "" {
		if pageN, err = strconv.Atoi(p); err != nil || pageN < 0 || pageN > maxPage/size {
			s.fail(w, r, http.StatusBadRequest, fmt.Errorf("page %q: want a number from 0 to %d", p, maxPage/size))
			return
		}
	}
	// newest first: this page and one more, to know whether there is a next page
	f.Offset, f.Limit = pageN*size, size+1
	entries, err := s.cfg.Store.List(r.Context(), f)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	if pageN > 0 && len(entries) == 0 {
		s.fail(w, r, http.StatusBadRequest, fmt.Errorf("page %d is past the end: fewer than %d dead letters match", pageN, pageN*size+1))
		return
	}
	v := listView{Q: q, Page: pageN, From: pageN*size + 1, Filter: filterValues(q), Replayed: f.IncludeReplayed}
	v.Filtered = len(v.Filter) > 0
	v.Entries = entries[:min(len(entries), size)]
	link := func(p int) string {
		u := filterValues(q)
		if f.IncludeReplayed {
			u.Set("replayed", "1")
		}
		if p > 0 {
			u.Set("page", strconv.Itoa(p))
		}
		return "/dead-letters?" + u.Encode()
	}
	if pageN > 0 {
		v.Prev = link(pageN - 1)
	}
	if len(entries) > size {
		v.Next = link(pageN + 1)
	}
	s.render(w, r, http.StatusOK, "deadletters", page{Title: "Dead letters", Nav: "dead-letters", Data: v})
}

// transcriptView is one job's page.
type transcriptView struct {
	O        job.Outcome
	Job      string
	Took     time.Duration
	Tokens   int
	Dead     bool
	Attempts []attemptView
}

type attemptView struct {
	job.Attempt
	Verdict string
}

func (s *Server) deadLetter(w http.ResponseWriter, r *http.Request) {
	id := r.PathValue("job")
	if r.URL.Path == "/job" {
		if id = r.URL.Query().Get("id"); id == "" {
			s.fail(w, r, http.StatusBadRequest, errors.New("/job needs ?id=JOB_ID"))
			return
		}
	}
	o, err := s.cfg.Store.Get(r.Context(), id)
	if errors.Is(err, index.ErrNotFound) {
		s.fail(w, r, http.StatusNotFound, fmt.Errorf("job %q is not in the index", id))
		return
	}
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	o, err = s.redact(o)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	v := transcriptView{O: o, Dead: o.Status == job.StatusDeadLettered, Job: index.JobText(o.Job, "")}
	if !o.StartedAt.IsZero() && !o.FinishedAt.IsZero() {
		v.Took = o.FinishedAt.Sub(o.StartedAt).Round(time.Millisecond)
	}
	for _, a := range o.Trace {
		v.Tokens += a.PromptTokens + a.CompletionTokens
		verdict := "valid"
		if a.Class != "" {
			verdict = a.Class
		}
		v.Attempts = append(v.Attempts, attemptView{Attempt: a, Verdict: verdict})
	}
	s.render(w, r, http.StatusOK, "deadletter", page{Title: "Job " + id, Nav: "dead-letters", Data: v})
}

// redact runs the whole outcome (job, raw outputs, reasons, diagnostics)
// through the redactor, by its JSON form, so no field is forgotten.
func (s *Server) redact(o job.Outcome) (job.Outcome, error) {
	if s.cfg.Secrets.Empty() {
		return o, nil
	}
	b, err := json.Marshal(o)
	if err != nil {
		return o, fmt.Errorf("redacting job %s: %w", o.JobID, err)
	}
	var out job.Outcome
	if err := json.Unmarshal(s.cfg.Secrets.Bytes(b), &out); err != nil {
		return o, fmt.Errorf("redacting job %s: %w", o.JobID, err)
	}
	return out, nil
}
