package eval_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/llmpipeline/pipeline/eval"
	"github.com/llmpipeline/pipeline/index"
	"github.com/llmpipeline/pipeline/job"
)

// Scoring a labelled file against the index's latest runs, then storing
// the eval in the index's history.
func ExampleRun() {
	ctx := context.Background()
	dir, _ := os.MkdirTemp("", "eval-example")
	defer os.RemoveAll(dir)
	st, err := index.Open(filepath.Join(dir, "pipeline.db"))
	if err != nil {
		fmt.Println(err)
		return
	}
	defer st.Close()
	now := time.Now()
	_ = st.Write(ctx, []job.Outcome{{JobID: "c-1", Schema: "contact", SchemaVersion: "v1", Status: job.StatusSucceeded,
		Model: "openai:gpt-4o-mini", Attempts: 1, Data: []byte(`{"name":"Ana Silva","email":"ana@acme.example","tags":["a","b"]}`),
		StartedAt: now, FinishedAt: now}})
	labels := filepath.Join(dir, "labels.jsonl")
	_ = os.WriteFile(labels, []byte(`{"id":"c-1","expected":{"name":"ana  silva","email":"ana@acme.example","company":"Acme","tags":["b","c"]}}`+"\n"), 0o600)

	res, err := eval.Run(ctx, st, labels, eval.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := st.SaveEval(ctx, res.Stored()); err != nil {
		fmt.Println(err)
		return
	}
	o := res.Overall
	fmt.Printf("correct %d, wrong %d, missing %d, extra %d, f1 %.2f\n", o.Correct, o.Wrong, o.Missing, o.Extra, o.F1)
	fmt.Printf("/tags/*: %+v\n", res.Fields["/tags/*"].Counts)
	// Output:
	// correct 3, wrong 0, missing 2, extra 1, f1 0.67
	// /tags/*: {Correct:1 Wrong:0 Missing:1 Extra:1}
}
