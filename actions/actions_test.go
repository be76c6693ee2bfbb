package actions_test

import (
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/llmpipeline/pipeline/actions"
	"github.com/llmpipeline/pipeline/index"
)

func TestEmptyFilterIsRefused(t *testing.T) {
	ctx := t.Context()
	st, err := index.Open(filepath.Join(t.TempDir(), "pipeline.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	now := time.Now().UTC()
	dead := job.Outcome{JobID: "a", Schema: "s", SchemaVersion: "v", Status: job.StatusDeadLettered, Class: "exhausted",
		Job: []byte(`{"id":"a","schema":"s","input":"x"}`), StartedAt: now, FinishedAt: now}
	if err := st.Write(ctx, []job.Outcome{dead}); err != nil {
		t.Fatal(err)
	}
	if _, err := actions.Select(ctx, st, index.Filter{Limit: 5, IncludeReplayed: true}); !errors.Is(err, actions.ErrNoFilter) {
		t.Errorf("Select with no filter: %v, want ErrNoFilter", err)
	}
	if _, err := actions.Purge(ctx, st, index.Filter{}, false, false); !errors.Is(err, actions.ErrNoFilter) {
		t.Errorf("Purge with no filter: %v, want ErrNoFilter", err)
	}
	if es, _ := st.List(ctx, index.Filter{}); len(es) != 1 {
		t.Fatalf("a refused purge deleted: %d left", len(es))
	}
	got, err := actions.Select(ctx, st, index.Filter{Class: "exhausted"})
	if err != nil || len(got) != 1 || got[0].JobID != "a" {
		t.Errorf("Select by class: %v, %v", got, err)
	}
	ids, err := actions.Purge(ctx, st, index.Filter{}, false, true)
	if err != nil || len(ids) != 1 {
		t.Errorf("Purge with all: %v, %v", ids, err)
	}
	if es, _ := st.List(ctx, index.Filter{}); len(es) != 0 {
		t.Errorf("%d dead letters left after purging all", len(es))
	}
}
