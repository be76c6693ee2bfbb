package report

import (
	"context"
	"fmt"

	"github.com/llmpipeline/pipeline/index"
)

// Funnels is the report without its clusters: the heal funnel of every
// schema version over every run in the index (runs a replay superseded
// included: what was tried and paid for), and their totals. It reads the
// funnel rows and the replayed, healed counts only, so it costs a fraction
// of Build; the console's overview shows it.
func Funnels(ctx context.Context, s *index.Store) (map[string]*Funnel, Totals, error) {
	a := s.Analytics()
	rows, err := a.Funnel(ctx, index.Filter{})
	if err != nil {
		return nil, Totals{}, fmt.Errorf("building the funnel: %w", err)
	}
	healed, err := a.ReplayHealed(ctx, index.Filter{})
	if err != nil {
		return nil, Totals{}, fmt.Errorf("building the funnel: %w", err)
	}
	r := &Report{Versions: map[string][]string{}, Funnel: funnel(rows, healed)}
	r.cover(rows)
	evals, err := Evals(ctx, s, "")
	if err != nil {
		return nil, Totals{}, fmt.Errorf("building the funnel: %w", err)
	}
	attachEvals(r.Funnel, evals)
	return r.Funnel, r.Totals, nil
}
