package eval

import (
	"math/big"
	"strings"
	"testing"
	"time"
)

// TestNumberForm: numbers are equal by value, whatever their exponent, in
// the key (multisets) and in equal (scalars); 1e3000000 is past big.Rat's
// exponent limit, where the old comparison fell back to the text.
func TestNumberForm(t *testing.T) {
	cmp := newComparer()
	same := [][2]string{{"30", "30.0"}, {"30", "3e1"}, {"0.3e2", "30"}, {"-0", "0"}, {"0.000", "0e9"}, {"-0.0e-5", "0"},
		{"1e2", "100"}, {"-5", "-5.00"}, {"1.5E+3", "1500"}, {"0.001", "1e-3"}, {"12.3400", "1234e-2"},
		{"1e3000000", "10e2999999"}, {"1e1000000", "0.1e1000001"}, {"1e-3000000", "100e-3000002"},
		{"1e99999999999999999999", "10e99999999999999999998"}, {"1e000000000000000000000000001", "10"}}
	for _, p := range same {
		a, b := mustDecode(t, p[0]), mustDecode(t, p[1])
		if ka, kb := cmp.key(a), cmp.key(b); ka != kb {
			t.Errorf("key(%s) = %q, key(%s) = %q: want one key", p[0], ka, p[1], kb)
		}
		if !cmp.equal(a, b) || !cmp.equal(b, a) {
			t.Errorf("%s and %s are not equal", p[0], p[1])
		}
	}
	differ := [][2]string{{"12", "-12"}, {"1e3000000", "1e2999999"}, {"1e3000000", "-1e3000000"}, {"0.1", "1"},
		{"12345678901234567890", "12345678901234567891"}, {"1e99999999999999999999", "1e99999999999999999998"}, {"1", "1e-0000000000000000000001"}}
	for _, p := range differ {
		a, b := mustDecode(t, p[0]), mustDecode(t, p[1])
		if ka, kb := cmp.key(a), cmp.key(b); ka == kb {
			t.Errorf("%s and %s share key %q", p[0], p[1], ka)
		}
		if cmp.equal(a, b) {
			t.Errorf("%s and %s are equal", p[0], p[1])
		}
	}
}

// TestNumberFormLinear: a number with a long exponent or a long mantissa
// is compared in time linear in its length (big.Rat took ~0.5 s for
// 1e1000000 alone); the bound is loose, for a loaded machine.
func TestNumberFormLinear(t *testing.T) {
	cmp := newComparer()
	long := "0." + strings.Repeat("0", 1<<20) + "1e1048577"
	start := time.Now()
	for range 10 {
		if !cmp.equal(mustDecode(t, "1e1000000"), mustDecode(t, "10e999999")) || !cmp.equal(mustDecode(t, long), mustDecode(t, "1")) {
			t.Fatal("not equal")
		}
	}
	if d := time.Since(start); d > time.Second {
		t.Errorf("10 comparisons took %v", d)
	}
}

// FuzzNumberForm: two numbers share a form exactly when big.Rat says they
// are equal (exponents kept small enough for big.Rat).
func FuzzNumberForm(f *testing.F) {
	f.Add("30", "3e1")
	f.Add("-0.0", "0")
	f.Add("1.25e-2", "0.0125")
	f.Add("100", "1e3")
	f.Fuzz(func(t *testing.T, a, b string) {
		fa, okA := appendNumber(nil, a)
		fb, okB := appendNumber(nil, b)
		if !okA || !okB || len(a) > 64 || len(b) > 64 {
			return
		}
		var ra, rb big.Rat
		if _, ok := ra.SetString(a); !ok {
			return // past big.Rat's exponent limit
		}
		if _, ok := rb.SetString(b); !ok {
			return
		}
		if (string(fa) == string(fb)) != (ra.Cmp(&rb) == 0) {
			t.Fatalf("%q (%s) and %q (%s): big.Rat equal %v", a, fa, b, fb, ra.Cmp(&rb) == 0)
		}
	})
}
