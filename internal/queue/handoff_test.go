package queue

import (
	"testing"

	"github.com/llmpipeline/pipeline/internal/ledger"
	"github.com/llmpipeline/pipeline/internal/sink"
)

// TestStoreOutcomeTellsWhatWasKept: a handed-off job's outcome tells the
// hooks as a delivery's does. The first store is Stored; one whose run's
// outcome reached the stream before (a process died between the publish
// and the ledger) is deduplicated there and told as Repeated, and the
// ledger then records the stream's first one; a store after the run ended
// tells nothing. Before, the deduplicated outcome was told to no hook,
// so `run` did not count it as answered again.
func TestStoreOutcomeTellsWhatWasKept(t *testing.T) {
	t.Parallel()
	c := newConn(t)
	var stored, repeated []sink.Msg
	hooks := OutcomeHooks{
		Stored:   func(m sink.Msg) { stored = append(stored, m) },
		Repeated: func(m sink.Msg) { repeated = append(repeated, m) },
	}
	result := func(payload string) Outcome {
		return Outcome{Action: ActionResult, Schema: "invoice", Payload: []byte(payload)}
	}

	ours, err := StoreOutcome(t.Context(), c, HandedOutcome{MsgID: "a.1", JobID: "a.1", SchemaToken: "invoice", Outcome: result(`{"n":1}`)}, hooks)
	if err != nil || !ours || len(stored) != 1 || len(repeated) != 0 {
		t.Fatalf("first store: ours %v, err %v, stored %d, repeated %d; want ours, one Stored", ours, err, len(stored), len(repeated))
	}

	// b's outcome is in the stream but not in the ledger.
	first, err := publishOutcome(t.Context(), c, "b 2", "invoice", result(`{"n":2}`))
	if err != nil {
		t.Fatal(err)
	}
	ours, err = StoreOutcome(t.Context(), c, HandedOutcome{MsgID: "b 2", JobID: "b 2", SchemaToken: "invoice", Outcome: result(`{"n":3}`)}, hooks)
	if err != nil || !ours {
		t.Fatalf("store after a lost ledger write: ours %v, err %v; want the stream's outcome recorded as the run's", ours, err)
	}
	if len(stored) != 1 || len(repeated) != 1 || repeated[0].MsgID != "b 2" || repeated[0].Sequence != first.ack.Sequence {
		t.Errorf("deduplicated store: %d Stored, Repeated %+v; want one Repeated naming the stream's message %d", len(stored)-1, repeated, first.ack.Sequence)
	}
	run, ended, err := ledger.New(c).RunEnded(t.Context(), "b 2", ledger.RunOf("b 2", "b 2"))
	if err != nil || !ended || run.Seq != first.ack.Sequence {
		t.Errorf("ledger after the deduplicated store: %+v ended %v err %v; want the first outcome's sequence %d", run, ended, err, first.ack.Sequence)
	}

	ours, err = StoreOutcome(t.Context(), c, HandedOutcome{MsgID: "a.1", JobID: "a.1", SchemaToken: "invoice", Outcome: result(`{"n":4}`)}, hooks)
	if err != nil || ours || len(stored) != 1 || len(repeated) != 1 {
		t.Errorf("store after the run ended: ours %v, err %v, stored %d, repeated %d; want nothing told", ours, err, len(stored), len(repeated))
	}
}
