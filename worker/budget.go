package worker

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strconv"
	"sync/atomic"
)

// ErrBudget is matched (errors.Is) by the *BudgetError the workers stop
// with once the run's spend reached its budget.
var ErrBudget = errors.New("budget reached")

// Budget is the spend of one process's run against its limits: US dollars
// (by the providers' reported usage and the price table) and tokens
// (prompt plus completion). Every answered model call is added, whatever
// became of its job. Once a limit is reached the workers fetch nothing
// more and start no new job; the jobs in flight finish, with every
// attempt they need, and their outcomes are stored. Safe for concurrent
// use; a nil *Budget is no budget.
type Budget struct {
	usdLimit   float64
	tokenLimit int64
	nanos      atomic.Int64 // spend in billionths of a dollar
	tokens     atomic.Int64
}

// NewBudget returns a budget of usd dollars and tokens tokens; 0 leaves
// that limit off. It returns nil when both are 0.
func NewBudget(usd float64, tokens int64) (*Budget, error) {
	if math.IsNaN(usd) || math.IsInf(usd, 0) || usd < 0 {
		return nil, fmt.Errorf("budget in US dollars must be a number >= 0, got %v", usd)
	}
	if tokens < 0 {
		return nil, fmt.Errorf("budget in tokens must be >= 0, got %d", tokens)
	}
	if usd == 0 && tokens == 0 {
		return nil, nil
	}
	return &Budget{usdLimit: usd, tokenLimit: tokens}, nil
}

// Add counts one answered call: its cost in dollars and its tokens.
func (b *Budget) Add(usd float64, tokens int) {
	if b == nil {
		return
	}
	if usd > 0 {
		b.nanos.Add(int64(math.Round(usd * 1e9)))
	}
	b.tokens.Add(int64(tokens))
}

// Spent returns the dollars and tokens spent so far.
func (b *Budget) Spent() (usd float64, tokens int64) {
	if b == nil {
		return 0, 0
	}
	return float64(b.nanos.Load()) / 1e9, b.tokens.Load()
}

// Err returns a *BudgetError once a limit is reached, nil before.
func (b *Budget) Err() error {
	if b == nil {
		return nil
	}
	usd, tokens := b.Spent()
	switch {
	case b.usdLimit > 0 && usd >= b.usdLimit:
		return &BudgetError{SpentUSD: usd, LimitUSD: b.usdLimit, SpentTokens: tokens, LimitTokens: b.tokenLimit, ByTokens: false}
	case b.tokenLimit > 0 && tokens >= b.tokenLimit:
		return &BudgetError{SpentUSD: usd, LimitUSD: b.usdLimit, SpentTokens: tokens, LimitTokens: b.tokenLimit, ByTokens: true}
	}
	return nil
}

// Reached reports whether a limit is reached.
func (b *Budget) Reached() bool { return b.Err() != nil }

// gate wraps the workers' gate: it refuses to let a fetch happen once the
// budget is reached, before and after waiting on next (which may block
// for a while, a breaker's cool-down).
func (b *Budget) gate(next func(context.Context) error) func(context.Context) error {
	if b == nil {
		return next
	}
	return func(ctx context.Context) error {
		if err := b.Err(); err != nil {
			return err
		}
		if next != nil {
			if err := next(ctx); err != nil {
				return err
			}
		}
		return b.Err()
	}
}

// BudgetError says which limit of a Budget was reached and by how much.
type BudgetError struct {
	SpentUSD, LimitUSD       float64
	SpentTokens, LimitTokens int64
	// ByTokens: the token limit was reached (else the dollar limit).
	ByTokens bool
}

func (e *BudgetError) Error() string {
	if e.ByTokens {
		return fmt.Sprintf("budget reached: %d of %d tokens spent", e.SpentTokens, e.LimitTokens)
	}
	return fmt.Sprintf("budget reached: $%s of $%s spent", Dollars(e.SpentUSD), Dollars(e.LimitUSD))
}

// Is makes errors.Is(err, ErrBudget) hold.
func (e *BudgetError) Is(target error) bool { return target == ErrBudget }

// Dollars formats an amount of US dollars without a trailing run of
// zeros, to the millionth: 0.0042, 12.5, 3.
func Dollars(usd float64) string {
	return strconv.FormatFloat(math.Round(usd*1e6)/1e6, 'f', -1, 64)
}
