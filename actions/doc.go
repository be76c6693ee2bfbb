// Package actions holds the operator actions on dead letters that change
// something: replaying dead-lettered jobs after a fix, and purging dead
// letters from the index. `pipeline dlq replay`, `pipeline dlq purge` and
// the console (package ui) all call these functions, so a click in the
// console does exactly what the command does.
//
// A replay republishes each selected job as it was submitted, under the
// message id <job id>~r<n> (ledger.RunMsgID, n the next run), then
// marks its dead letter replayed in the index; the new run's outcome is
// indexed as run n. Purge deletes dead letters from the index only (the
// DLQ stream keeps its copies: `pipeline dlq rebuild` brings them back);
// PurgeWithStreams, which `pipeline dlq purge` calls, deletes the stream's
// copies and their bodies in the object store too.
// Both refuse an empty filter (ErrNoFilter), so nothing is replayed or
// purged wholesale by accident; Purge takes All to mean it.
//
//	entries, err := actions.Select(ctx, store, f) // what a dry run shows
//	res := actions.Replay(ctx, conn, store, entries)
//	fmt.Printf("replayed %d jobs, %d failed\n", len(res.Replayed), len(res.Failed))
package actions
