package broker_test

// Helpers of the tests that need the queue above the broker: jobs submitted
// through one connection and counted through another.

import (
	"testing"

	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/brokertest"
)

func newConn(t testing.TB, mods ...func(*broker.Config)) *broker.Conn {
	t.Helper()
	return brokertest.NewConn(t, mods...)
}
