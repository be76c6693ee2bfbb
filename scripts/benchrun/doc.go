// Command benchrun measures the pipeline against this machine's limits.
// scripts/bench builds and runs it; it prints a table and writes
// bench/RESULTS.md.
//
// It owns nothing the pipeline needs: it wires the same packages the CLI's
// `pipeline run` wires (schemas.Builtin, sim.New or llm.NewOpenAI behind
// llm.NewBreaker, heal.New, worker.New, broker.Connect on an embedded
// server with file storage, index.Open, worker.Serve) and times them.
//
// Sections (select one with --only):
//
//   - latency: the simulated model at a fixed latency L (default 200ms),
//     no faults, the built-in invoice schema, concurrency K in
//     {1,16,64,256,1024}: jobs/s, the ideal K/L, efficiency, CPU s/job,
//     peak RSS.
//   - http: the same through llm.NewOpenAI against a local
//     OpenAI-compatible server (a child process on 127.0.0.1, latency
//     --http-latency, default 500ms) so its CPU is counted apart.
//   - cpu: the most jobs/s of the non-model path, with a canned model
//     that answers at once with valid invoices written beforehand, and
//     with the simulator at zero latency (which spends CPU writing each
//     instance), side by side with the raw JetStream baseline on the same
//     message sizes; the ratio, and the sink's lag behind the streams.
//   - micro: go test -bench on sanitize, schemas, index and report.
//
// Every case runs in a child process of its own (benchrun case ...), in a
// fresh temporary data dir that it removes, so peak RSS (VmHWM) and CPU
// (getrusage) are the case's alone. A case that fails prints why; the
// others still run.
//
// Usage:
//
//	scripts/bench                      # everything, writes bench/RESULTS.md
//	scripts/bench --quick              # small job counts, a smoke run
//	scripts/bench --only cpu --profile /tmp/prof
//	scripts/bench --latency 100ms --jobs 10000
package main
