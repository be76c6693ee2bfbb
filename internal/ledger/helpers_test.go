package ledger_test

// Helpers of the ledger's tests, which run the queue above the ledger to
// record runs the way the workers do.

import (
	"testing"

	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/brokertest"
)

func TestMain(m *testing.M) { brokertest.VerifyTestMain(m) }

// newConn starts an embedded server in a fresh data dir.
func newConn(t testing.TB, mods ...func(*broker.Config)) *broker.Conn {
	t.Helper()
	return brokertest.NewConn(t, mods...)
}
