package app

import (
	"context"
	"errors"
	"fmt"

	"github.com/llmpipeline/pipeline/batch"
	"github.com/llmpipeline/pipeline/heal"
	"github.com/llmpipeline/pipeline/internal/config"
	"github.com/llmpipeline/pipeline/internal/exit"
	"github.com/llmpipeline/pipeline/llm"
	"github.com/llmpipeline/pipeline/llm/price"
	"github.com/llmpipeline/pipeline/model"
	"github.com/llmpipeline/pipeline/worker"
)

// Chain is the run's models as the heal loop and the workers use them:
// each one metered (its answered calls priced, added to the budget and
// the cost metric), and the gate that lets the workers fetch while any
// model of the chain can take a call.
type Chain struct {
	Primary   model.Model
	Fallbacks []heal.Fallback
	Gate      func(context.Context) error
	Table     *price.Table
	Budget    *worker.Budget
	// Limited are the fallbacks whose rate limiter the fleet shares, as
	// the primary's.
	Limited []BuiltModel
}

// BuildChain prices the primary model (built by BuildModel) with --prices
// and builds and prices the fallbacks of --fallback-model: every model
// metered, its spending added to the run's budget.
func BuildChain(cfg *config.Config, d Deps, primary model.Model, spec string, breaker *llm.Breaker) (*Chain, error) {
	log, metrics := d.Log, d.Metrics
	table := price.Builtin()
	if p := cfg.Budget.Prices; p != "" {
		t, err := price.Load(p)
		if err != nil {
			return nil, exit.Fail(exit.Usage, "--prices: %w", err)
		}
		table = t
	}
	budget, err := worker.NewBudget(cfg.Budget.USD, cfg.Budget.Tokens)
	if err != nil {
		return nil, exit.Fail(exit.Usage, "--budget-usd/--budget-tokens: %w", err)
	}
	if n := cfg.Budget.FallbackAttempts; n < 1 {
		return nil, exit.Fail(exit.Usage, "--fallback-attempts must be at least 1, got %d", n)
	}
	ch := &Chain{Table: table, Budget: budget}
	meter := func(m model.Model, spec string) model.Model {
		provider, _, _ := llm.Parse(spec)
		mt := price.NewMeter(m, spec, table, func(p price.Paid) {
			budget.Add(p.CostUSD, p.Usage.Total())
			if p.Priced {
				metrics.Paid(provider, p.Model, p.CostUSD)
			}
		})
		if !mt.Priced() {
			// Said once, here: the run goes on counting the model's tokens.
			log.Warn("no price for this model: its tokens are counted, its cost is unknown (give it in a --prices file)",
				"model", spec, "prices", table.Source)
			if cfg.Budget.USD > 0 {
				log.Warn("--budget-usd does not count the calls of a model priced nowhere; --budget-tokens does", "model", spec)
			}
		}
		return mt
	}
	if r, ok := primary.(*batch.Replay); ok {
		// Batch mode: only the calls the Replay sends synchronously are
		// metered here; the batches' answers are paid once, as they are
		// read (batchPaid), not at every replay of the loop.
		r.Sync = meter(r.Sync, spec)
		ch.Primary = r
	} else {
		ch.Primary = meter(primary, spec)
	}
	var gates []func(context.Context) error
	if breaker != nil {
		gates = append(gates, breaker.Wait)
	} else {
		gates = append(gates, nil)
	}
	seen := map[string]bool{spec: true}
	for _, fs := range cfg.Budget.FallbackModels {
		if seen[fs] {
			return nil, exit.Fail(exit.Usage, "--fallback-model %q: the model is already in the chain", fs)
		}
		seen[fs] = true
		fb, err := BuildModel(cfg, fs, d)
		if err != nil {
			var ee *exit.Error
			if errors.As(err, &ee) {
				return nil, exit.Fail(ee.Code, "--fallback-model: %w", ee.Err)
			}
			return nil, fmt.Errorf("--fallback-model: %w", err)
		}
		ch.Fallbacks = append(ch.Fallbacks, heal.Fallback{Name: fb.Name, Model: meter(fb.Model, fb.Name), Attempts: cfg.Budget.FallbackAttempts})
		if fb.Limiter != nil {
			ch.Limited = append(ch.Limited, fb)
		}
		if fb.Breaker != nil {
			gates = append(gates, fb.Breaker.Wait)
		} else {
			gates = append(gates, nil)
		}
	}
	ch.Gate = worker.AnyGate(gates...)
	return ch, nil
}

// BatchPaid adds one answer read from a provider batch to the budget and
// the cost metric, priced with the model's batch discount.
func (ch *Chain) BatchPaid(metrics *worker.Metrics, spec string) func(model.Usage) {
	provider, _, _ := llm.Parse(spec)
	return func(u model.Usage) {
		c, ok := ch.Table.BatchCost(spec, u)
		ch.Budget.Add(c, u.Total())
		if ok {
			metrics.Paid(provider, spec, c)
		}
	}
}

// BudgetExit turns the workers' stop at the budget into exit 5.
func BudgetExit(err error) error {
	var be *worker.BudgetError
	if !errors.As(err, &be) {
		return nil
	}
	return &exit.Error{Code: exit.Budget, Err: fmt.Errorf("%w; the jobs not started stay queued for the next run", be)}
}
