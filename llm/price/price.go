package price

import (
	_ "embed"
	"errors"
	"fmt"
	"math"
	"os"
	"regexp"
	"sort"
	"strings"

	"github.com/go-json-experiment/json"

	"github.com/llmpipeline/pipeline/heal"
)

// SimSpec is the model spec of the built-in simulator, priced at 0.
const SimSpec = "sim"

//go:embed builtin.json
var builtinJSON []byte

// Price is what one model costs, in US dollars per million tokens.
type Price struct {
	InputPerMTok  float64 `json:"input_per_mtok"`
	OutputPerMTok float64 `json:"output_per_mtok"`
	// CachedInputPerMTok prices the prompt tokens read from the provider's
	// cache; nil: the input price.
	CachedInputPerMTok *float64 `json:"cached_input_per_mtok,omitempty"`
	// CacheWriteInputPerMTok prices the prompt tokens written to the
	// provider's cache (Anthropic bills them at 1.25 times the input
	// price); nil: the input price.
	CacheWriteInputPerMTok *float64 `json:"cache_write_input_per_mtok,omitempty"`
	// BatchDiscount is the share taken off by the provider's batch API
	// (0.5: half price); nil: none.
	BatchDiscount *float64 `json:"batch_discount,omitempty"`
}

// Cost is the price of one call with usage u, in US dollars.
func (p Price) Cost(u model.Usage) float64 {
	prompt := max(u.PromptTokens, 0)
	cached := min(max(u.CachedTokens, 0), prompt)
	written := min(max(u.CacheWriteTokens, 0), prompt-cached)
	cachedRate, writeRate := p.InputPerMTok, p.InputPerMTok
	if p.CachedInputPerMTok != nil {
		cachedRate = *p.CachedInputPerMTok
	}
	if p.CacheWriteInputPerMTok != nil {
		writeRate = *p.CacheWriteInputPerMTok
	}
	usd := float64(prompt-cached-written)*p.InputPerMTok +
		float64(cached)*cachedRate +
		float64(written)*writeRate +
		float64(u.CompletionTokens)*p.OutputPerMTok
	return usd / 1e6
}

// BatchCost is the price of one call made through the provider's batch
// API: Cost less the batch discount.
func (p Price) BatchCost(u model.Usage) float64 {
	c := p.Cost(u)
	if p.BatchDiscount != nil {
		c *= 1 - *p.BatchDiscount
	}
	return c
}

// Table maps model specs to prices. It is read-only once built and safe
// for concurrent use.
type Table struct {
	// Source says where the prices come from: the file's path, or
	// "built-in".
	Source string
	// ReadAt is when the built-in prices were read (YYYY-MM-DD); empty for
	// a file.
	ReadAt string
	prices map[string]Price
}

// Builtin returns the table built into the binary.
func Builtin() *Table {
	var doc struct {
		ReadAt string           `json:"read_at"`
		Source string           `json:"source"`
		Prices map[string]Price `json:"prices"`
	}
	if err := json.Unmarshal(builtinJSON, &doc); err != nil {
		// The file is embedded and checked by the package's tests.
		panic(fmt.Sprintf("price: the built-in table does not decode: %v", err))
	}
	return &Table{Source: "built-in", ReadAt: doc.ReadAt, prices: doc.Prices}
}

// Load reads a price file: a JSON object keyed by model spec, each value
// {"input_per_mtok", "output_per_mtok", "cached_input_per_mtok"
// (optional), "batch_discount" (optional)}.
func Load(path string) (*Table, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("reading prices: %w", err)
	}
	t, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("prices %s: %w", path, err)
	}
	t.Source = path
	return t, nil
}

// entry is a price as a file spells it: the required fields as pointers,
// so that a missing one is told from a 0.
type entry struct {
	Input         *float64 `json:"input_per_mtok"`
	Output        *float64 `json:"output_per_mtok"`
	CachedInput   *float64 `json:"cached_input_per_mtok"`
	BatchDiscount *float64 `json:"batch_discount"`
}

// Parse reads the JSON of a price file (see Load). Every error names the
// model spec and the field.
func Parse(data []byte) (*Table, error) {
	var raw map[string]entry
	if err := json.Unmarshal(data, &raw, json.RejectUnknownMembers(true)); err != nil {
		return nil, fmt.Errorf("not a JSON object of model spec -> {input_per_mtok, output_per_mtok, cached_input_per_mtok, batch_discount}: %w", err)
	}
	t := &Table{prices: make(map[string]Price, len(raw))}
	specs := make([]string, 0, len(raw))
	for spec := range raw {
		specs = append(specs, spec)
	}
	sort.Strings(specs)
	var errs []error
	for _, spec := range specs {
		e := raw[spec]
		if !strings.Contains(spec, ":") && spec != SimSpec {
			errs = append(errs, fmt.Errorf("%q: a model spec is provider:model (openai:gpt-4o-mini)", spec))
			continue
		}
		bad := func(field string, v *float64, required bool, most float64) {
			switch {
			case v == nil && required:
				errs = append(errs, fmt.Errorf("%q: %s is required", spec, field))
			case v != nil && (math.IsNaN(*v) || math.IsInf(*v, 0) || *v < 0 || *v > most):
				errs = append(errs, fmt.Errorf("%q: %s must be a number from 0 to %g, got %v", spec, field, most, *v))
			}
		}
		bad("input_per_mtok", e.Input, true, math.MaxFloat64)
		bad("output_per_mtok", e.Output, true, math.MaxFloat64)
		bad("cached_input_per_mtok", e.CachedInput, false, math.MaxFloat64)
		bad("batch_discount", e.BatchDiscount, false, 1)
		if e.Input == nil || e.Output == nil {
			continue
		}
		t.prices[spec] = Price{InputPerMTok: *e.Input, OutputPerMTok: *e.Output, CachedInputPerMTok: e.CachedInput, BatchDiscount: e.BatchDiscount}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return t, nil
}

// snapshot matches what providers append to a model name for a dated
// snapshot of it: -2024-07-18, -20250929, -latest.
var snapshot = regexp.MustCompile(`^-(\d{4}-\d{2}-\d{2}|\d{8}|latest)$`)

// Lookup returns the price of a model spec: its own entry, else the entry
// of the model it is a dated snapshot of ("openai:gpt-4o-mini-2024-07-18"
// is priced as "openai:gpt-4o-mini"). The simulator costs 0. false: the
// model is priced nowhere.
func (t *Table) Lookup(spec string) (Price, bool) {
	if spec == SimSpec {
		return Price{}, true
	}
	if t == nil {
		return Price{}, false
	}
	if p, ok := t.prices[spec]; ok {
		return p, true
	}
	best := ""
	for k := range t.prices {
		if len(k) > len(best) && strings.HasPrefix(spec, k) && snapshot.MatchString(spec[len(k):]) {
			best = k
		}
	}
	if best == "" {
		return Price{}, false
	}
	return t.prices[best], true
}

// Cost is the price of one call of the model spec with usage u; false
// when the model is priced nowhere (the cost is then 0, and unknown).
func (t *Table) Cost(spec string, u model.Usage) (float64, bool) {
	p, ok := t.Lookup(spec)
	if !ok {
		return 0, false
	}
	return p.Cost(u), true
}

// BatchCost is the price of one call of the model spec made through the
// provider's batch API (Price.BatchCost); false when the model is priced
// nowhere.
func (t *Table) BatchCost(spec string, u model.Usage) (float64, bool) {
	p, ok := t.Lookup(spec)
	if !ok {
		return 0, false
	}
	return p.BatchCost(u), true
}

// Len is the number of models priced.
func (t *Table) Len() int { return len(t.prices) }
