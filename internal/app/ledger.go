package app

import (
	"context"
	"errors"
	"io/fs"
	"log/slog"
	"os"

	"github.com/llmpipeline/pipeline/index"
	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/config"
	"github.com/llmpipeline/pipeline/internal/exit"
	"github.com/llmpipeline/pipeline/internal/ledger"
)

// ReconcileLedger, at the start of run and submit, writes into the job
// ledger the ended runs the outcome streams (and, when the ledger is
// rebuilt, the index on this data dir) prove and it misses: a data dir of
// a release before the ledger, a ledger bucket deleted or purged. Entries
// it had to write are a warning naming how many, so a ledger that lost
// its memory is never silent. st is the index the command has open (nil
// for none: the one at --db or in the data dir is read, if there is one).
func ReconcileLedger(ctx context.Context, cfg *config.Config, conn *broker.Conn, st *index.Store, log *slog.Logger) error {
	index := func(ctx context.Context, yield func(ledger.IndexedRun) bool) error {
		s := st
		if s == nil {
			if _, err := os.Stat(DBPath(cfg)); errors.Is(err, fs.ErrNotExist) {
				return nil // no index here: the streams are all there is
			}
			var err error
			if s, err = OpenStore(cfg, false); err != nil {
				return err
			}
			defer s.Close()
		}
		return s.EndedRuns(ctx, func(r index.EndedRun) bool {
			return yield(ledger.IndexedRun{JobID: r.JobID, Run: r.Run, Dead: r.Dead, At: r.At})
		})
	}
	r, err := ledger.New(conn).Reconcile(ctx, index)
	if err != nil {
		return exit.WithCode(exit.Runtime, err)
	}
	if n := r.Written(); n > 0 {
		why := "outcomes were stored without their ledger entry"
		if r.Rebuild {
			why = "the ledger was missing, emptied, or written by an earlier release"
		}
		log.Warn("job ledger "+broker.BucketLedger+" rebuilt: it missed ended runs that the streams or the index hold; they are recorded now, so none is answered twice",
			"entries_rebuilt", n, "from_streams", r.FromStreams, "from_index", r.FromIndex, "from_previous_format", r.Migrated,
			"outcomes_read", r.Scanned, "why", why)
	} else {
		log.Debug("job ledger reconciled with the streams", "outcomes_read", r.Scanned, "rebuild", r.Rebuild)
	}
	return nil
}
