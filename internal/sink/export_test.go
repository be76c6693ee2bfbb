package sink

import "testing"

// What the external tests of this package (package sink_test, which runs
// the queue above the sink) use of its internal test helpers.

// MemIndex is memIndex for the external tests.
type MemIndex = memIndex

// NewMemIndex is newMemIndex.
func NewMemIndex(t *testing.T) *MemIndex { return newMemIndex(t) }

// Check is check.
func (x *memIndex) Check(t *testing.T, want []string) { x.check(t, want) }

// Stored are the message ids written, with the times each was.
func (x *memIndex) Stored() map[string]int { return x.stored }

// Offered are the message ids written with a Record (handed over).
func (x *memIndex) Offered() map[string]bool { return x.offered }

// MsgIDs is msgIDs.
func MsgIDs(msgs []Msg) []string { return msgIDs(msgs) }
