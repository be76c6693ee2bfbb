// Package faults holds the failure suite: nothing lost, nothing doubled,
// whatever fails. It has no code of its own, only tests: each scenario builds the
// real pipeline binary (and a nats-server binary from the module) once,
// submits jobs, runs `pipeline run` as a separate process with the
// simulated model at 200 ms per call (or an httptest server speaking the
// OpenAI chat-completions wire format), injects one fault while work is in
// flight, lets the system recover, and then audits the outcome straight
// from the RESULTS, DLQ and JOBS streams and the SQLite index:
//
//   - every submitted job id ends exactly once, as one result or one dead
//     letter (counted per Nats-Msg-Id over both streams);
//   - no id is stored twice on RESULTS or DLQ;
//   - nothing is left on JOBS, nothing pending or unacked on its consumer;
//   - the index (<data-dir>/pipeline.db) holds the same ids with the same
//     status.
//
// The faults: kill -9 of a worker process (embedded server inside it; and
// with MaxDeliver 1 on an external server, so its jobs become orphans), a
// restart of an external nats-server, the loss of the JOBS stream leader
// in a three-node R3 cluster, a provider answering 429 for 10 s, a
// provider answering 401, a job's ack lost after its result was stored
// (a TCP proxy cuts the connection, or leaves it silent and half-open)
// with a model that fails the job when asked again, poison input (random
// bytes to submit, malformed messages published straight onto
// pipeline.jobs.<schema>), the SQLite file locked by another process for
// 5 s and for 20 s (past the busy timeout), and SIGTERM with jobs in
// flight (a grace they fit in, and one they do not). On one data dir, the
// process that runs the embedded server goes away while another that
// joined it works: two `run --until-idle` (the first exits), `submit` and
// `run` started together (submit exits), kill -9 of the owner (the joined
// run must take the server over and finish), and the owner frozen by
// SIGSTOP (nobody can take over: the joined run must exit 3 naming the
// data dir), and the owner stopped (SIGTERM) the moment another run
// joined it, while that one is still starting (it must take over and
// finish). The job ledger lost (its bucket deleted, or a data dir made
// to look like an earlier release's: no entries, or the first format of
// one key per job) before the same file is submitted again: submit must
// warn that it rebuilt the ledger, naming the entries, and publish
// nothing; the next run calls the model for none. In the stores: a job's
// body changed in the object store after submit (it must end as an
// invalid_job dead letter naming the digest mismatch).
//
// Run it with
//
//	go test -v -run TestFaults ./faults/
//
// and -update to rewrite RESULTS.md with the table (scenario, jobs,
// results, dead letters, lost, duplicated); with a -run that chooses some
// scenarios, -update rewrites their rows and keeps the others'. FAULTS_RACE=1 builds the
// pipeline binary with -race.
package faults
