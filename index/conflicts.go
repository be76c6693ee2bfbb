package index

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/llmpipeline/pipeline/report/cluster"
)

// ConflictCount is how often long documents' chunks disagreed on one field
// of one schema: Documents counts the document runs with a conflict there,
// Values the values given in all (the kept ones included).
type ConflictCount struct {
	Schema    string `json:"schema"`
	Path      string `json:"path"` // array indices as *
	Documents int    `json:"documents"`
	Values    int    `json:"values"`
}

// ConflictCounts counts the conflicts of the outcomes f selects, by schema
// and field path (array indices as *), most documents first.
func (s *Store) ConflictCounts(ctx context.Context, f Filter) ([]ConflictCount, error) {
	where, args := f.where(false)
	rows, err := s.r.QueryContext(ctx, `SELECT o.schema_id, c.path, c.chunks FROM conflicts c JOIN outcomes o ON o.id = c.outcome_id`+where, args...)
	if err != nil {
		return nil, fmt.Errorf("counting conflicts: %w", err)
	}
	defer rows.Close()
	type key struct{ schema, path string }
	counts := map[key]*ConflictCount{}
	var order []key
	for rows.Next() {
		var schema, path string
		var n int
		if err := rows.Scan(&schema, &path, &n); err != nil {
			return nil, fmt.Errorf("counting conflicts: %w", err)
		}
		k := key{schema, cluster.PathPattern(path)}
		c, ok := counts[k]
		if !ok {
			c = &ConflictCount{Schema: schema, Path: k.path}
			counts[k] = c
			order = append(order, k)
		}
		c.Documents++
		c.Values += n
	}
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("counting conflicts: %w", err)
	}
	out := make([]ConflictCount, 0, len(order))
	for _, k := range order {
		out = append(out, *counts[k])
	}
	sortConflicts(out)
	return out, nil
}

func sortConflicts(cs []ConflictCount) {
	slices.SortStableFunc(cs, func(a, b ConflictCount) int {
		if a.Documents != b.Documents {
			return b.Documents - a.Documents
		}
		if a.Schema != b.Schema {
			return strings.Compare(a.Schema, b.Schema)
		}
		return strings.Compare(a.Path, b.Path)
	})
}
