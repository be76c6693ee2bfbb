// Package job is the vocabulary every part of the pipeline speaks: the
// submitted job, how it ended (the Outcome the workers publish on the
// RESULTS and DLQ streams and the index stores, with the Attempt trace of
// every model call), and the failure Class of a dead letter or an attempt,
// a typed value the compiler checks.
//
// It depends on nothing of ours. EncodeOutcome and DecodeOutcome are the
// outcome's wire format (RESULTS and DLQ messages, the index's payloads):
//
//	b, err := job.EncodeOutcome(&job.Outcome{JobID: "inv-0001", Schema: "invoice",
//		Status: job.StatusDeadLettered, Class: job.ClassExhausted})
//	...
//	o, err := job.DecodeOutcome(b) // errors wrap job.ErrInvalidOutcome
package job

// Class is a failure class, decided by code, never by the model. It
// encodes as its string (in JSON and in the index's class columns).
type Class string

// The failure classes. ClassNone is a success (or a valid attempt).
const (
	ClassNone       Class = ""
	ClassGrammar    Class = "grammar"   // no parsable JSON after sanitizing (healable)
	ClassSchema     Class = "schema"    // valid JSON, invalid against the schema (healable)
	ClassTruncated  Class = "truncated" // finish reason length or unterminated JSON
	ClassNoProgress Class = "no_progress"
	ClassTransport  Class = "transport"
	ClassAuth       Class = "auth"
	// ClassNotFound: the provider knows no such endpoint or model; as with
	// ClassAuth the worker stops and no job is dead-lettered.
	ClassNotFound Class = "not_found"
	// ClassNoCredit: the provider's account has no credit left; as with
	// ClassAuth the worker stops and no job is dead-lettered.
	ClassNoCredit  Class = "no_credit"
	ClassRequest   Class = "request_error"
	ClassExhausted Class = "exhausted"
	// ClassRefused: the model declined the task (a refusal, not an
	// answer). Never healed or retried: the same input would be refused
	// again.
	ClassRefused Class = "refused"
	// Set by the worker, never by the heal loop: the model is not called.
	ClassInvalidJob    Class = "invalid_job"
	ClassUnknownSchema Class = "unknown_schema"
	// ClassAbandoned marks a job that reached its delivery limit without
	// any worker finishing it: the worker died or hung on every delivery
	// (set by the worker).
	ClassAbandoned Class = "abandoned"
	// ClassMerge: a long document whose chunks all succeeded, but whose
	// merged data fails the schema.
	ClassMerge Class = "merge"
	// ClassPartial: a long document some of whose chunks were
	// dead-lettered; it holds the merge of the others (replay finishes it).
	ClassPartial Class = "partial"
)
