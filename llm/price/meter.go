package price

import (
	"context"

	"github.com/llmpipeline/pipeline/heal"
)

// Paid is one answered call: the model spec, the usage the provider
// reported and what it cost (Priced false: the model is priced nowhere,
// CostUSD is 0 and the cost unknown).
type Paid struct {
	Model   string
	Usage   model.Usage
	CostUSD float64
	Priced  bool
}

// Meter wraps a model.Model and reports every answered call to its paid
// function, whether or not the caller still wants the answer: a call the
// provider answered is paid even when the job was cancelled meanwhile. A
// call that failed (no answer, no usage) is not reported.
type Meter struct {
	m      model.Model
	spec   string
	price  Price
	priced bool
	paid   func(Paid)
}

var _ model.Model = (*Meter)(nil)

// NewMeter wraps m, the model of spec, priced by t. paid may be nil.
func NewMeter(m model.Model, spec string, t *Table, paid func(Paid)) *Meter {
	p, ok := t.Lookup(spec)
	return &Meter{m: m, spec: spec, price: p, priced: ok, paid: paid}
}

// Priced reports whether the table knows the model's price.
func (m *Meter) Priced() bool { return m.priced }

// Provider is the wrapped model's provider name, when it has one.
func (m *Meter) Provider() string {
	if p, ok := m.m.(interface{ Provider() string }); ok {
		return p.Provider()
	}
	return ""
}

// Complete calls the wrapped model and reports the call when it answered.
func (m *Meter) Complete(ctx context.Context, req model.Request) (model.Response, error) {
	resp, err := m.m.Complete(ctx, req)
	if err == nil && m.paid != nil {
		p := Paid{Model: m.spec, Usage: resp.Usage, Priced: m.priced}
		if m.priced {
			p.CostUSD = m.price.Cost(resp.Usage)
		}
		m.paid(p)
	}
	return resp, err
}
