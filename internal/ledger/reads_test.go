package ledger

import (
	"fmt"
	"sync"
	"testing"

	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/brokertest"
)

// TestGatheredLedgerReads: reads gathered from many callers, and one read
// of more keys than one request holds, answer each key as the bucket
// does: recorded runs ended, deleted and purged ones and unknown ones not,
// a job id with characters the key escapes found under its own key.
func TestGatheredLedgerReads(t *testing.T) {
	t.Parallel()
	c := brokertest.NewConn(t)
	l := New(c)
	ctx := t.Context()
	const n = 3*ledgerBatch + 17
	id := func(i int) string { return fmt.Sprintf("job:%04d", i) }
	want := make([]bool, n)
	for i := 0; i < n; i += 3 {
		if _, err := l.Record(ctx, id(i), Run{Run: i % 2, MsgID: id(i), Stream: broker.StreamResults, Seq: uint64(i + 1)}); err != nil {
			t.Fatal(err)
		}
		want[i] = true
	}
	for i := 0; i < n; i += 9 { // every third recorded run goes again
		key := ledgerRunKey(id(i), i%2)
		var err error
		if i%2 == 0 {
			err = c.LedgerBucket().Delete(ctx, key)
		} else {
			err = c.LedgerBucket().Purge(ctx, key)
		}
		if err != nil {
			t.Fatal(err)
		}
		want[i] = false
	}
	keys := make([]JobRun, n)
	for i := range keys {
		keys[i] = JobRun{id(i), i % 2}
	}
	got, err := l.endedRuns(ctx, keys)
	if err != nil {
		t.Fatal(err)
	}
	for i := range keys {
		if got[i] != want[i] {
			t.Errorf("endedRuns: %s run %d ended = %v, want %v", keys[i].JobID, keys[i].Run, got[i], want[i])
		}
	}
	// The other run of each job never ended.
	if other, err := l.reads.ended(ctx, id(0), 1); err != nil || other {
		t.Errorf("run 1 of %s: ended %v, err %v; want false, nil", id(0), other, err)
	}

	var wg sync.WaitGroup
	gathered := make([]bool, n)
	errs := make([]error, n)
	for i := range keys {
		wg.Go(func() { gathered[i], errs[i] = l.reads.ended(ctx, keys[i].JobID, keys[i].Run) })
	}
	wg.Wait()
	for i := range keys {
		if errs[i] != nil || gathered[i] != want[i] {
			t.Errorf("gathered read: %s run %d ended = %v (err %v), want %v", keys[i].JobID, keys[i].Run, gathered[i], errs[i], want[i])
		}
	}
	// A deleted run recorded again reads as ended.
	if _, err := l.Record(ctx, id(0), Run{Run: 0, MsgID: id(0), Stream: broker.StreamDLQ, Seq: 99}); err != nil {
		t.Fatal(err)
	}
	if again, err := l.reads.ended(ctx, id(0), 0); err != nil || !again {
		t.Errorf("run 0 of %s recorded after its delete: ended %v, err %v; want true, nil", id(0), again, err)
	}
}

// TestRunOfMsgIDGuessesTheLedgerKey: the key a fetched job's ledger read
// starts under, from its message id alone, is the one prepare checks for
// the usual ids; for the others prepare reads again under the job's own.
func TestRunOfMsgIDGuessesTheLedgerKey(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		msgID string
		want  JobRun
	}{
		{"inv-1", JobRun{"inv-1", 0}},
		{"inv-1~r3", JobRun{"inv-1", 3}},
		{"a~rb~r12", JobRun{"a~rb", 12}},
		{"a~r", JobRun{"a~r", 0}},
		{"a~rx", JobRun{"a~rx", 0}},
		{"~r2", JobRun{"~r2", 0}},
	} {
		if got := RunOfMsgID(tc.msgID); got != tc.want {
			t.Errorf("RunOfMsgID(%q) = %+v, want %+v", tc.msgID, got, tc.want)
		}
		if tc.want.Run > 0 && RunMsgID(tc.want.JobID, tc.want.Run) != tc.msgID {
			t.Errorf("RunOfMsgID(%q) does not invert ledger.RunMsgID", tc.msgID)
		}
	}
}
