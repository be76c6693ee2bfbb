package schemas

import "testing"

func BenchmarkValidateInvoice(b *testing.B) {
	r, err := Builtin()
	if err != nil {
		b.Fatal(err)
	}
	s, _ := r.Get("invoice")
	for _, bc := range []struct {
		name string
		doc  []byte
	}{{"valid", invoiceValid}, {"invalid", invoiceInvalid}} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(bc.doc)))
			for b.Loop() {
				if _, _, err := s.Validate(bc.doc, 0); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkValidateInvoiceParallel(b *testing.B) {
	r, err := Builtin()
	if err != nil {
		b.Fatal(err)
	}
	s, _ := r.Get("invoice")
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if _, _, err := s.Validate(invoiceInvalid, 0); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

// BenchmarkValidateGeneral is the general validator alone on the same
// documents: the fast path's side-by-side baseline.
func BenchmarkValidateGeneral(b *testing.B) {
	r, err := Builtin()
	if err != nil {
		b.Fatal(err)
	}
	s, _ := r.Get("invoice")
	b.ReportAllocs()
	b.SetBytes(int64(len(invoiceValid)))
	for b.Loop() {
		if ds, _, err := s.validate(invoiceValid, 0); err != nil || len(ds) > 0 {
			b.Fatal(err, ds)
		}
	}
}
