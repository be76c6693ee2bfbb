package llm

import (
	"testing"

	"go.uber.org/goleak"
)

// No goroutine outlives the tests: clients release their connections on
// Close, the breaker and the simulator start none.
func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}
