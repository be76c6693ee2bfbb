// Package batch runs attempts through the providers' batch endpoints
// (OpenAI's Batch API, Anthropic's Message Batches) at their discount:
// another way to run attempts, not another pipeline.
//
// A Runner is the workers' queue.Handler. For each job it runs the
// synchronous handler (worker.Handler) whose heal loop calls a *Replay: the
// loop's first model call is captured instead of sent, gathered with others
// (up to Config.Size requests, or Config.Wait after the first) and
// submitted as one batch. The delivery is acked (queue.ActionHandOff) once
// the batch record on JetStream names the batch the provider accepted; no
// JetStream delivery is held open while the provider works.
//
// Every Config.Poll, each process polls every batch in the
// PIPELINE_BATCHES bucket (broker.BucketBatches), so a restart or another
// machine picks up batches a dead process created. The answers of a done
// batch are settled by running the same loop again with the recorded
// answers replayed: the judge, the heal prompts, the no-progress and
// truncation rules are the synchronous ones. A heal turn the loop asks for
// is queued for the next batch (or, with HealSync, sent synchronously); a
// per-request error inside a batch is a transport failure of that attempt,
// sent again in a later batch up to Config.TransportRetries; a request left
// unanswered by an expired or cancelled batch goes into a later batch. A
// batch the provider failed as a whole is settled by its error code
// (collectFailed): the enqueued-token limit holds new batches until the
// fleet's in flight have finished; a validation error dead-letters the
// requests it names. Results are streamed, and a line that cannot be read
// affects only its own request. An account-level failure (a refused key)
// stops the runner (Stopped, Err): nothing is dead-lettered.
// Outcomes are stored with queue.StoreOutcome: the same streams,
// duplicate window and job ledger as the synchronous path.
//
// Runner.Census counts the bucket's batches by provider, state and the
// provider's status word, with the requests waiting in them or queued: the
// fleet's view, read whole at every poll and updated at once by the
// process's own writes (metrics, progress). Config.Observe sees every
// batch state change and every request's outcome (Outcomes).
//
// Custom ids name the job run (a hash of its message id), the attempt and
// the batch key, so no custom id is ever submitted twice.
//
//	run, _ := batch.New(batch.Config{Batcher: b, KV: kv, Conn: conn, Inner: workerHandler})
//	go run.Run(ctx)
//	queue.RunWorkers(ctx, conn, queue.WorkerConfig{}, run)
package batch
