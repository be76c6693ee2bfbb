package schemas

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"syscall"
	"testing"
	"time"
)

// cpuTime is the process's user and system CPU time so far.
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// groundCorpus is about size bytes of invoice-like text, and 1,000 values
// in document order: all but normalized+absent quoted exactly, normalized
// of them with their case and white space changed, absent found nowhere.
// mixed text has a non-ASCII word (accents, CJK, Greek, Cyrillic, emoji)
// in two of every three; else one in twenty.
func groundCorpus(size, count int, mixed bool, normalized, absent int) (text string, values []string) {
	rng := rand.New(rand.NewPCG(1, 2))
	ascii := []string{"invoice", "total", "amount", "due", "item", "order", "net", "tax", "vendor", "quantity", "unit", "price",
		"shipping", "address", "street", "payment", "terms", "days", "account", "number"}
	other := []string{"Société", "Générale", "株式会社", "請求書", "Müller", "🧾", "Zürich", "📦", "quantité", "número", "παράδειγμα", "пример"}
	var sb strings.Builder
	for sb.Len() < size {
		for i := range 12 {
			if i > 0 {
				sb.WriteByte(' ')
			}
			if n := rng.IntN(60); (mixed && n < 40) || n < 3 {
				sb.WriteString(other[rng.IntN(len(other))])
			} else {
				sb.WriteString(ascii[rng.IntN(len(ascii))])
			}
		}
		fmt.Fprintf(&sb, " %d-%d.\n", sb.Len(), rng.IntN(1000))
	}
	text = sb.String()
	r := []rune(text)
	step := len(r) / count
	for i := range count {
		at := i*step + rng.IntN(step/2)
		v := strings.TrimSpace(string(r[at : at+8+rng.IntN(24)]))
		switch {
		case absent > 0 && i%(count/absent) == 7:
			v = "absent value " + fmt.Sprint(i)
		case normalized > 0 && i%(count/normalized) == 3:
			v = strings.ToUpper(strings.ReplaceAll(v, " ", "  "))
		}
		values = append(values, v)
	}
	return text, values
}

// BenchmarkGround grounds 1,000 values against a 1 MB and a 2 MB input:
// a fresh Input each time (the code point index and the normalised text
// are built within), as for a new job. quoted: 980 values quoted exactly,
// 10 normalised, 10 absent, in mostly ASCII text; heavy: 40 normalised and
// 20 absent in text where two words in three are not ASCII.
func BenchmarkGround(b *testing.B) {
	s := mustCompile(b, "g", `{"type":"object","properties":{"values":{"type":"array","x-grounded":true,"items":{"type":"string"}}}}`)
	for _, mix := range []struct {
		name               string
		mixed              bool
		normalized, absent int
	}{{"quoted", false, 10, 10}, {"heavy", true, 40, 20}} {
		for _, mb := range []int{1, 2} {
			text, values := groundCorpus(mb<<20, 1000, mix.mixed, mix.normalized, mix.absent)
			doc, _ := json.Marshal(map[string]any{"values": values})
			b.Run(fmt.Sprintf("%s/values=1000/input=%dMB", mix.name, mb), func(b *testing.B) {
				b.ReportAllocs()
				b.SetBytes(int64(len(text)))
				cpu, n := cpuTime(b), 0
				for b.Loop() {
					diags, _, gr, err := s.Check(doc, NewInput(text), 1000)
					if err != nil || len(diags) != mix.absent || len(gr) != 1000-mix.absent {
						b.Fatalf("%d diagnostics, %d grounded, %v", len(diags), len(gr), err)
					}
					n++
				}
				// CPU time, steadier than the wall clock on a shared machine.
				b.ReportMetric(float64((cpuTime(b)-cpu).Microseconds())/1000/float64(n), "cpu-ms/op")
			})
		}
	}
}

// ruleDoc is a 2 KB invoice with line items.
func ruleDoc() []byte {
	var items []map[string]any
	for i := range 16 {
		items = append(items, map[string]any{"sku": fmt.Sprintf("SKU-%04d", i), "description": "Hex bolt M8 zinc plated",
			"quantity": i + 1, "unit_price": 1.25, "amount": float64(i+1) * 1.25})
	}
	doc, _ := json.Marshal(map[string]any{"invoice_number": "INV-2026-0042", "vendor": "Müller & Söhne GmbH",
		"currency": "EUR", "subtotal": 170.0, "tax": 32.3, "total": 202.3, "line_items": items})
	return doc
}

// BenchmarkRule evaluates one rule on a 2 KB invoice, the program compiled
// once with the schema: eval is the rule alone on the decoded document,
// check is Check (decode, walk, convert, evaluate).
func BenchmarkRule(b *testing.B) {
	s := mustCompile(b, "r", `{"type":"object","x-rules":[{"rule":"self.total == self.subtotal + self.tax","path":"/total"}]}`)
	doc := ruleDoc()
	if len(doc) < 1700 || len(doc) > 2300 {
		b.Fatalf("document is %d bytes, want about 2 KB", len(doc))
	}
	b.Run("eval", func(b *testing.B) {
		root, err := decodeOrdered(doc)
		if err != nil {
			b.Fatal(err)
		}
		self := &selfActivation{self: root.celValue()}
		r := s.compiled.Extensions[0].(*truthExt).rules[0]
		b.ReportAllocs()
		cpu, n := cpuTime(b), 0
		for b.Loop() {
			if ok, err := r.eval(self); !ok || err != nil {
				b.Fatal(ok, err)
			}
			n++
		}
		b.ReportMetric(float64((cpuTime(b)-cpu).Nanoseconds())/float64(n), "cpu-ns/op")
	})
	b.Run("check", func(b *testing.B) {
		b.ReportAllocs()
		b.SetBytes(int64(len(doc)))
		cpu, n := cpuTime(b), 0
		for b.Loop() {
			if diags, _, _, err := s.Check(doc, nil, 0); len(diags) > 0 || err != nil {
				b.Fatal(diags, err)
			}
			n++
		}
		b.ReportMetric(float64((cpuTime(b)-cpu).Nanoseconds())/float64(n), "cpu-ns/op")
	})
}

// TestGroundingIsLinear guards against a quadratic search: 4 times the
// values against 4 times the input (one value per KB, as a document's
// extraction grows with it) costs about 4 times the CPU, not 16 (as when
// every value is searched from the start of the input).
func TestGroundingIsLinear(t *testing.T) {
	if testing.Short() {
		t.Skip("measures CPU time")
	}
	s := mustCompile(t, "g", `{"type":"object","properties":{"values":{"type":"array","x-grounded":true,"items":{"type":"string"}}}}`)
	cost := func(size, count int) time.Duration {
		text, values := groundCorpus(size, count, false, count/100, count/100)
		doc, _ := json.Marshal(map[string]any{"values": values})
		best := time.Duration(1 << 62)
		for range 3 {
			var ru0, ru1 syscall.Rusage
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
			if _, _, gr, err := s.Check(doc, NewInput(text), count); err != nil || len(gr) != count-count/100 {
				t.Fatalf("%d grounded, %v", len(gr), err)
			}
			_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
			best = min(best, time.Duration(ru1.Utime.Nano()+ru1.Stime.Nano()-ru0.Utime.Nano()-ru0.Stime.Nano()))
		}
		return best
	}
	small, large := cost(256<<10, 250), cost(1<<20, 1000)
	t.Logf("250 values in 256 KB: %v; 1,000 values in 1 MB: %v (%.1fx)", small, large, float64(large)/float64(max(small, 1)))
	if large > 8*max(small, time.Millisecond) {
		t.Errorf("4x the values in 4x the input took %.1fx the CPU (%v, %v): not linear", float64(large)/float64(small), small, large)
	}
}
