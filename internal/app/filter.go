package app

import (
	"strings"
	"time"

	"github.com/llmpipeline/pipeline/index"
	"github.com/llmpipeline/pipeline/internal/config"
	"github.com/llmpipeline/pipeline/internal/exit"
	"github.com/llmpipeline/pipeline/job"
)

// Filter is the dlq filter of the filter flags: --since and --until read
// as times (RFC 3339, a date, or a duration ago).
func Filter(f config.Filter) (index.Filter, error) {
	now := time.Now()
	since, err := index.ParseTime(f.Since, now)
	if err != nil {
		return index.Filter{}, exit.Fail(exit.Usage, "--since: %w", err)
	}
	until, err := index.ParseTime(f.Until, now)
	if err != nil {
		return index.Filter{}, exit.Fail(exit.Usage, "--until: %w", err)
	}
	return index.Filter{
		Schema: f.Schema, Class: job.Class(f.Class), Path: f.Path,
		Cluster: f.Cluster, Model: f.Model,
		Since: since, Until: until, Limit: f.Limit,
	}, nil
}

// ReplayMatched refuses (exit 1) a replay whose filter matched no dead
// letter, or whose job ids name jobs that have none to replay, saying which.
func ReplayMatched(f index.Filter, entries []index.Entry) error {
	if len(f.IDs) > 0 {
		found := make(map[string]bool, len(entries))
		for _, en := range entries {
			found[en.JobID] = true
		}
		var missing []string
		for _, id := range f.IDs {
			if !found[id] {
				missing = append(missing, id)
			}
		}
		if len(missing) > 0 {
			return exit.Fail(exit.Negative, "no dead letter to replay for job id(s) %s (not in the index, already replayed, or outside the other filters)", strings.Join(missing, ", "))
		}
	}
	if len(entries) == 0 {
		return exit.Fail(exit.Negative, "no dead letter matches %s (already replayed ones are left out; see 'pipeline dlq list --replayed')", describeFilter(f))
	}
	return nil
}

// describeFilter names the filter flags set, as a user typed them.
func describeFilter(f index.Filter) string {
	var parts []string
	add := func(flag, v string) {
		if v != "" {
			parts = append(parts, "--"+flag+" "+v)
		}
	}
	add("schema", f.Schema)
	add("class", string(f.Class))
	add("path", f.Path)
	add("cluster", f.Cluster)
	add("model", f.Model)
	if !f.Since.IsZero() {
		add("since", f.Since.Format(time.RFC3339))
	}
	if !f.Until.IsZero() {
		add("until", f.Until.Format(time.RFC3339))
	}
	if len(parts) == 0 {
		return "the filter"
	}
	return strings.Join(parts, " ")
}
