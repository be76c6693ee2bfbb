// Package sim is the built-in simulated model behind model.Model, for demos,
// rehearsal and load tests: no network, no key. It depends on nothing of
// the pipeline's but heal's request and response types.
//
// A Model reads the request's JSON Schema and writes a valid instance with
// realistic-looking values, deterministic from Config.Seed, the job id and
// the attempt, then injects the faults real models make at configurable
// rates: code fences, prose around the JSON and trailing commas (which the
// sanitizer repairs), numbers written as "12,50", missing required fields
// and enum values in the wrong case (which need a heal turn). On a heal
// turn it rereads its previous answer and fixes each path named in the
// feedback ("- /items/2/price: expected ..., got ...") with probability
// Config.FixRate. It never satisfies `pattern`: it writes a plain word
// there, so a schema with a strict pattern shows up in the dead letters.
// Config.Force produces one failure class on demand (truncated, grammar,
// transport, auth, request_error, no_progress).
//
//	m, err := sim.New(sim.DefaultConfig())
//	if err != nil {
//		return err // wraps sim.ErrConfig
//	}
//	resp, err := m.Complete(ctx, model.Request{Schema: schema, JobID: "inv-1", Attempt: 1,
//		Messages: []model.Message{{Role: "user", Content: "Extract the invoice."}}})
//
// The files hold one concept each: sim.go the model and its config,
// schema.go the schema compiler, gen.go the value generator, value.go the
// ordered JSON values and their writer, faults.go the fault injection,
// fix.go the heal turn (reading the feedback, fixing the named paths).
package sim
