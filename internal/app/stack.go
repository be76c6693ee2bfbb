package app

import (
	"log/slog"

	"github.com/llmpipeline/pipeline/batch"
	"github.com/llmpipeline/pipeline/heal"
	"github.com/llmpipeline/pipeline/internal/config"
	"github.com/llmpipeline/pipeline/internal/exit"
	"github.com/llmpipeline/pipeline/internal/queue"
	"github.com/llmpipeline/pipeline/internal/secret"
	"github.com/llmpipeline/pipeline/llm"
	"github.com/llmpipeline/pipeline/schemas"
	"github.com/llmpipeline/pipeline/worker"
)

// Stack is what `run` runs the jobs through: the model of --model
// (provider, rate limiter, circuit breaker), the chain that meters it and
// its fallbacks against the budget, and the worker's handler around the
// heal loop. The bench (scripts/benchrun) builds the same.
type Stack struct {
	Model   BuiltModel
	Chain   *Chain
	Loop    *heal.Loop
	Handler *worker.Handler
}

// BuildStack builds the stack of cfg over the schemas of reg: the model
// of --model (BuildModel), then BuildStackOn.
func BuildStack(cfg *config.Config, reg *schemas.Registry, d Deps, secrets *secret.Redactor) (*Stack, error) {
	bm, err := BuildModel(cfg, cfg.Model.Spec, d)
	if err != nil {
		return nil, err
	}
	return BuildStackOn(cfg, reg, d, secrets, bm)
}

// BuildStackOn builds the stack of cfg on a model already built (the
// bench's canned model): in batch mode through the provider's batches,
// metered with its fallbacks (BuildChain), in the heal loop of the heal
// settings, in the worker's handler with the run's prices and budget.
func BuildStackOn(cfg *config.Config, reg *schemas.Registry, d Deps, secrets *secret.Redactor, bm BuiltModel) (*Stack, error) {
	model, name := bm.Model, bm.Name
	if cfg.Batch.Enabled {
		model = &batch.Replay{Sync: model} // attempts go through provider batches (ServeBatch)
	}
	chain, err := BuildChain(cfg, d, model, name, bm.Breaker)
	if err != nil {
		return nil, err
	}
	if cfg.Batch.Enabled && cfg.Model.ResponseFormat == llm.FormatJSONSchema {
		// The batches' answers are replayed, not read by the client with
		// their request: they are mapped back from the strict schema here.
		chain.Primary = llm.StrictAnswers(chain.Primary, bm.Provider)
	}
	loop, err := heal.New(chain.Primary, heal.Config{
		MaxAttempts:      cfg.Heal.MaxAttempts,
		Temperature:      cfg.Heal.Temperature,
		TemperatureStep:  cfg.Heal.TemperatureStep,
		TemperatureFloor: cfg.Heal.TemperatureFloor,
		MaxTokens:        cfg.Model.MaxTokens,
		History:          heal.History(cfg.Heal.History),
		MaxDiagnostics:   cfg.Heal.MaxDiagnostics,
		Logger:           d.Log,
		Model:            name,
		Fallbacks:        chain.Fallbacks,
	})
	if err != nil {
		return nil, exit.Fail(exit.Usage, "%w", err)
	}
	h, err := worker.New(worker.Config{Schemas: reg, Loop: loop, Model: name, Metrics: d.Metrics, Logger: d.Log, Secrets: secrets,
		Cost: chain.Table.Cost, BatchCost: chain.Table.BatchCost, Budget: chain.Budget})
	if err != nil {
		return nil, err
	}
	return &Stack{Model: bm, Chain: chain, Loop: loop, Handler: h}, nil
}

// ServeConfig is the workers' configuration of cfg over the stack: the
// run's and the bench's, which add their hooks, store and metrics.
func (s *Stack) ServeConfig(cfg *config.Config, log *slog.Logger) (worker.ServeConfig, error) {
	jobLimit, err := MaxJobBytes(cfg)
	if err != nil {
		return worker.ServeConfig{}, err
	}
	return worker.ServeConfig{
		Workers: queue.WorkerConfig{
			Concurrency:   cfg.Workers.Concurrency,
			AckWait:       AckWait(cfg.Workers.AckWait, cfg.Model.RequestTimeout),
			MaxDeliver:    cfg.Workers.MaxDeliver,
			ShutdownGrace: cfg.Workers.ShutdownGrace,
			UntilIdle:     cfg.Workers.UntilIdle,
			MaxJobBytes:   jobLimit,
			// The breakers': fetch while any model of the chain takes calls.
			Gate:      s.Chain.Gate,
			Documents: s.Handler.Documents(),
			Logger:    log,
		},
		NoWorkers:     cfg.Workers.Concurrency == 0,
		RetainMaxAge:  cfg.Store.MaxAge,
		RetainMaxRows: cfg.Store.MaxRows,
		Budget:        s.Chain.Budget,
		Logger:        log,
	}, nil
}
