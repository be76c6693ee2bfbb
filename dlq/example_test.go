package dlq_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"path/filepath"
	"sort"
	"time"

	"github.com/llmpipeline/pipeline/index"
)

func Example() {
	dir, err := os.MkdirTemp("", "dlq-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	st, err := index.Open(filepath.Join(dir, "pipeline.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()

	// What the sink does with each RESULTS/DLQ message batch.
	msg := []byte(`{"job_id":"inv-0001","schema":"invoice","schema_version":"3f9a","status":"dead_lettered",
		"class":"exhausted","attempts":2,"finished_at":"2025-03-01T12:00:00Z",
		"trace":[{"n":1,"raw":"{\"total\":\"12\"}","diagnostics":[{"path":"/total","keyword":"type","received":"\"12\""}]},
		         {"n":2,"raw":"{\"total\":\"12.0\"}","diagnostics":[{"path":"/total","keyword":"type","received":"\"12.0\""}]}]}`)
	o, err := job.DecodeOutcome(msg)
	if err != nil {
		log.Fatal(err)
	}
	if err := st.Write(ctx, []job.Outcome{o}); err != nil {
		log.Fatal(err) // do not ack: the batch is redelivered
	}
	if err := st.Write(ctx, []job.Outcome{o}); err != nil { // a redelivery changes nothing
		log.Fatal(err)
	}

	list, err := st.List(ctx, index.Filter{Path: "/total"})
	if err != nil {
		log.Fatal(err)
	}
	for _, e := range list {
		fmt.Println(e.JobID, e.Class, e.Attempts, e.FirstPath, e.FailedAt.Format(time.RFC3339))
	}
	stats, err := st.Stats(ctx, index.Filter{})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("jobs", stats.Jobs, "dead", stats.DeadLettered)
	// Output:
	// inv-0001 exhausted 2 /total 2025-03-01T12:00:00Z
	// jobs 1 dead 1
}

func ExamplePathPattern() {
	fmt.Println(cluster.PathPattern("/items/2/price"))
	fmt.Println(cluster.ID(cluster.Fingerprint{Schema: "invoice", Version: "3f9a", Path: "/items/2/price", Keyword: "type"}) ==
		cluster.ID(cluster.Fingerprint{Schema: "invoice", Version: "3f9a", Path: "/items/*/price", Keyword: "type"}))
	// Output:
	// /items/*/price
	// true
}

func ExampleStore_Retain() {
	dir, _ := os.MkdirTemp("", "dlq-example")
	defer os.RemoveAll(dir)
	st, err := index.Open(filepath.Join(dir, "pipeline.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	old := time.Now().Add(-30 * 24 * time.Hour)
	if err := st.Write(ctx, []job.Outcome{{JobID: "j1", Schema: "invoice", Status: job.StatusDeadLettered, Class: "schema", Attempts: 2, FinishedAt: old}}); err != nil {
		log.Fatal(err)
	}
	plan, err := st.Retain(ctx, 7*24*time.Hour, 0)
	if err != nil {
		log.Fatal(err)
	}
	// Never trim silently: say what goes, count it in a metric, then apply.
	fmt.Println("retention would delete", plan.DeadLetters)
	n, err := st.Apply(ctx, plan)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("deleted", n)
	// Output:
	// retention would delete [j1]
	// deleted 1
}

// The report's reads: per fingerprint, the job runs where it failed, the
// dead letters among them and the runs where the model fixed it before the
// end, and what killed the jobs in which it was fixed.
func ExampleStore_ClusterCounts() {
	dir, err := os.MkdirTemp("", "dlq-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	st, err := index.Open(filepath.Join(dir, "pipeline.db"))
	if err != nil {
		log.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()

	// The heal turn fixes /carrier but not /code: the job dies of /code.
	code := job.Diagnostic{Path: "/code", Keyword: "pattern", Received: `"x"`}
	o := job.Outcome{JobID: "shp-1", Schema: "shipment", SchemaVersion: "9b1c", Status: job.StatusDeadLettered,
		Class: "exhausted", Attempts: 2, FinishedAt: time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC),
		Trace: []job.Attempt{
			{N: 1, Class: "schema", Diagnostics: []job.Diagnostic{{Path: "/carrier", Keyword: "enum", Received: `"dhl"`}, code}},
			{N: 2, Class: "schema", Diagnostics: []job.Diagnostic{code}},
		}}
	if err := st.Write(ctx, []job.Outcome{o}); err != nil {
		log.Fatal(err)
	}
	counts, err := st.ClusterCounts(ctx, index.Filter{Schema: "shipment"})
	if err != nil {
		log.Fatal(err)
	}
	sort.Slice(counts, func(i, j int) bool { return counts[i].Path < counts[j].Path })
	for _, c := range counts {
		fmt.Println(c.Path, c.Keyword, "jobs", c.Jobs, "dead", c.DeadLetters, "fixed", c.Fixed)
	}
	carrier := cluster.ID(cluster.Fingerprint{Schema: "shipment", Version: "9b1c", Path: "/carrier", Keyword: "enum"})
	blockers, err := st.ClusterBlockers(ctx, carrier, index.Filter{}, 3)
	if err != nil {
		log.Fatal(err)
	}
	for _, b := range blockers {
		fmt.Println("/carrier was fixed in jobs killed by", b.Path, b.Keyword, b.Runs)
	}
	// Output:
	// /carrier enum jobs 1 dead 1 fixed 1
	// /code pattern jobs 1 dead 1 fixed 0
	// /carrier was fixed in jobs killed by /code pattern 1
}
