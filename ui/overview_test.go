package ui_test

import (
	"encoding/json"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/index"
	"github.com/llmpipeline/pipeline/ui"
)

// overviewJSON reads /api/overview.
func overviewJSON(t *testing.T, f *fixture) ui.Overview {
	t.Helper()
	var o ui.Overview
	if err := json.Unmarshal([]byte(f.get(t, "/api/overview", http.StatusOK)), &o); err != nil {
		t.Fatal(err)
	}
	return o
}

// consistent checks the one definition: jobs are succeeded + dead-lettered
// + awaiting their replay's run; runs, tokens and cost are the funnel's.
func consistent(t *testing.T, when string, o ui.Overview) {
	t.Helper()
	if o.Jobs != o.Succeeded+o.DeadLettered+o.AwaitingReplay {
		t.Errorf("%s: %d jobs, but %d succeeded + %d dead-lettered + %d awaiting", when, o.Jobs, o.Succeeded, o.DeadLettered, o.AwaitingReplay)
	}
	runs, tokens, dead := 0, 0, 0
	for _, fu := range o.Funnel {
		runs += fu.Jobs
		tokens += fu.Tokens
	}
	for _, n := range o.ByClass {
		dead += n
	}
	if runs != o.Runs || tokens != o.Tokens {
		t.Errorf("%s: the cards say %d runs, %d tokens; the funnel %d runs, %d tokens", when, o.Runs, o.Tokens, runs, tokens)
	}
	if dead != o.DeadLettered {
		t.Errorf("%s: %d dead-lettered jobs, %d in the class table", when, o.DeadLettered, dead)
	}
}

// waitOverview polls /api/overview until ok holds (the figures are read
// again at most once a second).
func waitOverview(t *testing.T, f *fixture, what string, ok func(ui.Overview) bool) ui.Overview {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		o := overviewJSON(t, f)
		if ok(o) {
			return o
		}
		if time.Now().After(deadline) {
			t.Fatalf("the overview never showed %s: %+v", what, o)
		}
		time.Sleep(50 * time.Millisecond) // polling with a deadline, not a wait for an event
	}
}

// TestOverviewAfterReplay: a replay changes no count of jobs and loses no
// spend: the replayed jobs wait for their run, then the new runs add to
// the runs and tokens, and every figure agrees with the others.
func TestOverviewAfterReplay(t *testing.T) {
	f := newFixture(t, nil)
	before := overviewJSON(t, f)
	consistent(t, "before the replay", before)
	if before.Jobs != 6 || before.Runs != 6 {
		t.Fatalf("before the replay: %d jobs, %d runs; want 6 and 6", before.Jobs, before.Runs)
	}
	token := csrf(t, f.get(t, "/clusters/"+codeCluster(), http.StatusOK))
	code, body := f.post(t, "/actions/replay", url.Values{"csrf": {token}, "confirm": {"yes"}, "id": {"inv-3", "inv-4", "inv-5"}})
	if code != http.StatusOK || !strings.Contains(body, "replayed 3 jobs") {
		t.Fatalf("replay: %d %s", code, text(body))
	}
	after := overviewJSON(t, f) // the console's own action is shown at once
	consistent(t, "after the replay", after)
	if after.Jobs != 6 || after.AwaitingReplay != 3 || after.DeadLettered != 1 || after.Runs != 6 || after.Tokens != before.Tokens {
		t.Errorf("after the replay: %d jobs (%d awaiting, %d dead), %d runs, %d tokens; want 6 (3, 1), 6 runs, %d tokens",
			after.Jobs, after.AwaitingReplay, after.DeadLettered, after.Runs, after.Tokens, before.Tokens)
	}
	mustContain(t, "the overview after the replay", text(f.get(t, "/", http.StatusOK)), "jobs 6", "replayed, awaiting a run 3", "runs 6")

	// the workers run the replays: each job's run 1 succeeds
	var runs []job.Outcome
	for _, id := range []string{"inv-3", "inv-4", "inv-5"} {
		runs = append(runs, job.Outcome{JobID: id, Run: 1, Schema: "invoice", SchemaVersion: "v1aaaaaaaaaa", Status: job.StatusSucceeded, Model: "sim", Attempts: 1,
			Data: json.RawMessage(`{"code":"P-1"}`), Job: job(id, "invoice"),
			Trace:     []job.Attempt{{N: 1, Raw: `{"code":"P-1"}`, PromptTokens: 100, CompletionTokens: 10}},
			StartedAt: t0.Add(10 * time.Minute), FinishedAt: t0.Add(10*time.Minute + time.Second)})
	}
	if err := f.st.Write(t.Context(), runs); err != nil {
		t.Fatal(err)
	}
	done := waitOverview(t, f, "the replays' runs", func(o ui.Overview) bool { return o.Runs == 9 })
	consistent(t, "after the replays ran", done)
	if done.Jobs != 6 || done.Succeeded != 5 || done.DeadLettered != 1 || done.AwaitingReplay != 0 || done.Tokens != before.Tokens+330 {
		t.Errorf("after the replays ran: %d jobs (%d succeeded, %d dead, %d awaiting), %d tokens; want 6 (5, 1, 0), %d tokens",
			done.Jobs, done.Succeeded, done.DeadLettered, done.AwaitingReplay, done.Tokens, before.Tokens+330)
	}
}

// TestOverviewLive: the page's script swaps in /overview/live, which
// renders every figure of the page (cards with their shares, the class
// table, the funnel), and it follows the index.
func TestOverviewLive(t *testing.T) {
	f := newFixture(t, nil)
	page := f.get(t, "/", http.StatusOK)
	mustContain(t, "the overview", page, `data-live="/overview/live"`)
	frag := f.get(t, "/overview/live", http.StatusOK)
	if strings.Contains(frag, "<html") || strings.Contains(frag, "<nav") {
		t.Errorf("/overview/live is a whole page, want the figures alone")
	}
	mustContain(t, "/overview/live", text(frag), "jobs 6", "succeeded 2 33.3% of jobs", "dead-lettered 4 66.7% of jobs",
		"exhausted 3 50.0%", "invoice v1aaaaaa 5 20.0%")
	for _, id := range []string{`id="tiles"`, `id="classes"`, `id="funnel-table"`, `id="funnel-chart"`} {
		mustContain(t, "/overview/live", frag, id)
	}
	c := 0.5
	o := job.Outcome{JobID: "tk-9", Schema: "ticket", SchemaVersion: "t1bbbbbbbbbb", Status: job.StatusDeadLettered, Class: "truncated",
		Reason: "finish reason length", Model: "openai:gpt-4o-mini", Attempts: 1, Job: job("tk-9", "ticket"), CostUSD: &c,
		Trace:     []job.Attempt{{N: 1, Raw: `{"subject":`, Class: "truncated", Model: "openai:gpt-4o-mini", CostUSD: &c, PromptTokens: 50, CompletionTokens: 50}},
		StartedAt: t0.Add(10 * time.Minute), FinishedAt: t0.Add(10*time.Minute + time.Second)}
	if err := f.st.Write(t.Context(), []job.Outcome{o}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		frag = text(f.get(t, "/overview/live", http.StatusOK))
		if strings.Contains(frag, "jobs 7") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/overview/live never showed the new job: %s", frag)
		}
		time.Sleep(50 * time.Millisecond) // polling with a deadline
	}
	mustContain(t, "/overview/live after a dead letter", frag, "dead-lettered 5 71.4% of jobs", "succeeded 2 28.6% of jobs",
		"truncated 1 14.3%", "cost $0.5000", "ticket t1bbbbbb 2 0.0%", "$0.5000")
}
