// Package price knows what a model call costs: a table of US dollars per
// million tokens keyed by model spec ("openai:gpt-4o-mini"), the cost of
// one call from the usage its provider reported, and a Meter that wraps a
// model.Model and reports every answered call with its cost.
//
// The table comes from a JSON file (Load, the CLI's --prices) or, without
// one, from the table built into the binary (Builtin), whose ReadAt says
// when its prices were read; they may be out of date. The simulated model
// ("sim") is priced at 0. A model the table does not know is not priced:
// its tokens are counted, its cost is unknown (Lookup's false).
//
//	t := price.Builtin()
//	usd, ok := t.Cost("openai:gpt-4o-mini", model.Usage{PromptTokens: 1000, CompletionTokens: 200})
//	m := price.NewMeter(model, "openai:gpt-4o-mini", t, func(p price.Paid) { budget.Add(p.CostUSD, p.Usage.Total()) })
//
// Cost: the prompt tokens not read from the provider's cache at the input
// price, the cached ones at cached_input_per_mtok (the input price when the
// table has none), the completion tokens at the output price. Both
// providers report cached tokens inside the prompt tokens (package llm
// counts Anthropic's cache reads and writes into PromptTokens).
package price
