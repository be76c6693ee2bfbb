// Package app assembles what `pipeline run` runs, for the CLI, the bench
// (scripts/benchrun) and the tests alike: the model stack (provider, rate
// limiter, circuit breaker, meter, fallbacks) from the typed configuration,
// budgets and prices, the batch runner, the metrics and their collectors,
// the checking of job files for submit, and the run's progress state.
// cmd/pipeline parses flags into a config.Config, calls this package and
// prints.
package app
