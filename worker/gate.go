package worker

import (
	"context"
	"errors"
	"sync"
)

// AnyGate is a workers' gate that opens as soon as one of gates does: with
// fallback models, jobs may be fetched while any model of the chain can
// take a call (the heal loop sends each job to the first one available).
// A nil gate is open. It returns ctx's error, or the gates' errors when
// every one of them failed.
func AnyGate(gates ...func(context.Context) error) func(context.Context) error {
	var live []func(context.Context) error
	for _, g := range gates {
		if g == nil {
			return nil // always open
		}
		live = append(live, g)
	}
	switch len(live) {
	case 0:
		return nil
	case 1:
		return live[0]
	}
	return func(ctx context.Context) error {
		ctx, cancel := context.WithCancel(ctx)
		errs := make(chan error, len(live))
		var wg sync.WaitGroup
		defer func() {
			cancel() // the gates still waiting return with ctx's error
			wg.Wait()
		}()
		for _, g := range live {
			wg.Go(func() { errs <- g(ctx) })
		}
		var all []error
		for range live {
			err := <-errs
			if err == nil {
				return nil
			}
			all = append(all, err)
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		return errors.Join(all...)
	}
}
