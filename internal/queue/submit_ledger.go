package queue

import (
	"context"
	"fmt"

	"github.com/llmpipeline/pipeline/internal/ledger"
)

// runsEnded reports, for each item that carries a job id, whether the run
// its message id names ended.
func runsEnded(ctx context.Context, l *ledger.Ledger, items []SubmitItem) (ended []bool, inputs []string, err error) {
	keys := make([]ledger.JobRun, 0, len(items))
	at := make([]int, 0, len(items))
	for i, it := range items {
		if it.JobID != "" {
			keys = append(keys, ledger.JobRun{JobID: it.JobID, Run: ledger.RunOf(it.MsgID, it.JobID)})
			at = append(at, i)
		}
	}
	in := make([]string, len(keys))
	got, err := l.EndedRunsInputs(ctx, keys, in)
	if err != nil {
		return nil, nil, err
	}
	ended, inputs = make([]bool, len(items)), make([]string, len(items))
	for k, i := range at {
		ended[i], inputs[i] = got[k], in[k]
	}
	return ended, inputs, nil
}

// pick is xs at the indices at.
func pick[T any](xs []T, at []int) []T {
	out := make([]T, len(at))
	for k, i := range at {
		out[k] = xs[i]
	}
	return out
}

// maxChangedIDs bounds SubmitStats.ChangedIDs.
const maxChangedIDs = 1000

// filterEnded applies the ledger to the items that carry a job id: an
// item whose run already ended is dropped (counted in stats.AlreadyDone,
// or in stats.Changed when both that run and the job's last run ran
// another input) or, with Rerun (RerunChanged for a changed one), given
// the message id of the run after the last one that ended. Only reruns and
// items that look changed cost more reads (see lastRuns), gathered too.
func filterEnded(ctx context.Context, l *ledger.Ledger, items []SubmitItem, stats *SubmitStats) ([]SubmitItem, error) {
	ended, inputs, err := runsEnded(ctx, l, items)
	if err != nil {
		return nil, fmt.Errorf("checking the job ledger: %w", err)
	}
	kept := make([]SubmitItem, 0, len(items))
	var look []int // ended items that need the job's last run
	for i, it := range items {
		if !ended[i] {
			kept = append(kept, it)
			continue
		}
		maybeChanged := it.Input != "" && inputs[i] != "" && inputs[i] != it.Input
		if !it.Rerun && !maybeChanged {
			stats.AlreadyDone++
			continue
		}
		look = append(look, i)
	}
	// The items that need the job's last run: reruns (numbered after it)
	// and the ones that look changed (a rerun may have run their input).
	keys := make([]ledger.JobRun, len(look))
	for k, i := range look {
		keys[k] = ledger.JobRun{JobID: items[i].JobID, Run: ledger.RunOf(items[i].MsgID, items[i].JobID)}
	}
	last, lastIn, err := l.LastRuns(ctx, keys, pick(inputs, look))
	if err != nil {
		return nil, fmt.Errorf("checking the job ledger: %w", err)
	}
	for k, i := range look {
		it := items[i]
		changed := it.Input != "" && inputs[i] != it.Input && lastIn[k] != "" && lastIn[k] != it.Input
		switch {
		case it.Rerun || changed && it.RerunChanged:
			it.MsgID = ledger.RunMsgID(it.JobID, last[k]+1)
			stats.Reruns++
			kept = append(kept, it)
		case changed:
			stats.Changed++
			if len(stats.ChangedIDs) < maxChangedIDs {
				stats.ChangedIDs = append(stats.ChangedIDs, it.JobID)
			}
		default:
			stats.AlreadyDone++
		}
	}
	return kept, nil
}
