package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/urfave/cli/v2"

	"github.com/llmpipeline/pipeline/batch"
	"github.com/llmpipeline/pipeline/heal"
	"github.com/llmpipeline/pipeline/internal/app"
	"github.com/llmpipeline/pipeline/llm"
	"github.com/llmpipeline/pipeline/llm/price"
	"github.com/llmpipeline/pipeline/worker"
)

// costFlags are the flags of prices and fallback models (run and demo).
func costFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "prices", EnvVars: []string{"PIPELINE_PRICES"},
			Usage: `price file: a JSON object keyed by model spec, {"openai:gpt-4o-mini": {"input_per_mtok": 0.15, "output_per_mtok": 0.6, "cached_input_per_mtok": 0.075, "batch_discount": 0.5}} (US dollars per million tokens; the last two optional). Default: the built-in table (its date in the README; it may be out of date). A model priced nowhere counts tokens, its cost unknown`},
		&cli.StringSliceFlag{Name: "fallback-model",
			Usage: "a model spec to continue a job with when the models before it fail: their attempts end in a healable failure (exhausted, no_progress), or the model is unavailable (breaker open, transport failure, request error such as a context window exceeded). Repeatable, tried in order; --llm-url applies only to the provider of --model"},
		&cli.IntFlag{Name: "fallback-attempts", Value: 1, Usage: "model calls per job of each fallback model, at most (--max-attempts counts the primary's)"},
	}
}

// budgetFlags are the flags of the run's spending limits.
func budgetFlags() []cli.Flag {
	return []cli.Flag{
		&cli.Float64Flag{Name: "budget-usd", Usage: "stop once the run's spend reaches this many US dollars (priced by --prices): no job is fetched any more, the jobs in flight finish and are stored, the rest stay queued for the next run; exit 5 (0: no limit)"},
		&cli.Int64Flag{Name: "budget-tokens", Usage: "the same as --budget-usd, counted in tokens (prompt plus completion, every answered call; 0: no limit)"},
	}
}

// chain is the run's models as the heal loop and the workers use them:
// each one metered (its answered calls priced, added to the budget and
// the cost metric), and the gate that lets the workers fetch while any
// model of the chain can take a call.
type chain struct {
	primary   heal.Model
	fallbacks []heal.Fallback
	gate      func(context.Context) error
	table     *price.Table
	budget    *worker.Budget
	// limited are the fallbacks whose rate limiter the fleet shares, as
	// the primary's.
	limited []builtModel
}

// buildChain prices the primary model (built by buildModel) and builds
// and prices the fallbacks of --fallback-model.
func (e *env) buildChain(c *cli.Context, log *slog.Logger, metrics *worker.Metrics, status *app.Status, primary heal.Model, spec string, breaker *llm.Breaker) (*chain, error) {
	table := price.Builtin()
	if p := c.String("prices"); p != "" {
		t, err := price.Load(p)
		if err != nil {
			return nil, fail(exitUsage, "--prices: %w", err)
		}
		table = t
	}
	budget, err := worker.NewBudget(c.Float64("budget-usd"), c.Int64("budget-tokens"))
	if err != nil {
		return nil, fail(exitUsage, "--budget-usd/--budget-tokens: %w", err)
	}
	if n := c.Int("fallback-attempts"); n < 1 {
		return nil, fail(exitUsage, "--fallback-attempts must be at least 1, got %d", n)
	}
	ch := &chain{table: table, budget: budget}
	meter := func(m heal.Model, spec string) heal.Model {
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
			if c.Float64("budget-usd") > 0 {
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
		ch.primary = r
	} else {
		ch.primary = meter(primary, spec)
	}
	var gates []func(context.Context) error
	if breaker != nil {
		gates = append(gates, breaker.Wait)
	} else {
		gates = append(gates, nil)
	}
	seen := map[string]bool{spec: true}
	for _, fs := range c.StringSlice("fallback-model") {
		if seen[fs] {
			return nil, fail(exitUsage, "--fallback-model %q: the model is already in the chain", fs)
		}
		seen[fs] = true
		fb, err := e.buildModelSpec(c, fs, log, metrics, status)
		if err != nil {
			var ee *exitError
			if errors.As(err, &ee) {
				return nil, fail(ee.Code, "--fallback-model: %w", ee.Err)
			}
			return nil, fmt.Errorf("--fallback-model: %w", err)
		}
		ch.fallbacks = append(ch.fallbacks, heal.Fallback{Name: fb.name, Model: meter(fb.model, fb.name), Attempts: c.Int("fallback-attempts")})
		if fb.limiter != nil {
			ch.limited = append(ch.limited, fb)
		}
		if fb.breaker != nil {
			gates = append(gates, fb.breaker.Wait)
		} else {
			gates = append(gates, nil)
		}
	}
	ch.gate = worker.AnyGate(gates...)
	return ch, nil
}

// batchPaid adds one answer read from a provider batch to the budget and
// the cost metric, priced with the model's batch discount.
func (ch *chain) batchPaid(metrics *worker.Metrics, spec string) func(heal.Usage) {
	provider, _, _ := llm.Parse(spec)
	return func(u heal.Usage) {
		c, ok := ch.table.BatchCost(spec, u)
		ch.budget.Add(c, u.Total())
		if ok {
			metrics.Paid(provider, spec, c)
		}
	}
}

// budgetExit turns the workers' stop at the budget into exit 5.
func budgetExit(err error) error {
	var be *worker.BudgetError
	if !errors.As(err, &be) {
		return nil
	}
	return &exitError{Code: exitBudget, Err: fmt.Errorf("%w; the jobs not started stay queued for the next run", be)}
}
