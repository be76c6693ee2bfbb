package queue_test

import (
	"context"
	"fmt"
	"log"
	"os"
	"time"

	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/queue"
	"github.com/llmpipeline/pipeline/internal/sink"
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

	conn, err := broker.Connect(ctx, broker.Config{DataDir: dir})
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close()

	var jobs []queue.SubmitItem
	for i := range 3 {
		id := fmt.Sprintf("inv-%d", i)
		data := fmt.Appendf(nil, `{"id":%q,"schema":"invoice","input":"Invoice %d, total 10 EUR"}`, id, i)
		jobs = append(jobs, queue.SubmitItem{Data: data, Schema: "invoice", MsgID: id})
	}
	jobs = append(jobs, jobs[0]) // submitted twice: stored once
	stats, err := queue.Submit(ctx, conn, jobs, nil)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("published %d, duplicates %d\n", stats.Published, stats.Duplicates)

	handler := queue.HandlerFunc(func(ctx context.Context, d *queue.Delivery) queue.Outcome {
		if d.JobErr != nil {
			return queue.Outcome{Action: queue.ActionDeadLetter, Payload: []byte(`{"class":"invalid_job"}`), Reason: "invalid_job"}
		}
		payload := fmt.Appendf(nil, `{"job_id":%q,"data":{"total":10}}`, d.Job.ID)
		return queue.Outcome{Action: queue.ActionResult, Schema: d.Job.Schema, Payload: payload}
	})
	cfg := queue.WorkerConfig{Concurrency: 4, UntilIdle: true, FetchWait: 100 * time.Millisecond}
	if err := queue.RunWorkers(ctx, conn, cfg, handler); err != nil {
		log.Fatal(err)
	}

	err = sink.ReadStream(ctx, conn, broker.StreamResults, "", func(m sink.Msg) error {
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
