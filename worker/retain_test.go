package worker

import (
	"bytes"
	"context"
	"log/slog"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/testutil"

	"github.com/llmpipeline/pipeline/index"
)

// TestRetainOnceWarnsAndMetersBeforeDeleting: retention never trims
// silently. The warning names the counts and the metric counts the dead
// letters, and exactly the planned outcomes go.
func TestRetainOnceWarnsAndMetersBeforeDeleting(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	st, err := index.Open(filepath.Join(t.TempDir(), "pipeline.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })

	now := time.Now()
	var outs []job.Outcome
	for i, age := range []time.Duration{72 * time.Hour, 48 * time.Hour, time.Hour, time.Minute} {
		id := "old-" + string(rune('a'+i))
		if age < 24*time.Hour {
			id = "new-" + string(rune('a'+i))
		}
		outs = append(outs, job.Outcome{
			JobID: id, Schema: "s", SchemaVersion: "v1", Status: job.StatusDeadLettered, Class: "exhausted",
			Reason: "r", Attempts: 1, Job: []byte(`{"id":"` + id + `"}`),
			StartedAt: now.Add(-age), FinishedAt: now.Add(-age),
			Trace: []job.Attempt{{N: 1, Raw: "{}", Class: "schema", Diagnostics: []job.Diagnostic{{Path: "/a", Keyword: "required"}}}},
		})
	}
	if err := st.Write(ctx, outs); err != nil {
		t.Fatal(err)
	}

	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	m := NewMetrics(prometheus.NewRegistry())
	if err := RetainOnce(ctx, st, 24*time.Hour, 0, m, log); err != nil {
		t.Fatal(err)
	}
	if got := testutil.ToFloat64(m.RetentionTrim); got != 2 {
		t.Errorf("retention metric %v, want the 2 dead letters older than a day", got)
	}
	if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), "dead_letters=2") {
		t.Errorf("no warning with the counts before deleting: %q", logs.String())
	}
	left, err := st.List(ctx, index.Filter{})
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 2 {
		t.Fatalf("%d dead letters left, want the 2 recent ones", len(left))
	}
	for _, e := range left {
		if !strings.HasPrefix(e.JobID, "new-") {
			t.Errorf("retention removed a recent dead letter or kept an old one: %s", e.JobID)
		}
	}

	// A second pass has nothing to do: no warning, no count.
	logs.Reset()
	if err := RetainOnce(ctx, st, 24*time.Hour, 0, m, log); err != nil {
		t.Fatal(err)
	}
	if logs.Len() != 0 || testutil.ToFloat64(m.RetentionTrim) != 2 {
		t.Errorf("an empty pass logged %q or counted", logs.String())
	}
}
