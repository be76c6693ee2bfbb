package heal

import (
	"errors"
	"fmt"
	"log/slog"
	"math"

	"github.com/llmpipeline/pipeline/model"
)

// History says how much of the failed attempts a heal request carries.
type History string

const (
	// HistoryLatest carries only the latest failed output and its
	// diagnostics (the default): the conversation stays bounded.
	HistoryLatest History = "latest"
	// HistoryAll carries every failed output and its diagnostics.
	HistoryAll History = "all"
)

// Defaults applied to zero Config fields.
const (
	DefaultMaxAttempts    = 2
	DefaultMaxDiagnostics = 20
)

// Config configures a Loop. The zero value is usable: two attempts at
// temperature 0, latest history, 20 diagnostics per heal turn.
type Config struct {
	// MaxAttempts is the number of model calls per job that may return an
	// answer (transport retries inside the Model never count). 0 means
	// DefaultMaxAttempts; a negative value is refused by New.
	MaxAttempts int
	// Temperature is the temperature of attempt 1 (the CLI passes 0.7).
	Temperature float64
	// TemperatureStep is subtracted per further attempt (CLI: 0.2).
	TemperatureStep float64
	// TemperatureFloor is the lowest temperature used (CLI: 0.1).
	TemperatureFloor float64
	// MaxTokens caps each answer; 0 leaves the provider's default.
	MaxTokens int
	// History is HistoryLatest ("" means it) or HistoryAll.
	History History
	// MaxDiagnostics caps the diagnostics per attempt (0 means 20); the rest
	// are counted.
	MaxDiagnostics int
	// Logger receives one debug line per attempt (never the payloads); nil
	// discards.
	Logger *slog.Logger
	// Model is the spec of the primary model ("openai:gpt-4o-mini"),
	// recorded on each attempt it answered.
	Model string
	// Fallbacks are the models a job moves on to, in order, when the
	// models before them could not give a valid answer: their attempts
	// ended in a healable failure (exhausted, no_progress), or the model
	// was unavailable (a transport failure, its circuit breaker open, or a
	// request error such as a context window exceeded). The conversation
	// continues as it stands. MaxAttempts counts the primary's attempts;
	// each fallback has its own.
	Fallbacks []Fallback
}

// Fallback is one model of the fallback chain.
type Fallback struct {
	// Name is the model's spec, recorded on each attempt it answered.
	Name  string
	Model model.Model
	// Attempts is its number of calls per job that may return an answer
	// (0 means 1).
	Attempts int
}

// TemperatureFor is the temperature of attempt n (from 1):
// max(floor, start - (n-1)*step), rounded to 6 decimals so that 0.7-0.2
// reads 0.5 in traces.
func (c Config) TemperatureFor(n int) float64 {
	if n < 1 {
		n = 1
	}
	t := c.Temperature - float64(n-1)*c.TemperatureStep
	t = math.Round(t*1e6) / 1e6
	return math.Max(c.TemperatureFloor, t)
}

func (c Config) withDefaults() Config {
	if c.MaxAttempts == 0 {
		c.MaxAttempts = DefaultMaxAttempts
	}
	if c.History == "" {
		c.History = HistoryLatest
	}
	if c.MaxDiagnostics == 0 {
		c.MaxDiagnostics = DefaultMaxDiagnostics
	}
	if c.Logger == nil {
		c.Logger = slog.New(slog.DiscardHandler)
	}
	fbs := make([]Fallback, len(c.Fallbacks))
	for i, f := range c.Fallbacks {
		if f.Attempts == 0 {
			f.Attempts = 1
		}
		fbs[i] = f
	}
	c.Fallbacks = fbs
	return c
}

// validate names the first bad field.
func (c Config) validate() error {
	var errs []error
	if c.MaxAttempts < 0 {
		errs = append(errs, fmt.Errorf("MaxAttempts must be >= 1, got %d", c.MaxAttempts))
	}
	for _, f := range []struct {
		name string
		v    float64
	}{{"Temperature", c.Temperature}, {"TemperatureStep", c.TemperatureStep}, {"TemperatureFloor", c.TemperatureFloor}} {
		if math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v < 0 {
			errs = append(errs, fmt.Errorf("%s must be a number >= 0, got %v", f.name, f.v))
		}
	}
	if c.MaxTokens < 0 {
		errs = append(errs, fmt.Errorf("MaxTokens must be >= 0, got %d", c.MaxTokens))
	}
	if c.MaxDiagnostics < 0 {
		errs = append(errs, fmt.Errorf("MaxDiagnostics must be >= 0, got %d", c.MaxDiagnostics))
	}
	for i, f := range c.Fallbacks {
		if f.Model == nil {
			errs = append(errs, fmt.Errorf("fallback %d (%s): the model is nil", i, f.Name))
		}
		if f.Attempts < 0 {
			errs = append(errs, fmt.Errorf("fallback %d (%s): attempts must be >= 1, got %d", i, f.Name, f.Attempts))
		}
	}
	switch c.History {
	case "", HistoryLatest, HistoryAll:
	default:
		errs = append(errs, fmt.Errorf("History must be %q or %q, got %q", HistoryLatest, HistoryAll, c.History))
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("invalid heal config: %w", err)
	}
	return nil
}
