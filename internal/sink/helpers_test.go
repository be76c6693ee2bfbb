package sink

import (
	"context"
	"sort"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/brokertest"
)

func TestMain(m *testing.M) { brokertest.VerifyTestMain(m) }

// newConn starts an embedded server in a fresh data dir.
func newConn(t testing.TB, mods ...func(*broker.Config)) *broker.Conn {
	t.Helper()
	return brokertest.NewConn(t, mods...)
}

// readAll reads every message of a stream.
func readAll(t testing.TB, c *broker.Conn, stream, filter string) []Msg {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	var out []Msg
	if err := ReadStream(ctx, c, stream, filter, func(m Msg) error {
		out = append(out, m)
		return nil
	}); err != nil {
		t.Fatalf("ReadStream(%s, %q): %v", stream, filter, err)
	}
	return out
}

func msgIDs(msgs []Msg) []string {
	ids := make([]string, len(msgs))
	for i, m := range msgs {
		ids[i] = m.MsgID
	}
	sort.Strings(ids)
	return ids
}
