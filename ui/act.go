package ui

import (
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strings"

	"github.com/llmpipeline/pipeline/actions"
	"github.com/llmpipeline/pipeline/index"
)

// actionView is the confirmation page of an action (the dry run) and its
// result page.
type actionView struct {
	// Action is "replay" or "purge".
	Action string
	// Filter is the selection as given, for the page and the way back.
	Filter url.Values
	// IDs are the dead letters selected: the ones the confirmation carries.
	IDs []string
	// Back is the page the action began on (the list with its filter and
	// page, a cluster, a job): Cancel and Back return there.
	Back string
	// Done is set once the action ran.
	Done     bool
	Replayed []string
	Failed   []actions.Failure
	Purged   []string
}

// selection reads an action's form: the CSRF token, then a filter and/or
// ids (a confirmation carries the ids of its dry run).
func (s *Server) selection(w http.ResponseWriter, r *http.Request) (index.Filter, url.Values, bool) {
	if err := r.ParseForm(); err != nil {
		s.fail(w, r, http.StatusBadRequest, fmt.Errorf("reading the form: %w", err))
		return index.Filter{}, nil, false
	}
	if s.cfg.ReadOnly {
		s.fail(w, r, http.StatusForbidden, errors.New("the console is read-only (--ui-read-only)"))
		return index.Filter{}, nil, false
	}
	if !s.checkCSRF(w, r) {
		return index.Filter{}, nil, false
	}
	f, err := readFilter(r.PostForm, s.cfg.Now())
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, err)
		return index.Filter{}, nil, false
	}
	f.IncludeReplayed = false // only dead letters not yet replayed are acted on, as by the CLI
	if actions.EmptyFilter(f) {
		s.fail(w, r, http.StatusBadRequest, errors.New("select dead letters first: pick some, or filter by cluster, schema, class, path, model or time"))
		return index.Filter{}, nil, false
	}
	return f, filterValues(r.PostForm), true
}

// back is the form's way back: a path of this console (never another
// site's: not //host, not /\host), else the dead letters of the filter.
func back(form url.Values, filter url.Values) string {
	b := form.Get("back")
	if strings.HasPrefix(b, "/") && !strings.HasPrefix(b, "//") && !strings.HasPrefix(b, "/\\") && !strings.ContainsAny(b, "\r\n") {
		return b
	}
	if len(filter) == 0 {
		return "/dead-letters"
	}
	return "/dead-letters?" + filter.Encode()
}

func ids(es []index.Entry) []string {
	out := make([]string, len(es))
	for i, e := range es {
		out[i] = e.JobID
	}
	return out
}

// replay does what `pipeline dlq replay` does: without confirm=yes it shows
// the dry run (the count and the ids); with it, it replays the ids shown.
func (s *Server) replay(w http.ResponseWriter, r *http.Request) {
	f, fv, ok := s.selection(w, r)
	if !ok {
		return
	}
	if s.cfg.Conn == nil {
		s.fail(w, r, http.StatusServiceUnavailable, errors.New("replay needs the NATS connection, and the console has none"))
		return
	}
	entries, err := actions.Select(r.Context(), s.cfg.Store, f)
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	v := actionView{Action: "replay", Filter: fv, IDs: ids(entries), Back: back(r.PostForm, fv)}
	if r.PostForm.Get("confirm") != "yes" {
		s.render(w, r, http.StatusOK, "action", page{Title: "Replay?", Nav: "dead-letters", Data: v})
		return
	}
	res := actions.Replay(r.Context(), s.cfg.Conn, s.cfg.Store, entries)
	s.overview.invalidate()
	v.Done, v.Replayed, v.Failed = true, res.Replayed, res.Failed
	s.cfg.Logger.Warn("console: replayed dead letters", "replayed", len(res.Replayed), "failed", len(res.Failed),
		"jobs", res.Replayed, "filter", fv.Encode(), "remote", r.RemoteAddr)
	for _, fl := range res.Failed {
		s.cfg.Logger.Warn("console: replay failed", "job", fl.JobID, "err", fl.Err)
	}
	status := http.StatusOK
	if len(res.Failed) > 0 {
		status = http.StatusMultiStatus
	}
	s.render(w, r, status, "action", page{Title: "Replayed", Nav: "dead-letters", Data: v})
}

// purge does what `pipeline dlq purge` does: a dry run first, then the
// deletion of the ids shown, from the index only.
func (s *Server) purge(w http.ResponseWriter, r *http.Request) {
	f, fv, ok := s.selection(w, r)
	if !ok {
		return
	}
	confirmed := r.PostForm.Get("confirm") == "yes"
	var got []string
	var err error
	if confirmed && s.cfg.Conn != nil { // the DLQ stream's copies and their bodies go too
		got, err = actions.PurgeWithStreams(r.Context(), s.cfg.Conn, s.cfg.Store, f, false, false, actions.DefaultKeepFiles)
	} else {
		got, err = actions.Purge(r.Context(), s.cfg.Store, f, !confirmed, false)
	}
	if err != nil {
		s.fail(w, r, http.StatusInternalServerError, err)
		return
	}
	v := actionView{Action: "purge", Filter: fv, IDs: got, Back: back(r.PostForm, fv)}
	if !confirmed {
		s.render(w, r, http.StatusOK, "action", page{Title: "Purge?", Nav: "dead-letters", Data: v})
		return
	}
	v.Done, v.Purged = true, got
	s.overview.invalidate()
	s.cfg.Logger.Warn("console: purged dead letters from the index", "purged", len(got), "jobs", got, "filter", fv.Encode(), "remote", r.RemoteAddr)
	s.render(w, r, http.StatusOK, "action", page{Title: "Purged", Nav: "dead-letters", Data: v})
}
