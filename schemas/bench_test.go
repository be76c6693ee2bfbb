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

// BenchmarkValidateUnion: a valid document of a schema with discriminated
// oneOf unions, not and if/then/else, through Validate (the fast path) and
// through the general validator alone.
func BenchmarkValidateUnion(b *testing.B) {
	s := mustCompile(b, "union", unionSchema)
	doc := []byte(`{"pay":{"kind":"iban","iban":"DE89370400440532013000"},"id":"A-17","qty":3,"note":"leave at the door",` +
		`"tags":["fragile","gift"],"ship":{"country":"US","zip":"94107"},"size":2,"list":[1,2,3]}`)
	if s.fast == nil || !s.fast.Accept(doc) {
		b.Fatal("the fast path does not decide the benchmark document")
	}
	for _, bc := range []struct {
		name string
		run  func() ([]Diagnostic, int, error)
	}{
		{"fast", func() ([]Diagnostic, int, error) { return s.Validate(doc, 0) }},
		{"general", func() ([]Diagnostic, int, error) { return s.validate(doc, 0) }},
	} {
		b.Run(bc.name, func(b *testing.B) {
			b.ReportAllocs()
			b.SetBytes(int64(len(doc)))
			for b.Loop() {
				if ds, _, err := bc.run(); err != nil || len(ds) > 0 {
					b.Fatal(err, ds)
				}
			}
		})
	}
}
