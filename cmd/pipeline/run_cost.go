package main

import (
	"github.com/urfave/cli/v2"
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
