// Package worker wires one job delivery through the rest of the system and
// runs the workers with the sink. It is where the packages meet: queue
// hands it a delivery, schemas resolves the job's schema, heal runs the
// loop against the model, and the outcome (a job.Outcome, with the whole
// attempt trace) goes back to the queue to be published on RESULTS or DLQ
// before the job is acknowledged.
//
// Handler decides what happens to each delivery, by code:
//
//   - invalid job, unknown schema, a job whose worker died on every
//     delivery (abandoned): dead-lettered at once, the model never called;
//   - success: a result;
//   - healable failures used up, truncated, no progress, request errors:
//     a dead letter with the class, reason and hint;
//   - transport failures: handed back to the stream with a backoff delay,
//     and dead-lettered as transport only on the job's last delivery;
//   - auth failures: the worker stops taking jobs (queue.ActionStop).
//
// The outcome is encoded by job.EncodeOutcome (encode.go): one compact
// line, the data and the job spelled as they arrived less their
// whitespace. Metric children are resolved once per schema.
//
// Every attempt of the trace carries its model and, when Config.Cost
// prices it, its cost; the outcome their sum. A Budget (Config.Budget and
// ServeConfig.Budget, the same one) stops the run once its spend is
// reached: the workers' gate lets no fetch happen, a job fetched ahead is
// handed back unstarted, the jobs in flight finish, and Serve returns a
// *BudgetError. AnyGate composes the breakers of a fallback chain.
//
// Serve runs the queue's worker runtime and, with a Store, the sink that
// indexes outcomes into SQLite (Index); the workers hand the sink each
// outcome they stored as they built it, nothing to decode, and the sink outlives them so that
// everything published is indexed before Serve returns.
//
//	h, _ := worker.New(worker.Config{Schemas: reg, Loop: loop, Model: "sim"})
//	err := worker.Serve(ctx, conn, h, worker.ServeConfig{
//		Workers: queue.WorkerConfig{Concurrency: 64, UntilIdle: true},
//		Store:   store,
//	})
package worker
