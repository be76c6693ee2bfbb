// Package ledger is the job ledger: a KV bucket on JetStream
// (broker.BucketLedger, PIPELINE_LEDGER) that remembers, per job id, which
// runs ended and where each outcome is stored, beyond the streams'
// duplicate window. Each ended run is one key, <Key(job id)>.<run>, written
// once with compare-and-set: a worker checks one key before calling the
// model and writes one when the run ended, the least a ledger can cost (a
// read and a write per job). Every submitter and worker of a cluster reads
// the same one: submit skips ended jobs, and a worker acks, without calling
// the model, a delivery whose run already ended. The reads of concurrent
// workers are gathered into one multi-subject direct get (ledger_batch.go).
// Reconcile rebuilds the ledger from the streams and the index after an
// upgrade or a lost bucket.
//
//	l := ledger.New(conn)
//	entry, found, err := l.Get(ctx, "inv-0001")
//	if run, ended := entry.Ended(0); ended { ... }
//
// It sits on the broker and the payload store, and knows the job message
// only for its input digest (InputDigest).
package ledger
