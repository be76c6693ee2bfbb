package price_test

import (
	"context"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/llmpipeline/pipeline/heal"
	"github.com/llmpipeline/pipeline/llm/price"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-12 }

func TestBuiltinPricesTheCurrentModels(t *testing.T) {
	tb := price.Builtin()
	if tb.ReadAt == "" || tb.Source != "built-in" {
		t.Errorf("built-in table: read_at %q, source %q", tb.ReadAt, tb.Source)
	}
	for _, spec := range []string{"openai:gpt-4o", "openai:gpt-4o-mini", "openai:gpt-4.1", "openai:gpt-4.1-mini",
		"openai:gpt-4.1-nano", "openai:o3", "openai:o4-mini", "openai:gpt-5", "openai:gpt-5-mini",
		"anthropic:claude-sonnet-4-5", "anthropic:claude-opus-4-1", "anthropic:claude-haiku-4-5", "anthropic:claude-3-5-haiku"} {
		p, ok := tb.Lookup(spec)
		if !ok || p.InputPerMTok <= 0 || p.OutputPerMTok <= 0 {
			t.Errorf("%s: %+v, %v; want a price", spec, p, ok)
		}
	}
}

func TestLookup(t *testing.T) {
	tb := price.Builtin()
	cases := []struct {
		spec   string
		want   string // the entry it must be priced as, "" for none
		priced bool
	}{
		{"openai:gpt-4o-mini", "openai:gpt-4o-mini", true},
		{"openai:gpt-4o-mini-2024-07-18", "openai:gpt-4o-mini", true},
		{"anthropic:claude-sonnet-4-5-20250929", "anthropic:claude-sonnet-4-5", true},
		{"anthropic:claude-opus-4-1-20250805", "anthropic:claude-opus-4-1", true},
		{"openai:gpt-4o-audio-preview", "", false}, // not a snapshot of gpt-4o
		{"openai:my-local-model", "", false},
		{"sim", "", true},
	}
	for _, c := range cases {
		t.Run(c.spec, func(t *testing.T) {
			p, ok := tb.Lookup(c.spec)
			if ok != c.priced {
				t.Fatalf("priced %v, want %v", ok, c.priced)
			}
			if c.want != "" {
				w, _ := tb.Lookup(c.want)
				if p.InputPerMTok != w.InputPerMTok || p.OutputPerMTok != w.OutputPerMTok {
					t.Errorf("priced %+v, want the price of %s %+v", p, c.want, w)
				}
			}
			if c.spec == "sim" && (p.InputPerMTok != 0 || p.OutputPerMTok != 0) {
				t.Errorf("sim priced %+v, want 0", p)
			}
		})
	}
}

func TestCost(t *testing.T) {
	tb, err := price.Parse([]byte(`{"openai:m": {"input_per_mtok": 2, "output_per_mtok": 8, "cached_input_per_mtok": 0.5, "batch_discount": 0.5},
		"anthropic:n": {"input_per_mtok": 3, "output_per_mtok": 15}}`))
	if err != nil {
		t.Fatal(err)
	}
	u := model.Usage{PromptTokens: 1_000_000, CompletionTokens: 500_000, CachedTokens: 400_000}
	// 600k uncached at 2 + 400k cached at 0.5 + 500k at 8
	if got, ok := tb.Cost("openai:m", u); !ok || !near(got, 1.2+0.2+4) {
		t.Errorf("openai:m cost %v, %v; want 5.4", got, ok)
	}
	p, _ := tb.Lookup("openai:m")
	if got := p.BatchCost(u); !near(got, 2.7) {
		t.Errorf("batch cost %v, want 2.7", got)
	}
	// no cached price: cached tokens at the input price
	if got, _ := tb.Cost("anthropic:n", u); !near(got, 3+7.5) {
		t.Errorf("anthropic:n cost %v, want 10.5", got)
	}
	if got, ok := tb.Cost("openai:other", u); ok || got != 0 {
		t.Errorf("unpriced model: %v, %v; want 0, false", got, ok)
	}
}

// TestCostOfCacheWrites: Anthropic's cache writes are part of the prompt
// tokens and cost their own price (1.25x the input in the built-in table).
func TestCostOfCacheWrites(t *testing.T) {
	tb := price.Builtin()
	u := model.Usage{PromptTokens: 1_000_000, CachedTokens: 200_000, CacheWriteTokens: 300_000, CompletionTokens: 0}
	// claude-sonnet-4-5: 500k plain at 3 + 200k read at 0.30 + 300k written at 3.75
	want := 1.5 + 0.06 + 1.125
	if got, ok := tb.Cost("anthropic:claude-sonnet-4-5", u); !ok || !near(got, want) {
		t.Errorf("cost %v, %v; want %v", got, ok, want)
	}
	tf, err := price.Parse([]byte(`{"anthropic:n": {"input_per_mtok": 3, "output_per_mtok": 15}}`))
	if err != nil {
		t.Fatal(err)
	}
	// no cache-write price: the writes at the input price
	if got, _ := tf.Cost("anthropic:n", u); !near(got, 2.4+0.6) {
		t.Errorf("cost without a cache-write price %v, want 3.0", got)
	}
}

func TestParseNamesTheBadEntry(t *testing.T) {
	cases := map[string]struct{ in, want string }{
		"not an object":  {`[1]`, "not a JSON object"},
		"unknown field":  {`{"openai:m": {"input_per_mtok": 1, "output_per_mtok": 1, "input": 3}}`, "input"},
		"missing output": {`{"openai:m": {"input_per_mtok": 1}}`, `"openai:m": output_per_mtok is required`},
		"negative":       {`{"openai:m": {"input_per_mtok": -1, "output_per_mtok": 1}}`, `"openai:m": input_per_mtok must be`},
		"discount > 1":   {`{"openai:m": {"input_per_mtok": 1, "output_per_mtok": 1, "batch_discount": 2}}`, "batch_discount must be a number from 0 to 1"},
		"no provider":    {`{"gpt-4o": {"input_per_mtok": 1, "output_per_mtok": 1}}`, `"gpt-4o": a model spec is provider:model`},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			_, err := price.Parse([]byte(c.in))
			if err == nil || !strings.Contains(err.Error(), c.want) {
				t.Errorf("error %v, want it to say %q", err, c.want)
			}
		})
	}
}

func TestLoadNamesTheFile(t *testing.T) {
	p := filepath.Join(t.TempDir(), "prices.json")
	if err := os.WriteFile(p, []byte(`{"openai:m": {"input_per_mtok": 1, "output_per_mtok": 2}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	tb, err := price.Load(p)
	if err != nil || tb.Source != p || tb.Len() != 1 {
		t.Fatalf("Load: %v, %+v", err, tb)
	}
	if _, err := price.Load(p + ".missing"); err == nil || !strings.Contains(err.Error(), "prices.json.missing") {
		t.Errorf("missing file: %v", err)
	}
}

func TestMeterReportsAnsweredCallsOnly(t *testing.T) {
	tb, _ := price.Parse([]byte(`{"openai:m": {"input_per_mtok": 1, "output_per_mtok": 2}}`))
	fail := true
	inner := model.Func(func(ctx context.Context, req model.Request) (model.Response, error) {
		if fail {
			return model.Response{}, &model.Error{Kind: model.KindTransport, Provider: "openai"}
		}
		return model.Response{Content: "{}", Usage: model.Usage{PromptTokens: 1000, CompletionTokens: 500}}, nil
	})
	var paid []price.Paid
	m := price.NewMeter(inner, "openai:m", tb, func(p price.Paid) { paid = append(paid, p) })
	if _, err := m.Complete(t.Context(), model.Request{}); err == nil {
		t.Fatal("want the transport error")
	}
	if len(paid) != 0 {
		t.Fatalf("a failed call was paid: %+v", paid)
	}
	fail = false
	if _, err := m.Complete(t.Context(), model.Request{}); err != nil {
		t.Fatal(err)
	}
	if len(paid) != 1 || !paid[0].Priced || !near(paid[0].CostUSD, 0.002) || paid[0].Model != "openai:m" {
		t.Errorf("paid %+v, want one call of openai:m at $0.002", paid)
	}
	u := price.NewMeter(inner, "openai:unknown", tb, func(p price.Paid) { paid = append(paid, p) })
	if u.Priced() {
		t.Error("an unknown model reports a price")
	}
	if _, err := u.Complete(t.Context(), model.Request{}); err != nil {
		t.Fatal(err)
	}
	if last := paid[len(paid)-1]; last.Priced || last.CostUSD != 0 || last.Usage.Total() != 1500 {
		t.Errorf("unpriced call reported %+v, want its tokens and no cost", last)
	}
}
