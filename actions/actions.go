package actions

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/llmpipeline/pipeline/batch"
	"github.com/llmpipeline/pipeline/index"
	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/ledger"
	"github.com/llmpipeline/pipeline/internal/queue"
	"github.com/llmpipeline/pipeline/internal/sink"
	"github.com/llmpipeline/pipeline/job"
	"github.com/nats-io/nats.go/jetstream"
)

// ErrNoFilter is returned for a replay or purge whose filter selects
// everything.
var ErrNoFilter = errors.New("no filter: name job ids or a filter (schema, class, path, cluster, model, time)")

// EmptyFilter reports whether f selects every dead letter (its Limit and
// IncludeReplayed aside).
func EmptyFilter(f index.Filter) bool {
	return f.Schema == "" && f.Version == "" && f.Class == "" && f.Path == "" && f.Cluster == "" && f.Model == "" &&
		f.Since.IsZero() && f.Until.IsZero() && len(f.IDs) == 0
}

// Select returns the dead letters a replay with f would republish, newest
// first: what a dry run shows. It refuses an empty filter.
func Select(ctx context.Context, st *index.Store, f index.Filter) ([]index.Entry, error) {
	if EmptyFilter(f) {
		return nil, ErrNoFilter
	}
	entries, err := st.List(ctx, f)
	if err != nil {
		return nil, fmt.Errorf("selecting dead letters to replay: %w", err)
	}
	return entries, nil
}

// Failure is a job that could not be replayed, and why.
type Failure struct {
	JobID string
	Err   error
}

// ReplayResult says what a replay did, per job, in the order given.
type ReplayResult struct {
	// Replayed holds the job ids republished and marked replayed.
	Replayed []string
	// Failed holds the jobs that could not be; the others went on.
	Failed []Failure
}

// Replay republishes the jobs of entries and marks their dead letters
// replayed. A job that fails is recorded in Failed and the others go on.
func Replay(ctx context.Context, conn *broker.Conn, st *index.Store, entries []index.Entry) ReplayResult {
	var res ReplayResult
	for _, en := range entries {
		if err := ReplayOne(ctx, conn, st, en); err != nil {
			res.Failed = append(res.Failed, Failure{JobID: en.JobID, Err: err})
			continue
		}
		res.Replayed = append(res.Replayed, en.JobID)
	}
	return res
}

// ReplayOne republishes one dead letter's job, as it was submitted, as the
// job's next run, then marks the dead letter replayed.
func ReplayOne(ctx context.Context, conn *broker.Conn, st *index.Store, en index.Entry) error {
	o, err := st.Get(ctx, en.JobID)
	if err != nil {
		return fmt.Errorf("reading the dead letter: %w", err)
	}
	switch {
	case o.Chunks != nil: // a long document: its chunks run again
		return replayDocument(ctx, conn, st, o)
	case o.Chunk != nil: // one chunk: its document ends again after it
		return replayChunks(ctx, conn, st, []job.Outcome{o})
	}
	j, err := job.Parse(o.Job)
	if err != nil {
		return fmt.Errorf("the stored job cannot be replayed as is: %w", err)
	}
	var files []string
	for i, f := range j.Files {
		_, ok, err := conn.Payloads().StatFile(ctx, f.SHA256)
		if err != nil {
			return fmt.Errorf("looking up its files: %w", err)
		}
		if !ok {
			return fmt.Errorf("its files[%d] %q (sha256 %s) is no longer in the object store: submit the job again with the file", i, f.Name, f.SHA256)
		}
		files = append(files, f.SHA256)
	}
	item := queue.SubmitItem{Data: o.Job, Schema: j.Schema, MsgID: ledger.RunMsgID(j.ID, o.Run+1), Files: files}
	if _, err := queue.Submit(ctx, conn, []queue.SubmitItem{item}, nil); err != nil {
		return fmt.Errorf("publishing: %w", err)
	}
	if err := st.MarkReplayed(ctx, o.JobID, o.Run); err != nil {
		return fmt.Errorf("published, but marking the dead letter replayed failed: %w", err)
	}
	return nil
}

// Purge deletes the dead letters f selects from the index and returns
// their job ids; with dryRun it deletes nothing and returns what would go.
// An empty filter is refused unless all is set.
func Purge(ctx context.Context, st *index.Store, f index.Filter, dryRun, all bool) ([]string, error) {
	if EmptyFilter(f) && !all {
		return nil, ErrNoFilter
	}
	ids, err := st.Purge(ctx, f, dryRun)
	if err != nil {
		return nil, err
	}
	return ids, nil
}

// PurgeWithStreams is Purge that also deletes the purged dead letters'
// messages from the DLQ stream, with their bodies in the payload object
// store (a later dlq rebuild does not bring them back, and the bucket does
// not keep them), then the stored files nothing names any more that were
// stored at least keepFiles ago (SweepFiles). A dry run touches neither.
// When the stream's delete fails the index is purged already: the error
// says so.
func PurgeWithStreams(ctx context.Context, conn *broker.Conn, st *index.Store, f index.Filter, dryRun, all bool, keepFiles time.Duration) ([]string, error) {
	if EmptyFilter(f) && !all {
		return nil, ErrNoFilter
	}
	runs, err := st.PurgeRuns(ctx, f, dryRun)
	if err != nil {
		return nil, err
	}
	ids := make([]string, len(runs))
	msgIDs := make([]string, len(runs))
	for i, r := range runs {
		ids[i], msgIDs[i] = r.JobID, ledger.RunMsgID(r.JobID, r.Run)
	}
	if dryRun {
		return ids, nil
	}
	var errs []error
	if _, err := sink.DeleteOutcomes(ctx, conn, broker.StreamDLQ, msgIDs); err != nil {
		errs = append(errs, fmt.Errorf("purged %d dead letters from the index, but deleting them from stream %s failed (they stay there, a dlq rebuild brings them back): %w", len(ids), broker.StreamDLQ, err))
	}
	// The files are swept even when the stream's delete failed: the dead
	// letters still there name theirs, which stay.
	if _, err := SweepFiles(ctx, conn, st, keepFiles); err != nil {
		errs = append(errs, fmt.Errorf("purged %d dead letters, but deleting the files nothing names any more failed (they stay in the object store): %w", len(ids), err))
	}
	return ids, errors.Join(errs...)
}

// DefaultKeepFiles is how long a stored file nothing names is kept before
// a purge deletes it: `pipeline submit` stores a job's files before it
// publishes the job, and a file stored for a job not yet published is
// named by nothing.
const DefaultKeepFiles = time.Hour

// SweepFiles deletes the stored files (files/<sha256> in the payload
// object store) that nothing names and that were stored at least keep
// ago, and returns their digests. A file is named by a job on the JOBS
// stream, a job held by batch mode (its item in PIPELINE_BATCHES), a
// result or dead letter on the RESULTS or DLQ stream (indexed or not),
// or a run in the index (of any run; replays read it there). They are
// read in the order a job moves through them (queued, held in a batch,
// stored as an outcome, indexed), so a job moving on while the sweep
// reads is seen in one of them.
func SweepFiles(ctx context.Context, conn *broker.Conn, st *index.Store, keep time.Duration) ([]string, error) {
	infos, err := conn.Payloads().ListFiles(ctx)
	if err != nil {
		return nil, err
	}
	cutoff := time.Now().Add(-keep)
	var old []string
	for _, fi := range infos {
		if !fi.Stored.After(cutoff) {
			old = append(old, fi.Digest)
		}
	}
	if len(old) == 0 {
		return nil, nil
	}
	named := map[string]bool{}
	if err := queue.FilesNamed(ctx, conn, broker.StreamJobs, named); err != nil {
		return nil, err
	}
	// Looked up, not created (nor its replicas changed): without it no
	// job was ever handed to batch mode.
	kv, err := conn.JetStream().KeyValue(ctx, broker.BucketBatches)
	switch {
	case errors.Is(err, jetstream.ErrBucketNotFound):
	case err != nil:
		return nil, fmt.Errorf("opening key-value bucket %s: %w", broker.BucketBatches, err)
	default:
		if err := batch.FilesHeld(ctx, kv, named); err != nil {
			return nil, err
		}
	}
	for _, s := range []string{broker.StreamResults, broker.StreamDLQ} {
		if err := queue.FilesNamed(ctx, conn, s, named); err != nil {
			return nil, err
		}
	}
	var dropped []string
	for _, d := range old {
		if named[d] {
			continue
		}
		indexed, err := st.FileReferenced(ctx, d)
		if err != nil {
			return dropped, err
		}
		if indexed {
			continue
		}
		if err := conn.Payloads().DeleteFile(ctx, d); err != nil {
			return dropped, err
		}
		dropped = append(dropped, d)
	}
	return dropped, nil
}
