package ui_test

import (
	"fmt"
	"html"
	"net/http"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/job"
	"github.com/llmpipeline/pipeline/report/cluster"
	"github.com/llmpipeline/pipeline/schemas"
	"github.com/llmpipeline/pipeline/ui"
)

// TestClusterPageShowsTruthFailures: the page of an x-rules cluster shows
// the rule's text and message from the schema as loaded; the page of an
// x-grounded cluster shows the ungrounded values received.
func TestClusterPageShowsTruthFailures(t *testing.T) {
	sc, err := schemas.Compile("inv", []byte(`{"type":"object","properties":{"vendor":{"type":"string","x-grounded":true},
		"total":{"type":"number"},"tax":{"type":"number"}},
		"x-rules":[{"rule":"self.total > self.tax","message":"the total exceeds the tax","path":"/total"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	reg, err := schemas.NewRegistry(sc)
	if err != nil {
		t.Fatal(err)
	}
	f := newFixture(t, func(c *ui.Config) { c.LoadSchemas = func() (*schemas.Registry, error) { return reg, nil } })
	var outs []job.Outcome
	for i := range 3 {
		id := fmt.Sprintf("tr-%d", i)
		outs = append(outs, job.Outcome{JobID: id, Schema: "inv", SchemaVersion: sc.Version, Status: job.StatusDeadLettered,
			Class: job.ClassExhausted, Reason: "still failing", Model: "sim", Attempts: 1, Job: jobJSON(id, "inv"),
			Trace: []job.Attempt{{N: 1, Raw: `{"vendor":"Globex","total":1,"tax":2}`, Class: job.ClassSchema, Diagnostics: []job.Diagnostic{
				{Path: "/total", Keyword: "x-rules/0", Message: "the total exceeds the tax", Expected: "self.total > self.tax", Received: "1"},
				{Path: "/vendor", Keyword: "x-grounded", Message: `"Globex" not found in the input`, Received: `"Globex"`},
			}}},
			StartedAt: t0.Add(time.Duration(i) * time.Minute), FinishedAt: t0.Add(time.Duration(i)*time.Minute + time.Second)})
	}
	if err := f.st.Write(t.Context(), outs); err != nil {
		t.Fatal(err)
	}
	rule := cluster.ID(cluster.Fingerprint{Schema: "inv", Version: sc.Version, Path: "/total", Keyword: "x-rules/0"})
	page := html.UnescapeString(text(f.get(t, "/clusters/"+rule, http.StatusOK)))
	mustContain(t, "the rule's cluster page", page, "[x-rules/0]", "rule self.total > self.tax : the total exceeds the tax", "3 of 3 jobs")
	page = html.UnescapeString(text(f.get(t, "/clusters?keyword=x-rules", http.StatusOK)))
	mustContain(t, "the clusters of keyword x-rules", page, "1 of 1 clusters", "x-rules/0")
	grounded := cluster.ID(cluster.Fingerprint{Schema: "inv", Version: sc.Version, Path: "/vendor", Keyword: "x-grounded"})
	page = html.UnescapeString(text(f.get(t, "/clusters/"+grounded, http.StatusOK)))
	mustContain(t, "the grounding cluster page", page, "[x-grounded]", "Received values", `"Globex" 3`)
}
