package queue_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/llmpipeline/pipeline/ingest"
)

// Submit jobs to the embedded server, run workers until the queue is empty,
// and read the results back.
func Example() {
	dir, err := os.MkdirTemp("", "ingest-example")
	if err != nil {
		log.Fatal(err)
	}
	defer os.RemoveAll(dir)
	ctx := context.Background()

	conn, err := ingest.Connect(ctx, ingest.Config{DataDir: dir})
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()

	var jobs []ingest.SubmitItem
	for i := range 3 {
		id := fmt.Sprintf("inv-%d", i)
		data := fmt.Appendf(nil, `{"id":%q,"schema":"invoice","input":"Invoice %d, total 10 EUR"}`, id, i)
		jobs = append(jobs, ingest.SubmitItem{Data: data, Schema: "invoice", MsgID: id})
	}
	jobs = append(jobs, jobs[0]) // submitted twice: stored once
	stats, err := conn.Submit(ctx, jobs, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("published %d, duplicates %d\n", stats.Published, stats.Duplicates)

	handler := ingest.HandlerFunc(func(ctx context.Context, d *ingest.Delivery) ingest.Outcome {
		if d.JobErr != nil {
			return ingest.Outcome{Action: ingest.ActionDeadLetter, Payload: []byte(`{"class":"invalid_job"}`), Reason: "invalid_job"}
		}
		payload := fmt.Appendf(nil, `{"job_id":%q,"data":{"total":10}}`, d.Job.ID)
		return ingest.Outcome{Action: ingest.ActionResult, Schema: d.Job.Schema, Payload: payload}
	})
	cfg := ingest.WorkerConfig{Concurrency: 4, UntilIdle: true, FetchWait: 100 * time.Millisecond}
	if err := conn.RunWorkers(ctx, cfg, handler); err != nil {
		log.Fatal(err)
	}

	err = conn.ReadStream(ctx, ingest.StreamResults, "", func(m ingest.SinkMsg) error {
		fmt.Println(m.Subject, m.MsgID)
		return nil
	})
	if err != nil {
		log.Fatal(err)
	}
	// Unordered output:
	// published 3, duplicates 1
	// pipeline.results.invoice inv-0
	// pipeline.results.invoice inv-1
	// pipeline.results.invoice inv-2
}
