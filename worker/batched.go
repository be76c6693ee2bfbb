package worker

import "context"

type batchedKey struct{}

// WithBatched marks a job's handling as batch mode's: batched(n) reports
// whether the loop's attempt n was answered through a provider batch. The
// handler records those attempts with Batch set and prices them with
// Config.BatchCost (the model's batch discount).
func WithBatched(ctx context.Context, batched func(n int) bool) context.Context {
	return context.WithValue(ctx, batchedKey{}, batched)
}

func batchedOf(ctx context.Context) func(int) bool {
	f, _ := ctx.Value(batchedKey{}).(func(int) bool)
	return f
}
