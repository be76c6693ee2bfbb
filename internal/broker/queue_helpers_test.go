package broker_test

// Helpers of the tests that need the queue above the broker: jobs submitted
// through one connection and counted through another.

import (
	"context"
	"fmt"
	"testing"

	"github.com/llmpipeline/pipeline/internal/broker"
	"github.com/llmpipeline/pipeline/internal/brokertest"
	"github.com/llmpipeline/pipeline/internal/queue"
)

func newConn(t testing.TB, mods ...func(*broker.Config)) *broker.Conn {
	t.Helper()
	return brokertest.NewConn(t, mods...)
}

func jobItem(id, schema string) queue.SubmitItem {
	return queue.SubmitItem{
		Data:   fmt.Appendf(nil, `{"id":%q,"schema":%q,"input":"text for %s"}`, id, schema, id),
		Schema: schema,
		MsgID:  id,
	}
}

func jobItems(prefix, schema string, n int) []queue.SubmitItem {
	items := make([]queue.SubmitItem, n)
	for i := range items {
		items[i] = jobItem(fmt.Sprintf("%s-%04d", prefix, i), schema)
	}
	return items
}

func submit(t testing.TB, c *broker.Conn, items []queue.SubmitItem) queue.SubmitStats {
	t.Helper()
	st, err := queue.Submit(context.Background(), c, items, nil)
	if err != nil {
		t.Fatalf("Submit: %v", err)
	}
	return st
}
