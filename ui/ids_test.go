package ui_test

import (
	"net/http"
	"net/url"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/index"
)

// TestIDsAsGivenInTheConsole: a dead letter whose job id holds spaces, '/',
// '#' and non-ASCII text, of schema "ticket.v2", is listed, shown on its
// page (the id as one escaped path segment) and replayed from the console
// onto the schema's escaped subject, pipeline.jobs.ticket%2Ev2, under
// <job id>~r1.
func TestIDsAsGivenInTheConsole(t *testing.T) {
	f := newFixture(t, nil)
	ctx := t.Context()
	id, schema := "inv.2024/03 #7 ünïcode", "ticket.v2"
	o := dataset()[2]
	o.JobID, o.Schema, o.Job = id, schema, job(id, schema)
	o.FinishedAt = t0.Add(10*time.Minute + 30*time.Second)
	if err := f.st.Write(ctx, []job.Outcome{o}); err != nil {
		t.Fatal(err)
	}
	mustContain(t, "the list filtered by schema", text(f.get(t, "/dead-letters?schema="+url.QueryEscape(schema), http.StatusOK)), id, schema)
	page := f.get(t, "/dead-letters/"+url.PathEscape(id), http.StatusOK)
	mustContain(t, id+"'s page", text(page), id, schema)

	form := url.Values{"csrf": {csrf(t, page)}, "confirm": {"yes"}, "id": {id}}
	code, body := f.post(t, "/actions/replay", form)
	if code != http.StatusOK {
		t.Fatalf("replay: %d %s", code, body)
	}
	mustContain(t, "the replay's result", text(body), "replayed 1", "0 failed")
	got := jobsOnStream(t, ctx, f.conn)
	if want := "pipeline.jobs.ticket%2Ev2 " + string(job(id, schema)); got[id+"~r1"] != want || len(got) != 1 {
		t.Errorf("JOBS holds %q, want %s~r1 = %q", got, id, want)
	}
}
