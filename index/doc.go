// Package index is the SQLite analytics index of job outcomes: the dead
// letters operators list, show, replay, purge and export, and the attempt
// traces of succeeded jobs that heal rates need. The JetStream RESULTS and
// DLQ streams are the durable record; this index is built from them by the
// sink and can be rebuilt (Reset, then the sink reads the streams again).
//
// # Writing
//
// The sink writes batches with Store.WriteWithCursors: one IMMEDIATE
// transaction per batch holding the rows and the sink's cursor per stream
// (Cursors reads them back; every message up to a cursor is indexed),
// idempotent on (job id, run), so a message written twice changes nothing.
// A later run of a job (a replay) is a new row and marks the earlier runs
// replayed. A message the sink read from a stream is decoded with
// job.DecodeOutcome (one that fails it wraps job.ErrInvalidOutcome and is skipped,
// not retried); an outcome the worker of the same process built is handed
// over as it is and not decoded at all.
//
// job.EncodeOutcome and job.DecodeOutcome are the wire format of an outcome, with
// github.com/go-json-experiment/json: compact, one line whatever the model
// or the producer wrote (the data and the job keep their spelling, less
// their whitespace). Write stores the Outcome less its data in the same
// encoding as the transcript; a member of no Outcome field never reaches
// the file.
//
//	st, err := index.Open(filepath.Join(dataDir, "pipeline.db"))
//	...
//	defer st.Close()
//	err = st.Write(ctx, outcomes)
//
// # Layout
//
// The file is created 0600 (its -wal and -shm files inherit the mode), in
// WAL mode with synchronous=NORMAL (a committed batch survives a kill -9;
// after a power loss the last batches may need `dlq rebuild` from the
// streams), a busy timeout of BusyTimeout and foreign keys on. Migrations are
// embedded (migrations/*.sql) and recorded in schema_migrations; Open applies
// the pending ones and refuses a file from a newer binary (ErrNewerSchema).
// All writes go through one connection; reads use a separate read-only pool.
//
// Tables: outcomes (one small row per job run: status, class, schema,
// version, model, attempts, tokens, times), payloads (the Outcome without
// its data as JSON text, apart so the hot tables stay small; migration 5
// turned the S2- and DEFLATE-compressed bodies of older files into text),
// attempts (one row per model call of the runs that needed more than one
// call or were dead-lettered; a first-pass success's call is its outcome
// row and payload), failures (one row per cluster per job
// run: its first failing attempt, the received value there cut to 64
// bytes, and fixed: whether the run's last validated attempt no longer
// failed on it) and clusters (one row per fingerprint). Every diagnostic of
// every attempt stays in the payload; schema version 1 also wrote a
// failures row per repeated diagnostic (lead = 0), which reads ignore.
//
// From migration 9 on, result_data holds each succeeded run's data (the
// Outcome's data member, which the payload leaves out), for `pipeline
// eval`: LatestRuns joins labelled job ids with their latest runs, a batch
// at a time. evals holds the stored evals (SaveEval, Evals, LatestEvals),
// one row per schema, version and model an eval scored; they are the
// user's, not the streams', and Reset keeps them.
//
// # Clusters
//
// Write stores, per job run, one failures row per cluster, with its first
// failing attempt and whether it was fixed by the run's end, and one
// clusters row per fingerprint: the grouping and the fixed rule are the
// report's (package report/cluster, which this package applies and does
// not decide); migration 2 derived fixed for older rows in SQL. The report
// builds its clusters, heal rates and flags on the aggregate reads of
// Store.Analytics: ClusterCounts (jobs, dead letters, fixed, replayed and
// healed), ClusterReceived, ClusterRecentEnds,
// ClusterBlockers, ClusterExamples and Funnel (per schema version), all
// over covering indexes, and ReplayHealed (dead letters whose replay
// succeeded, over the partial index of dead letters).
//
// # Views
//
// Operators read the file with sqlite3 through views that need nothing but
// SQL (docs/INDEX.md): v_outcomes (one row per job run), v_dead_letters
// (with replay_outcome: what became of a replayed dead letter), v_attempts
// (one row per model call, read from the transcripts), v_failures (one
// row per cluster per run) and v_evals (one row per group of a stored eval), with ISO 8601 times and the transcript as JSON
// text ({"job", "attempts"}) that json_extract reads.
//
// # Operator queries
//
// List, Purge and Export select dead letters with a Filter (schema, class,
// path, cluster, model, version, time range, ids; runs superseded by a replay
// only with IncludeReplayed). Get returns a job's latest run with its whole
// transcript. Stats counts both statuses for `pipeline stats`. Retain plans
// retention by age and row count and deletes nothing: the caller warns and
// meters, then calls Apply with the plan.
package index
